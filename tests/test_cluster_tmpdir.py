"""A cluster's own temporary directory: every process its namespaces start has it as ``$TMPDIR``, and teardown removes
it, so what a program leaves there (torchrun's ``torchelastic_*`` log folders) goes with the cluster and nothing is
left in netbench's temporary directory.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path

import pytest

from netbench.emulation.cluster import Cluster
from netbench.emulation.spec import ClusterSpec, DirectionSpec

root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
# What torchrun's agent does without --log-dir: a folder from tempfile, with a file in it, never removed.
LEAVE = "import tempfile; d = tempfile.mkdtemp(prefix='torchelastic_'); open(d + '/log', 'w').close(); print(d)"


@pytest.mark.netns
@root
def test_what_programs_leave_in_their_temporary_directory_goes_with_the_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the temporary directory netbench and its children would share
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # netbench's, read once per process
    spec = ClusterSpec(nodes=2, up=DirectionSpec(rate_bps=100e6), down=DirectionSpec(rate_bps=100e6))
    with Cluster(spec) as cluster:
        own, prefix = cluster.tmpdir, f"netbench-{cluster.names.run_id}-tmp-"
        assert own is not None and own.parent == tmp_path and own.name.startswith(prefix)
        info = own.lstat()
        assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.geteuid()
        left = [Path(node.run([sys.executable, "-c", LEAVE]).stdout.strip()) for node in cluster.nodes]
        started = cluster.switch.popen(  # a caller's own TMPDIR gives way to the cluster's
            [sys.executable, "-c", LEAVE], env={"TMPDIR": str(tmp_path)}, stdout=-1, text=True
        )
        left.append(Path(started.communicate(timeout=60)[0].strip()))
        assert [p.parent for p in left] == [own] * 3 and all((p / "log").is_file() for p in left)
        cluster.down()
    assert list(tmp_path.iterdir()) == []
