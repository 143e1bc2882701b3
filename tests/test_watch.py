"""The watcher waits on signals while workers join: a worker that uses the CPU is not stalled, one that sits idle is,
and a failure names the rank with its own error."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netbench.emulation.spec import ClusterSpec
from netbench.orchestrator.activity import Activity, Stalled, cpu_seconds, wait_while_working
from netbench.orchestrator.run.timeouts import FLOOR_S, collective_timeout_s, setup_timeout_s
from netbench.orchestrator.run.watch import Limits, WorkerFailure, wait_for_workers
from netbench.rundir.layout import RunDir

BUSY = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end: pass\n"
IDLE = "import time\ntime.sleep({s})\n"


def _worker(code: str, record: Path | None = None, events: tuple[str, ...] = ()) -> subprocess.Popen:
    """A stand-in worker: runs ``code``, then appends ``events`` to ``record`` half a second apart and exits 0."""
    writes = "".join(f"open({str(record)!r}, 'a').write(json.dumps({e}) + '\\n')\ntime.sleep(0.5)\n" for e in events)
    return subprocess.Popen([sys.executable, "-c", "import json, time\n" + code + writes])


def _run_dir(tmp_path: Path) -> RunDir:
    return RunDir.create(tmp_path, "test", "abcdef")


START = '{"event": "start", "rank": 0}'
DONE = '{"event": "done", "rank": 0}'


def test_cpu_seconds_counts_a_busy_process_and_not_an_idle_one() -> None:
    busy, idle = _worker(BUSY.format(s=1.5)), _worker(IDLE.format(s=1.5))
    try:
        time.sleep(1.2)
        assert cpu_seconds(busy.pid) > 0.3 and cpu_seconds(idle.pid) < 0.2
    finally:
        busy.wait(), idle.wait()
    assert cpu_seconds(busy.pid) is None  # reaped: gone


def test_activity_idles_only_while_nothing_works() -> None:
    idle = _worker(IDLE.format(s=2))
    activity = Activity()
    try:
        time.sleep(1.0)
        assert activity.idle_s([idle.pid]) == 0.0  # the first look marks
        time.sleep(0.5)
        assert activity.idle_s([idle.pid]) >= 0.4
        activity.mark()
        assert activity.idle_s([idle.pid]) < 0.1
    finally:
        idle.wait()


def test_wait_while_working_ends_on_the_signal_or_an_idle_process() -> None:
    busy = _worker(BUSY.format(s=3))
    began = time.monotonic()
    try:
        wait_while_working(lambda: time.monotonic() - began > 2.0, busy.pid, lambda: busy.poll() is None, stall_s=0.5)
    finally:
        busy.wait()
    idle = _worker(IDLE.format(s=5))
    try:
        with pytest.raises(Stalled, match="used no CPU"):
            wait_while_working(lambda: False, idle.pid, lambda: idle.poll() is None, stall_s=1.0)
    finally:
        idle.kill(), idle.wait()


def test_a_worker_that_takes_long_to_join_while_working_is_waited_for(tmp_path: Path) -> None:
    """Three seconds of CPU before it joins, with a joining limit of one second: still no failure."""
    run_dir = _run_dir(tmp_path)
    proc = _worker(BUSY.format(s=3), run_dir.records_path(0), (START, DONE))
    joined: list[bool] = []
    wait_for_workers(
        [proc], run_dir, 0, Limits(join_limit_s=1.0, step_limit_s=5.0), lambda r: r, joined=lambda: joined.append(True)
    )
    assert joined == [True]


def test_the_wait_ends_at_the_done_records_while_the_workers_still_exit(tmp_path: Path) -> None:
    """A worker that takes seconds to exit after its last record (leaving the process group) is not waited for."""
    run_dir = _run_dir(tmp_path)
    records = str(run_dir.records_path(0))
    code = f"import time\nopen({records!r}, 'a').write({START!r} + '\\n' + {DONE!r} + '\\n')\ntime.sleep(30)\n"
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        began = time.monotonic()
        wait_for_workers([proc], run_dir, 0, Limits(join_limit_s=60.0, step_limit_s=60.0), lambda r: r)
        assert proc.poll() is None  # still on its way out: its done record ended the wait
        assert time.monotonic() - began < 10.0
    finally:
        proc.kill(), proc.wait()


def test_a_worker_that_joins_nothing_and_idles_fails_the_run_naming_it(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    procs = [_worker(IDLE.format(s=30)), _worker(IDLE.format(s=30))]
    run_dir.records_path(0).write_text(json.dumps({"event": "start", "rank": 0}) + "\n")
    try:
        began = time.monotonic()
        with pytest.raises(
            WorkerFailure, match=r"rank 1 \(node 0\) did not join the process group: .* \(1 of 2 had not joined\)"
        ):
            wait_for_workers(procs, run_dir, 1, Limits(join_limit_s=1.0, step_limit_s=60.0), lambda r: 0)
        assert time.monotonic() - began < 10
    finally:
        for p in procs:
            p.kill(), p.wait()


def test_a_worker_that_fails_is_named_with_its_own_error(tmp_path: Path) -> None:
    run_dir = _run_dir(tmp_path)
    error = '{"event": "error", "rank": 0, "error": "could not reach the rendezvous store"}'
    proc = _worker("", run_dir.records_path(0), (error,))
    proc.wait()
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"])
    with pytest.raises(WorkerFailure, match=r"^rank 0 exited with code 1: could not reach the rendezvous store$"):
        wait_for_workers([proc], run_dir, 1, Limits(join_limit_s=60.0, step_limit_s=60.0), lambda r: r)


def test_setup_limits_grow_with_workers_per_core_and_dilation() -> None:
    from test_timeouts import config  # the 2-node GPT-2-blocks run of the collective timeout's tests

    two = config(1e9, "dct")
    star64 = ClusterSpec.model_validate({**two.cluster.model_dump(), "nodes": 64})  # validated: the star of 64
    many = two.model_copy(update={"cluster": star64})
    assert setup_timeout_s(many, cpus=2) > 4 * setup_timeout_s(two, cpus=2) > 4 * FLOOR_S
    assert setup_timeout_s(two, cpus=2) >= collective_timeout_s(two)
    assert collective_timeout_s(many, dilation=32, cpus=2) == pytest.approx(32 * collective_timeout_s(two))
    slow_up = two.cluster.up.model_copy(update={"delay_s": 0.5})
    delayed = two.model_copy(
        update={"cluster": ClusterSpec.model_validate({**two.cluster.model_dump(), "up": slow_up})}
    )
    assert setup_timeout_s(delayed, cpus=2) > setup_timeout_s(two, cpus=2) + 2  # a handshake per peer over the delay
