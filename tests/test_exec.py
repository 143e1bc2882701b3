"""`netbench exec` and `--workload python:MODULE:FACTORY`, through the installed `netbench` script.

Every outcome a user can meet: a plain torch.distributed program and a torchrun-style launch,
the replicators in a user's own loop (per-step records, the model beside them), a failing node,
a hanging program (--timeout), Ctrl-C, and bad input (one line, exit 2, nothing built). Each run
is checked for leftovers by its own run id: other runs may share the host.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import leftovers
import pandas as pd
import psutil
import pytest
from leftovers import wait_until

REPO = Path(__file__).resolve().parents[1]
NETBENCH = shutil.which("netbench", path=str(Path(sys.executable).parent)) or "netbench"
root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
# A program that records steps without torch (mark_step), then fails on rank 1 or waits on rank 0.
STEPS_THEN = (
    "import netbench, os, sys, time\n"
    "for _ in range(4): netbench.mark_step()\n"
    "print('stepped', flush=True)\n"
    "{tail}\n"
    "# {marker}\n"
)  # the marker finds the program's processes, even once their namespace is gone


def _marker(tmp_path: Path) -> str:
    return f"netbench-exec-test-{os.getpid()}-{tmp_path.name}"


def program(tmp_path: Path, tail: str) -> str:
    return STEPS_THEN.format(tail=tail, marker=_marker(tmp_path))


def survivors(tmp_path: Path) -> list[int]:
    """Processes still running a test's program (found by its marker, not by namespace)."""
    marker = _marker(tmp_path)
    return [p.pid for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or ())]


