"""The per-node worker: spec resolution, counters, and real 2-process gloo runs on localhost.

Multi-process tests launch ``python -m netbench.worker`` exactly as the orchestrator does, but on
127.0.0.1 with iface ``lo`` (no namespaces), so both ranks' traffic shows in the same counters.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netbench.counters import CounterError, parse_proc_net_dev, read_counters
from netbench.declarations.config import ReplicatorConfig
from netbench.rundir.steps_schema import RECORD_ONLY, columns_of
from netbench.worker.spec import SpecError, WorkerSpec, load_spec, resolve
from netbench.workloads import WorkloadConfig, build_workload

REPO = Path(__file__).resolve().parents[1]
# a worker's step record: its steps.csv columns and the keys the record alone carries
STEP_FIELDS = {c.value for c in columns_of("worker")} | set(RECORD_ONLY)
COUNTERS = ("tx_bytes", "rx_bytes", "tx_packets", "rx_packets", "retrans_segs")
SMALL_MLP = WorkloadConfig(kind="mlp", hidden=64, mlp_layers=2, batch_size=64)


# ---------------------------------------------------------------- helpers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def replicator_or_skip(name: str, workload: WorkloadConfig, world_size: int = 2):
    """The payload declaration for ``name``, or skip while that replicator has not landed."""
    try:
        from netbench.declarations.registry import declared_payload
    except ImportError as exc:
        pytest.skip(f"netbench.replicators not importable yet: {exc}")
    config = ReplicatorConfig(name=name)
    shapes = build_workload(workload, 0, world_size).param_shapes()
    try:
        return config, declared_payload(shapes, config, world_size)
    except (NotImplementedError, KeyError, ValueError) as exc:
        pytest.skip(f"replicator {name!r} not available yet: {exc}")


def write_specs(tmp: Path, world_size: int, **fields) -> list[Path]:
    port = free_port()
    paths = []
    for rank in range(world_size):
        spec = WorkerSpec(
            rank=rank,
            world_size=world_size,
            master_addr="127.0.0.1",
            master_port=port,
            iface="lo",
            out_path=str(tmp / "rank{rank}.jsonl"),
            **fields,
        )
        path = tmp / f"spec{rank}.json"
        path.write_text(spec.model_dump_json())
        paths.append(path)
    return paths


def launch(spec: Path, tmp: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    base = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    log = open(tmp / f"{spec.stem}.log", "wb")
    return subprocess.Popen(
        [sys.executable, "-m", "netbench.worker", "--spec", str(spec)],
        cwd=REPO,
        env={**base, **(env or {})},
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def finish(procs: list[subprocess.Popen], timeout: float = 60) -> list[int]:
    try:
        return [p.wait(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def check_run(tmp: Path, rank: int, steps: int, warmup: int, decl) -> list[dict]:
    """Everything a finished rank's JSONL must satisfy; returns its step records."""
    lines = records(tmp / f"rank{rank}.jsonl")
    assert [r["event"] for r in lines] == ["start"] + ["step"] * (steps + warmup) + ["done"], (
        tmp / f"spec{rank}.log"
    ).read_text()
    step_lines = lines[1:-1]
    last = step_lines[-1]  # its tail: what the interface moved until every rank had ended its steps
    assert last["tail_tx_bytes"] > 0 and last["tail_rx_bytes"] > 0  # the closing barrier's messages at least
    assert all(r["tail_tx_bytes"] is None and r["tail_rx_bytes"] is None for r in step_lines[:-1])
    assert [r["step"] for r in step_lines] == list(range(steps + warmup))
    assert [r["warmup"] for r in step_lines] == [True] * warmup + [False] * steps
    for r in step_lines:
        assert set(r) == STEP_FIELDS
        assert r["rank"] == rank
        assert r["t_start"] <= r["t_end"]
        assert 0 < r["compute_s"] <= r["step_s"]
        assert min(r["compress_s"], r["comm_s"], r["decode_s"], r["apply_s"]) >= 0
        assert (
            0 <= r["compress_cpu_s"] <= r["compress_s"] + 0.01 and 0 <= r["decode_cpu_s"] <= r["decode_s"] + 0.01
        )  # CPU within wall
        assert math.isfinite(r["loss"])
        assert all(isinstance(r[c], int) and r[c] >= 0 for c in COUNTERS)
        assert r["tx_bytes"] > 0 and r["tx_packets"] > 0
        assert r["payload_bytes"] == decl.bytes_per_step
        assert r["collectives"] == decl.collectives_per_step
    for before, after in zip(step_lines, step_lines[1:]):
        assert before["t_end"] <= after["t_start"]
    measured = step_lines[warmup:]
    done = lines[-1]
    assert done["rank"] == rank and done["steps"] == steps
    for name in ("payload_bytes", "collectives", *COUNTERS):
        assert done[name] == sum(r[name] for r in measured)
    # this rank's own payload crossed lo inside its measured step windows
    assert done["tx_bytes"] >= done["payload_bytes"]
    return step_lines


