"""What several netbench processes share: a sweep folder (one sweep at a time), a filesystem (room for the
capture, checked before anything is built) and, between `netbench worker` ranks, JSON that rank 0 checks."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import pytest

from netbench.capture import space
from netbench.cli.app import main
from netbench.emulation import netns
from netbench.orchestrator.multihost.rank_payload import PayloadError, check_payload
from netbench.orchestrator.sweep.sweep import SweepBusy, sweep_lock

REPO = Path(__file__).resolve().parents[1]


def _cli(capsys, *argv: str) -> tuple[int, str]:
    try:
        main(list(argv))
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    return code, capsys.readouterr().err


def test_a_second_sweep_on_one_folder_is_refused(tmp_path: Path) -> None:
    with sweep_lock(tmp_path):
        with pytest.raises(SweepBusy, match=str(tmp_path)):
            with sweep_lock(tmp_path):
                pass
    with sweep_lock(tmp_path):  # free again once the first ended
        pass


def test_the_sweep_lock_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("keep")
    out = tmp_path / "sweep"
    out.mkdir()
    (out / ".sweep.lock").symlink_to(target)
    with pytest.raises(OSError):
        with sweep_lock(out):
            pass
    assert target.read_text() == "keep"


@pytest.mark.skipif(os.geteuid() != 0, reason="the sweep command needs root")
def test_sweep_cli_exits_2_naming_the_folder_another_sweep_holds(tmp_path: Path, capsys) -> None:
    out = tmp_path / "sweep"
    out.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; "
            "from netbench.orchestrator.sweep.sweep import sweep_lock\n"
            "with sweep_lock(Path(sys.argv[1])):\n print('held', flush=True); time.sleep(60)",
            str(out),
        ],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        code, err = _cli(
            capsys,
            "sweep",
            "--bw",
            "100mbit",
            "--nodes",
            "2",
            "--steps",
            "1",
            "--warmup",
            "0",
            "--no-calibrate",
            "--out",
            str(out),
        )
    finally:
        holder.kill()
        holder.wait()
    assert code == 2 and len(err.strip().splitlines()) == 1 and str(out) in err and "another sweep" in err, err
    assert sorted(p.name for p in out.iterdir()) == [".sweep.lock"]  # nothing of the sweep was written


Run = namedtuple("Run", "capture keep_pcap out_dir cluster")
Cluster = namedtuple("Cluster", "nodes")


def test_capture_room_is_the_tcpdump_cap_per_port() -> None:
    one = space.port_bytes()
    assert 460e6 < one < 480e6  # MAX_PACKETS records of SNAPLEN + 16 bytes
    runs = [
        Run(True, False, Path("."), Cluster(4)),
        Run(True, False, Path("."), Cluster(8)),
        Run(False, False, Path("."), Cluster(64)),
    ]
    assert space.needed_bytes(runs) == 8 * one  # removed after each run: the largest counts
    kept = [Run(True, True, Path("."), Cluster(2)), Run(True, True, Path("."), Cluster(2))]
    assert space.needed_bytes(kept) == 4 * one  # kept pcaps add up


@pytest.mark.skipif(os.geteuid() != 0, reason="`netbench run` needs root")
@pytest.mark.parametrize("command", [["run"], ["exec", "--nodes", "4"]], ids=["run", "exec"])
def test_a_capture_without_room_is_refused_before_anything_is_built(
    tmp_path: Path, capsys, monkeypatch, command
) -> None:
    usage = namedtuple("usage", "total used free")
    asked: list[Path] = []
    monkeypatch.setattr(
        space.shutil, "disk_usage", lambda path: asked.append(Path(path)) or usage(10 << 30, 9 << 30, 1 << 30)
    )
    monkeypatch.setattr(space.Capture, "available", staticmethod(lambda: True))
    namespaces = netns.list_netns()
    out = tmp_path / "runs"
    argv = (
        [*command, "--nodes", "4", "--bw", "100mbit", "--out", str(out)]
        if command == ["run"]
        else [*command, "--out", str(out), "--", "true"]
    )
    code, err = _cli(capsys, *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--capture" in err and "1 GiB free" in err, err
    assert asked == [tmp_path] and not out.exists() and netns.list_netns() == namespaces


def _payload(rank: int = 1, **node) -> bytes:
    return json.dumps({"records": [{"event": "step", "step": 0}], "node": {"rank": rank, "host": "h", **node}}).encode()


def test_rank_payloads_are_json_checked_field_by_field() -> None:
    assert check_payload(_payload(), 1) == {"records": [{"event": "step", "step": 0}], "node": {"rank": 1, "host": "h"}}
    bad = [
        b"\x80\x04\x95 pickle",
        b"[]",
        _payload(rank=2),
        _payload(addresses="10.0.0.1"),
        _payload(shell="rm -rf /"),
        json.dumps({"records": "x", "node": {"rank": 1}}).encode(),
        b"",
    ]
    for raw in bad:
        with pytest.raises(PayloadError, match="rank 1") as info:
            check_payload(raw, 1)
        assert "\n" not in str(info.value)


GATHER = """
import json, os, sys
import torch.distributed as dist
from netbench.orchestrator.multihost.rank_payload import MAX_PAYLOAD_BYTES, broadcast_flags, gather_json
rank = int(sys.argv[1])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{sys.argv[2]}", rank=rank, world_size=3)
payload = {"records": [{"event": "step", "step": rank}], "node": {"rank": rank, "host": "ü" * rank}}
if rank == 2:
    payload["pad"] = "x" * (MAX_PAYLOAD_BYTES + 1)
got = gather_json(payload, rank, 3)
flags = broadcast_flags([True, False, True] if rank == 0 else [], 3)
decoded = {r: (json.loads(v) if v is not None else None) for r, v in got.items()} if got else None
print(json.dumps({"got": decoded, "flags": flags}))
dist.destroy_process_group()
"""


def test_ranks_exchange_json_over_gloo_and_an_oversized_payload_is_dropped() -> None:
    pytest.importorskip("torch")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", GATHER, str(rank), str(port)], env=env, stdout=subprocess.PIPE, text=True
        )
        for rank in range(3)
    ]
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0]
    got = outs[0]["got"]
    assert got["0"]["node"] == {"rank": 0, "host": ""} and got["1"]["node"]["host"] == "ü" and got["2"] is None
    assert outs[1]["got"] is None and all(o["flags"] == [True, False, True] for o in outs)