def netbench(*args: str, cwd: Path = REPO, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([NETBENCH, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def exec_json(
    out: Path, *args: str, command: list[str], timeout: float = 300
) -> tuple[subprocess.CompletedProcess, dict]:
    done = netbench("exec", "--json", "--out", str(out), *args, "--", *command, timeout=timeout)
    return done, json.loads(done.stdout) if done.stdout.strip() else {}


def run_json(result: dict) -> dict:
    return json.loads((Path(result["run_dir"]) / "run.json").read_text())


# --------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "args, expected",
    [
        (["exec"], "no COMMAND"),
        (["exec", "--nodes", "2", "--"], "no COMMAND"),
        (["exec", "--", "netbench-no-such-program"], "'netbench-no-such-program' not found"),
        (["exec", "--", "./no/such/file"], "not an executable file"),
        (["exec", "--timeout", "0", "--", "true"], "--timeout"),
        (["exec", "--nodes", "1", "--", "true"], "--nodes"),
        (["run", "--workload", "python:netbench_no_such_module:make"], "cannot import 'netbench_no_such_module'"),
        (["run", "--workload", "python:factories:missing"], "has no 'missing'"),
        (["run", "--workload", "python:factories:raises"], "the factory failed: no data here"),
        (["run", "--workload", "python:factories:not_a_model"], "must be a torch.nn.Module"),
        (["run", "--workload", "python:nocolon"], "--workload"),
        (["sweep", "--workload", "python:factories:raises", "--bw", "100mbit"], "the factory failed"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_anything_is_built(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    (tmp_path / "factories.py").write_text(
        "def raises():\n    raise RuntimeError('no data here')\n\ndef not_a_model():\n    return object(), []\n"
    )
    out = tmp_path / "out"
    done = netbench(args[0], "--out", str(out), *args[1:], cwd=tmp_path, timeout=120)
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("netbench: error:") and expected in lines[0], done.stderr
    assert not out.exists()


# ----------------------------------------------------------------------------------- what runs


@pytest.mark.netns
@root
def test_environment_output_and_counters_per_node(tmp_path: Path) -> None:
    """Each node sees its rank, node 0's address and its own interface; its output is prefixed, kept, and measured."""
    script = (
        'echo "env $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT '
        '$GLOO_SOCKET_IFNAME $NCCL_SOCKET_IFNAME"'
    )
    done, result = exec_json(tmp_path, "--nodes", "3", "--bw", "100mbit", command=["sh", "-c", script])
    assert done.returncode == 0 and result["status"] == "ok" and result["exit_code"] == 0, done.stderr
    master = result["nodes"][0]["address"]
    for rank in range(3):
        line = f"env {rank} 3 0 1 {master} 29500 eth0 eth0"
        assert f"[node {rank}] {line}" in done.stderr  # --json moves the programs' output to stderr
        assert line in (Path(result["run_dir"]) / "workers" / f"rank{rank}.log").read_text()
    assert [n["rank"] for n in result["nodes"]] == [0, 1, 2]
    for node in result["nodes"]:
        assert node["exit_code"] == 0 and node["cpu_time_s"] is not None and node["wall_time_s"] > 0
        for key in (
            "wire_tx_bytes",
            "wire_rx_bytes",
            "capture_wire_tx_bytes",
            "capture_wire_rx_bytes",
            "retransmissions",
        ):
            assert key in node
    assert leftovers.clean(result["run_id"])


@pytest.mark.netns
@root
def test_ranks_follow_the_rank_order_on_a_topology(tmp_path: Path) -> None:
    """--rank-order interleaved on two sites: rank r runs on node placement[r], rank 0's node is the master."""
    script = 'echo "env $RANK $MASTER_ADDR"'
    done, result = exec_json(
        tmp_path,
        "--nodes",
        "4",
        "--bw",
        "1gbit",
        "--topology",
        "sites",
        "--sites",
        "2",
        "--wan-bw",
        "100mbit",
        "--rank-order",
        "interleaved",
        "--no-capture",
        command=["sh", "-c", script],
    )
    assert done.returncode == 0 and result["status"] == "ok", done.stderr
    nodes = result["nodes"]
    assert [n["rank"] for n in nodes] == [0, 1, 2, 3] and [n["node"] for n in nodes] == [0, 2, 1, 3]
    for n in nodes:
        line = f"env {n['rank']} {nodes[0]['address']}"
        assert line in (Path(result["run_dir"]) / "workers" / f"rank{n['rank']}.log").read_text()
    assert leftovers.clean(result["run_id"])


@pytest.mark.netns
@root
def test_plain_torch_distributed_allreduce(tmp_path: Path) -> None:
    """examples/allreduce.py: exit 0, five step records per node, and wire bytes the model accounts for."""
    done, result = exec_json(
        tmp_path, "--nodes", "2", "--bw", "100mbit", command=[sys.executable, "examples/allreduce.py"]
    )
    assert done.returncode == 0 and result["status"] == "ok", done.stderr
    summary = result["summary"]
    assert summary["replicator"] == "full" and summary["steps_measured"] == 4  # 5 steps, 1 warm-up
    predicted = summary["predicted"]["wire_tx_bytes_per_step"]
    assert abs(summary["wire_tx_bytes_per_step"] / predicted - 1) < 0.10, (summary["wire_tx_bytes_per_step"], predicted)
    for node in result["nodes"]:  # five all-reduces of 10 MB: each node sends and receives 10 MB per all-reduce
        assert 5 * 10e6 < node["wire_tx_bytes"] < 5 * 10e6 * 1.15
        assert abs(node["capture_wire_tx_bytes"] / node["wire_tx_bytes"] - 1) < 0.05
    steps = pd.read_csv(Path(result["run_dir"]) / "steps.csv")
    assert sorted(steps.groupby("rank").size().tolist()) == [5, 5]
    report = netbench("report", result["run_dir"], timeout=120)
    assert report.returncode == 0 and "netbench exec" in report.stdout, report.stderr
    assert leftovers.clean(result["run_id"])


@pytest.mark.netns
@root
def test_torch_distributed_run_launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m torch.distributed.run --nnodes N --node-rank $RANK ...` on every node, as the README shows it; the
    agents' log folders (``torchelastic_*`` in their temporary directory) go with the cluster, none is left in
    netbench's."""
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    launch = (
        'echo "tmpdir $TMPDIR"; exec python -m torch.distributed.run --nnodes $WORLD_SIZE --node-rank $RANK '
        "--nproc-per-node 1 --master-addr $MASTER_ADDR --master-port $MASTER_PORT examples/allreduce.py"
    )
    done, result = exec_json(tmp_path / "runs", "--nodes", "2", command=["sh", "-c", launch])
    assert done.returncode == 0 and result["status"] == "ok", done.stderr
    assert "rank 1: 5 all-reduces of 10 MB done" in done.stderr
    assert result["summary"]["steps_measured"] == 4
    assert done.stderr.count(f"tmpdir {temp}/netbench-{result['run_id']}-tmp-") == 2  # the cluster's own, not ours
    assert list(temp.iterdir()) == []
    assert leftovers.clean(result["run_id"])


@pytest.mark.parametrize("nodes", [2, 4])
@pytest.mark.parametrize("replicator", ["dct", "full"])
@pytest.mark.netns
@root
def test_replicators_in_a_user_loop(tmp_path: Path, replicator: str, nodes: int) -> None:
    """examples/train_replicator.py: per-step records with the replicator's own phases, payload and the model."""
    done, result = exec_json(
        tmp_path, "--nodes", str(nodes), command=[sys.executable, "examples/train_replicator.py", replicator, "4"]
    )
    assert done.returncode == 0 and result["status"] == "ok", done.stderr
    summary = result["summary"]
    assert summary["replicator"] == replicator and summary["steps_measured"] == 3
    assert summary["payload_bytes_per_step"] == summary["predicted"]["payload_bytes_per_step"] > 0
    steps = pd.read_csv(Path(result["run_dir"]) / "steps.csv")
    assert (
        len(steps) == 4 * nodes
        and (steps["comm_s"] > 0).all()
        and steps["loss"].notna().all()
        and (steps["tx_bytes"] > 0).all()
    )
    trace = json.loads(
        (Path(result["run_dir"]) / "trace.json").read_text()
    )  # the user loop's steps on the timeline too
    phases = {(e["pid"], e["name"]) for e in trace["traceEvents"] if e["ph"] == "X" and e.get("cat") == "phase"}
    assert {(1 + rank, "encode") for rank in range(nodes)} <= phases and {
        (1 + rank, "decode") for rank in range(nodes)
    } <= phases
    assert leftovers.clean(result["run_id"])


@pytest.mark.netns
@root
def test_run_trains_a_python_factory_workload(tmp_path: Path) -> None:
    done = netbench(
        "run",
        "--workload",
        "python:examples.my_workload:make",
        "-r",
        "dct",
        "--steps",
        "3",
        "--warmup",
        "1",
        "--nodes",
        "2",
        "--json",
        "--out",
        str(tmp_path),
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["status"] == "ok" and summary["steps_measured"] == 3 and summary["final_loss"] is not None
    assert summary["payload_bytes_per_step"] == summary["predicted"]["payload_bytes_per_step"]
    assert leftovers.clean(summary["run_id"])


# --------------------------------------------------------------------------------- how it ends


@pytest.mark.netns
@root
def test_a_failing_node_fails_the_exec_with_its_code(tmp_path: Path) -> None:
    """Rank 1 exits 1 after recording steps; rank 0 would wait forever: it is stopped, and the steps are kept."""
    code = program(tmp_path, "sys.exit(1) if os.environ['RANK'] == '1' else time.sleep(600)")
    started = time.monotonic()
    done, result = exec_json(tmp_path, "--nodes", "2", command=[sys.executable, "-c", code])
    assert done.returncode == 1 and result["exit_code"] == 1, done.stderr
    assert time.monotonic() - started < 120
    assert result["status"] == "failed" and result["reason"] == "node 1 exited with code 1"
    nodes = result["nodes"]
    assert nodes[1]["exit_code"] == 1 and nodes[0]["stopped_by"] == "node 1 failed"
    assert run_json(result)["status"] == "failed"
    steps = pd.read_csv(Path(result["run_dir"]) / "steps.csv")
    assert sorted(steps.groupby("rank").size().tolist()) == [3, 3]  # what was measured is kept
    assert "stepped" in (Path(result["run_dir"]) / "workers" / "rank1.log").read_text()
    assert leftovers.clean(result["run_id"]) and not survivors(tmp_path)


@pytest.mark.netns
@root
def test_a_hanging_program_is_stopped_at_the_timeout(tmp_path: Path) -> None:
    started = time.monotonic()
    done, result = exec_json(
        tmp_path, "--nodes", "2", "--timeout", "3", command=[sys.executable, "-c", program(tmp_path, "time.sleep(600)")]
    )
    assert done.returncode == 124 and result["exit_code"] == 124, done.stderr
    assert time.monotonic() - started < 90
    assert result["status"] == "failed" and result["reason"].startswith("timed out after 3 s")
    assert all(n["stopped_by"] == "timeout" for n in result["nodes"])
    assert (pd.read_csv(Path(result["run_dir"]) / "steps.csv")["rank"].value_counts() == 3).all()
    assert leftovers.clean(result["run_id"]) and not survivors(tmp_path)


@pytest.mark.netns
@root
def test_ctrl_c_stops_every_node_and_leaves_nothing(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            NETBENCH,
            "exec",
            "--nodes",
            "2",
            "--out",
            str(tmp_path),
            "--",
            sys.executable,
            "-c",
            program(tmp_path, "time.sleep(600)"),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        found: list[str] = []
        assert wait_until(lambda: found.append(leftovers.run_id_of_pid(proc.pid) or "") or found[-1], 60, 0.01)
        run_id = found[-1]
        inodes: set[int] = set()
        logs = lambda: list(tmp_path.glob("*/workers/rank*.log"))  # noqa: E731
        assert wait_until(
            lambda: (
                inodes.update(leftovers.inodes(run_id))
                or (len(logs()) == 2 and all("stepped" in f.read_text() for f in logs()))
            ),
            120,
        )
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole foreground group
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130
    assert leftovers.clean(run_id, inodes), leftovers.traces(run_id, inodes)
    assert not survivors(tmp_path)
    data = json.loads(next(tmp_path.glob("*/run.json")).read_text())
    assert data["status"] == "failed" and data["reason"] == "interrupted (Ctrl-C)" and data["exec"]["exit_code"] == 130
    assert (pd.read_csv(next(tmp_path.glob("*/steps.csv")))["rank"].value_counts() == 3).all()


def test_step_api_is_a_cheap_no_op_outside_exec(tmp_path: Path) -> None:
    """`import netbench` loads neither torch nor the CLI; outside exec the step API writes nothing."""
    code = (
        "import sys, netbench\n"
        "with netbench.step() as s, netbench.phase('comm'): pass\n"
        "netbench.mark_step()\n"
        "assert s is None and not netbench.steps.active()\n"
        "print(sorted(m for m in ('torch', 'pydantic', 'typer', 'netbench.cli') if m in sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETBENCH_")}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
    assert list(tmp_path.iterdir()) == []


def test_step_records_have_runs_format(tmp_path: Path) -> None:
    """Under exec's environment (here on loopback) each step is one record with run's fields, phases booked."""
    records = tmp_path / "rank0.jsonl"
    code = (
        "import time, netbench\n"
        "for i in range(3):\n"
        "    with netbench.step() as s:\n"
        "        time.sleep(0.01)\n"
        "        with netbench.phase('comm'): time.sleep(0.02)\n"
        "        s.loss = 1.0 / (i + 1)\n"
        "netbench.declare_payload({'w': (10, 4)}, replicator='full')\n"
    )
    env = {
        **os.environ,
        "NETBENCH_RECORDS": str(records),
        "NETBENCH_IFACE": "lo",
        "NETBENCH_RANK": "0",
        "NETBENCH_WORLD_SIZE": "2",
        "NETBENCH_WARMUP_STEPS": "1",
    }
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert [r["event"] for r in lines] == ["start", "step", "step", "step", "payload"]
    steps = [r for r in lines if r["event"] == "step"]
    assert [r["warmup"] for r in steps] == [True, False, False] and [r["step"] for r in steps] == [0, 1, 2]
    for r in steps:
        assert r["comm_s"] >= 0.02 and 0.005 <= r["compute_s"] < r["step_s"] and r["t_end"] > r["t_start"]
        assert {"tx_bytes", "rx_bytes", "tx_packets", "rx_packets", "retrans_segs", "payload_bytes"} <= r.keys()
        comm = [sp for sp in r["spans"] if sp[0] == "communicate"]  # the phase, placed inside its step for trace.json
        assert len(comm) == 1 and comm[0][2] - comm[0][1] >= 0.02 and 0 <= comm[0][1] and comm[0][2] <= r["step_s"]
    assert (
        lines[-1]["shapes"] == {"w": [10, 4]}
        and lines[-1]["n_params"] == 40
        and lines[-1]["replicator"]["name"] == "full"
    )


def test_python_factory_workload_starts_identical_and_draws_per_rank(tmp_path: Path, monkeypatch) -> None:
    from netbench.workloads import build_workload
    from netbench.workloads.config import WorkloadConfig
    from netbench.workloads.python import name_for_run

    (tmp_path / "userwl.py").write_text(
        "import torch\n"
        "def make(rank, world_size):\n"
        "    model = torch.nn.Linear(4, 1)\n"
        "    def batches():\n"
        "        for _ in range(2): yield (torch.randn(8, 4),)  # drawn lazily: after the per-rank reseed\n"
        "    class Twice:\n"
        "        def __iter__(self): return batches()\n"
        "    return model, Twice(), lambda m, b: m(b[0]).pow(2).mean()\n"
    )
    monkeypatch.chdir(tmp_path)
    cfg = WorkloadConfig(kind="python:userwl:make")
    assert cfg.kind == "python" and cfg.factory == "userwl:make"
    name_for_run(cfg.factory, tmp_path)  # what `run` does for the workload its command line names
    a, b = build_workload(cfg, 0, 2), build_workload(cfg, 1, 2)
    assert all((p == q).all() for p, q in zip(a.model.parameters(), b.model.parameters()))
    assert not (next(a.batches)[0] == next(b.batches)[0]).all()  # each rank draws its own batches
    losses = [a.compute_step() for _ in range(3)]  # a re-iterable that runs out starts over
    assert all(loss > 0 for loss in losses) and a.model.weight.grad is not None