# ---------------------------------------------------------------- no processes


def test_proc_net_dev_parsing() -> None:
    text = (
        "Inter-|   Receive                                                |  Transmit\n"
        " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo "
        "colls carrier compressed\n"
        "    lo:  123456     789    0    0    0     0          0         0   654321     987    0    0    0    "
        " 0       0          0\n"
        "veth0:4294967296000 5 0 0 0 0 0 0 77 6 0 0 0 0 0 0\n"
    )
    lo = parse_proc_net_dev(text, "lo")
    assert (lo.rx_bytes, lo.rx_packets, lo.tx_bytes, lo.tx_packets) == (123456, 789, 654321, 987)
    veth = parse_proc_net_dev(text, "veth0")
    assert (veth.rx_bytes, veth.tx_bytes, veth.tx_packets) == (4294967296000, 77, 6)
    assert (lo - lo).as_dict() == dict.fromkeys(COUNTERS, 0)
    with pytest.raises(CounterError, match="'eth9'"):
        parse_proc_net_dev(text, "eth9")


def test_read_counters_sees_loopback_traffic() -> None:
    before = read_counters("lo")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname()) as client:
            conn, _ = server.accept()
            client.sendall(b"x" * 100_000)
            got = 0
            while got < 100_000:
                got += len(conn.recv(65536))
            conn.close()
    delta = read_counters("lo") - before
    assert delta.tx_bytes >= 100_000 and delta.rx_bytes >= 100_000
    with pytest.raises(CounterError):
        read_counters("no-such-iface0")


def test_spec_takes_rendezvous_from_the_environment() -> None:
    spec = WorkerSpec(iface="lo", out_path="/tmp/x{rank}.jsonl")
    env = {"RANK": "1", "WORLD_SIZE": "3", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    resolved = resolve(spec, env)
    assert (resolved.spec.rank, resolved.spec.world_size, resolved.spec.master_port) == (1, 3, 29500)
    assert resolved.url == "env://"
    assert str(resolved.spec.output_file()) == "/tmp/x1.jsonl"
    explicit = WorkerSpec(
        rank=0, world_size=2, master_addr="127.0.0.1", master_port=1234, iface="lo", out_path="o.jsonl"
    )
    assert resolve(explicit, {}).url == "tcp://127.0.0.1:1234"
    on_one_host = explicit.model_copy(update={"rendezvous_file": "/run/x/rendezvous"})
    assert resolve(on_one_host, {}).url == "file:///run/x/rendezvous"
    assert resolve(spec.model_copy(update={"rendezvous_file": "/r"}), env).url == "env://"  # torchrun's store wins
    with pytest.raises(SpecError, match="RANK is not set"):
        resolve(spec, {})
    with pytest.raises(SpecError, match="outside world size"):
        resolve(spec, {**env, "RANK": "3"})


def test_spec_validation(tmp_path: Path) -> None:
    spec = WorkerSpec(iface="lo", out_path="o.jsonl")
    assert spec.timeout_s == 30 and spec.threads == 1 and spec.replicator == ReplicatorConfig()
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps({"iface": "lo", "out_path": "o.jsonl", "workload": {"kind": "shapes", "shapes": "nope"}})
    )
    with pytest.raises(SpecError, match="unknown shapes preset 'nope'"):
        load_spec(path)
    path.write_text(json.dumps({"rank": 2, "world_size": 2, "iface": "lo", "out_path": "o.jsonl"}))
    with pytest.raises(SpecError, match="outside world size"):
        load_spec(path)
    with pytest.raises(SpecError, match="cannot read spec"):
        load_spec(tmp_path / "missing.json")


