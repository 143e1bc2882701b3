"""Worker record files: a fresh file per attempt, never through a symlink, and in `netbench worker`
no rank drops its records before rank 0 has them on disk."""

from __future__ import annotations

import multiprocessing
import socket
from pathlib import Path

import pytest

from netbench.emulation.spec import ClusterSpec, DirectionSpec
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.multihost import torchrun as hosts
from netbench.orchestrator.run import results
from netbench.rundir.records import RecordWriter, set_aside
from netbench.worker.spec import WorkerSpec, resolve


def test_a_record_file_is_never_appended_to_across_attempts(tmp_path: Path) -> None:
    path = tmp_path / "rank0.jsonl"
    with RecordWriter(path) as writer:
        writer.write({"event": "step", "step": 0, "attempt": 1})
    with pytest.raises(FileExistsError):
        RecordWriter(path)
    aside = set_aside(path)
    assert aside == tmp_path / "rank0.jsonl.earlier-1" and not path.exists()
    with RecordWriter(path) as writer:
        writer.write({"event": "step", "step": 0, "attempt": 2})
    assert [r["attempt"] for r in results.read_records(path)] == [2]  # the earlier attempt's line is not mixed in
    assert [r["attempt"] for r in results.read_records(aside)] == [1]


def test_a_planted_symlink_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / "rank0.jsonl").symlink_to(victim)
    with pytest.raises(FileExistsError):
        RecordWriter(tmp_path / "rank0.jsonl")
    assert victim.read_text() == "precious\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, port: int, out: str, rank0_fails: bool, queue) -> None:
    """One `netbench worker` rank's end of run: records on disk, then _gather_and_save, then _leave."""
    import torch.distributed as dist

    env = {
        "RANK": str(rank),
        "WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "LOCAL_RANK": "0",
    }
    cluster = ClusterSpec(nodes=2, up=DirectionSpec(rate_bps=100e6), down=DirectionSpec(rate_bps=100e6))
    config = RunConfig(cluster=cluster, steps=1, warmup_steps=0, out_dir=Path(out))
    unshaped = hosts.star_of_hosts(2, 1, rank, "lo", None, 100e6)
    plan = hosts.plan(config, resolve(WorkerSpec(iface="lo", out_path="-"), env), "gather1", unshaped, 5.0, environ=env)
    with RecordWriter(plan.partial) as writer:
        writer.write({"event": "step", "rank": rank, "step": 0})
        writer.write({"event": "done", "rank": rank})
    if rank0_fails and rank == 0:

        def disk_full(*_args):
            raise OSError(28, "No space left on device")

        hosts._save_records = disk_full
    import datetime as dt

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=dt.timedelta(seconds=5)
    )
    state: dict = {}
    try:
        hosts._gather_and_save(plan, {"rank": rank}, 0.0, state)
    except Exception as exc:  # noqa: BLE001 - the failure under test
        state["error"] = type(exc).__name__
    finally:
        dist.destroy_process_group()
    if rank != 0:
        outcome = hosts._leave(plan, 0, sent=bool(state.get("saved")))
        queue.put(
            {
                "kept": str(outcome.kept) if outcome.kept else None,
                "exists": plan.partial.exists(),
                "error": state.get("error"),
            }
        )
    else:
        queue.put({"run_dir": str(state.get("run_dir")), "error": state.get("error")})


@pytest.mark.parametrize("rank0_fails", [False, True], ids=["saved", "rank0-fails-to-save"])
def test_other_ranks_drop_their_records_only_once_rank0_saved_them(tmp_path: Path, rank0_fails: bool) -> None:
    ctx = multiprocessing.get_context("spawn")
    queue, port = ctx.Queue(), _free_port()
    procs = [ctx.Process(target=_rank, args=(r, port, str(tmp_path), rank0_fails, queue)) for r in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    answers = [queue.get(timeout=5) for _ in procs]
    other = next(a for a in answers if "kept" in a)
    rank0 = next(a for a in answers if "run_dir" in a)
    if rank0_fails:
        assert other["exists"] and other["kept"] and rank0["error"] == "OSError"  # rank 1's records stay on its host
    else:
        saved = Path(rank0["run_dir"]) / "workers" / "rank1.jsonl"
        assert [r["event"] for r in results.read_records(saved)] == ["step", "done"]
        assert not other["exists"] and other["kept"] is None and other["error"] is None