def test_cli_rejects_a_bad_spec_with_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"iface": "lo", "out_path": "o.jsonl", "steps": 0}))
    proc = subprocess.run(
        [sys.executable, "-m", "netbench.worker", "--spec", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "steps" in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------- real 2-rank runs


@pytest.mark.parametrize("name", ["full", "dct"])
def test_two_workers_record_every_step(tmp_path: Path, name: str) -> None:
    config, decl = replicator_or_skip(name, SMALL_MLP)
    steps, warmup = 3, 1
    specs = write_specs(
        tmp_path, 2, steps=steps, warmup_steps=warmup, replicator=config, workload=SMALL_MLP, timeout_s=20
    )
    assert finish([launch(s, tmp_path) for s in specs]) == [0, 0]
    runs = [check_run(tmp_path, rank, steps, warmup, decl) for rank in (0, 1)]
    # different data per rank: the first losses differ; the barrier lines step 0 up across ranks
    assert runs[0][0]["loss"] != runs[1][0]["loss"]
    assert abs(runs[0][0]["t_start"] - runs[1][0]["t_start"]) < 1.0


def test_shapes_workload_through_the_worker(tmp_path: Path) -> None:
    workload = WorkloadConfig(kind="shapes", shapes="llama:d_model=128,layers=2,ffn=256,vocab=512", compute_ms=50)
    config, decl = replicator_or_skip("full", workload)
    specs = write_specs(tmp_path, 2, steps=4, replicator=config, workload=workload, timeout_s=20)
    assert finish([launch(s, tmp_path) for s in specs]) == [0, 0]
    for rank in (0, 1):
        step_lines = check_run(tmp_path, rank, 4, 0, decl)
        assert all(r["compute_s"] >= 0.050 for r in step_lines)
        assert step_lines[-1]["loss"] < step_lines[0]["loss"]


def test_workers_on_one_host_meet_at_the_rendezvous_file_not_the_master_address(tmp_path: Path) -> None:
    """With a rendezvous file the group meets there: no store listens on master_addr:master_port, and the run works."""
    config, decl = replicator_or_skip("full", SMALL_MLP)
    store = tmp_path / "rendezvous"
    specs = write_specs(tmp_path, 2, steps=2, replicator=config, workload=SMALL_MLP, timeout_s=20)
    for path in specs:  # rank 0 would host a TCP store there: point every rank at a closed port instead
        doc = json.loads(path.read_text())
        path.write_text(json.dumps({**doc, "master_port": 1, "rendezvous_file": str(store)}))
    assert finish([launch(s, tmp_path) for s in specs]) == [0, 0]
    for rank in (0, 1):
        check_run(tmp_path, rank, 2, 0, decl)
        assert records(tmp_path / f"rank{rank}.jsonl")[0]["init_method"] == f"file://{store}"


def test_workers_join_then_wait_for_the_start_gate(tmp_path: Path) -> None:
    """The rendezvous's traffic stays out of the steps: no worker steps before the orchestrator opens the gate."""
    config, decl = replicator_or_skip("full", SMALL_MLP)
    gate = tmp_path / "start"
    specs = write_specs(tmp_path, 2, steps=2, replicator=config, workload=SMALL_MLP, timeout_s=20, start_gate=str(gate))
    procs = [launch(s, tmp_path) for s in specs]
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"rank{r}.jsonl").exists() for r in (0, 1)) or not all(
            '"event": "start"' in (tmp_path / f"rank{r}.jsonl").read_text() for r in (0, 1)
        ):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "the workers never joined"
            time.sleep(0.05)
        time.sleep(1.0)
        assert not any('"event": "step"' in (tmp_path / f"rank{r}.jsonl").read_text() for r in (0, 1))
        opened = time.time()
        gate.touch()
    except BaseException:
        for p in procs:
            p.kill()
            p.wait()
        raise
    assert finish(procs) == [0, 0]
    for rank in (0, 1):
        assert check_run(tmp_path, rank, 2, 0, decl)[0]["t_start"] >= opened


def test_a_gate_that_never_opens_fails_the_worker_in_one_line(tmp_path: Path) -> None:
    specs = write_specs(
        tmp_path,
        2,
        steps=1,
        replicator=ReplicatorConfig(name="full"),
        workload=SMALL_MLP,
        timeout_s=2,
        start_gate=str(tmp_path / "start"),
    )
    assert finish([launch(s, tmp_path) for s in specs]) == [1, 1]
    for rank in (0, 1):
        lines = records(tmp_path / f"rank{rank}.jsonl")
        assert [r["event"] for r in lines] == ["start", "error"]
        assert "start gate" in lines[-1]["error"]


def test_worker_under_torchrun(tmp_path: Path) -> None:
    config, decl = replicator_or_skip("full", SMALL_MLP)
    spec = WorkerSpec(
        iface="lo",
        steps=2,
        replicator=config,
        workload=SMALL_MLP,
        out_path=str(tmp_path / "rank{rank}.jsonl"),
        timeout_s=20,
    )
    path = tmp_path / "spec.json"
    path.write_text(spec.model_dump_json())
    temp = tmp_path / "temp"  # the agent's log folder (torchelastic_*) goes here, with the test's folder
    temp.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "TMPDIR": str(temp),
    }
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(free_port()),
        "-m",
        "netbench.worker",
        "--spec",
        str(path),
    ]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank in (0, 1):
        check_run(tmp_path, rank, 2, 0, decl)
        assert records(tmp_path / f"rank{rank}.jsonl")[0]["init_method"] == "env://"


# ---------------------------------------------------------------- failures end the run, never hang it


def test_peer_that_never_shows_up_fails_within_the_timeout(tmp_path: Path) -> None:
    spec = write_specs(tmp_path, 2, steps=2, replicator=ReplicatorConfig(name="full"), workload=SMALL_MLP, timeout_s=3)[
        0
    ]
    began = time.monotonic()
    assert finish([launch(spec, tmp_path)], timeout=60) == [1]
    # process start (torch import) + 3 s timeout; a worker ignoring the timeout would sit here >= 30 s
    assert time.monotonic() - began < 20
    lines = records(tmp_path / "rank0.jsonl")
    assert [r["event"] for r in lines] == ["error"]
    assert lines[0]["rank"] == 0 and lines[0]["error"]


def test_stalled_peer_mid_run_fails_within_the_timeout(tmp_path: Path) -> None:
    workload = WorkloadConfig(kind="shapes", shapes="llama:d_model=64,layers=1,ffn=128,vocab=64", compute_ms=50)
    config, _ = replicator_or_skip("full", workload)
    specs = write_specs(tmp_path, 2, steps=500, replicator=config, workload=workload, timeout_s=3)
    procs = [launch(s, tmp_path) for s in specs]
    try:
        out1 = tmp_path / "rank1.jsonl"
        deadline = time.monotonic() + 60
        while not (out1.exists() and out1.read_text().count('"event": "step"') >= 2):
            assert time.monotonic() < deadline and procs[1].poll() is None, "rank 1 never stepped"
            time.sleep(0.05)
        procs[1].send_signal(signal.SIGSTOP)  # alive but silent: only the timeout can end rank 0's wait
        stalled = time.monotonic()
        assert procs[0].wait(timeout=30) == 1
        assert time.monotonic() - stalled < 3 + 10  # timeout plus teardown on a loaded machine
    finally:
        procs[1].kill()
        finish(procs)
    lines = records(tmp_path / "rank0.jsonl")
    assert lines[-1]["event"] == "error" and lines[-1]["step"] is not None
    assert any(r["event"] == "step" for r in lines) and not any(r["event"] == "done" for r in lines)
    # the killed rank keeps every step it measured
    killed = records(out1)
    assert [r["step"] for r in killed if r["event"] == "step"] == list(range(len(killed) - 1))


def test_sigterm_leaves_an_error_event(tmp_path: Path) -> None:
    workload = WorkloadConfig(kind="shapes", shapes="llama:d_model=64,layers=1,ffn=128,vocab=64", compute_ms=200)
    config, _ = replicator_or_skip("full", workload, world_size=1)
    spec = write_specs(tmp_path, 1, steps=500, replicator=config, workload=workload, timeout_s=10)[0]
    proc = launch(spec, tmp_path)
    out = tmp_path / "rank0.jsonl"
    try:
        deadline = time.monotonic() + 60
        while not (out.exists() and '"event": "step"' in out.read_text()):
            assert time.monotonic() < deadline and proc.poll() is None, "worker never stepped"
            time.sleep(0.05)
        proc.terminate()
        assert proc.wait(timeout=15) == 1
    finally:
        finish([proc])
    last = records(out)[-1]
    assert last["event"] == "error" and "signal 15" in last["error"]
