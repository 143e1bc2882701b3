"""`netbench worker`: this host's rank of a run on real machines, launched by torchrun on every host.

The same workload and replicator options as `netbench run`; the network is whatever joins the
hosts, measured on ``--iface`` and shaped there only when ``--bw``/``--up`` (and ``--delay``...)
ask for it. Rank 0 writes the run directory `netbench run` would (see orchestrator/torchrun.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from netbench.cli import cluster_options as copt
from netbench.cli import hybrid_options as hopt
from netbench.cli import run_options as ropt
from netbench.cli.app import app
from netbench.cli.commands_run import _config, summary_table
from netbench.cli.errors import UserError
from netbench.emulation.spec import DirectionSpec

console = Console(stderr=True)


def _shaping(bw: Optional[str], up: Optional[str], delay: Optional[str], jitter: Optional[str], loss: Optional[str]) -> DirectionSpec | None:
    """The egress shaping asked for, or None: without --bw/--up nothing on the host is touched."""
    if not (bw or up):
        if delay or jitter or loss:
            raise UserError("--delay/--jitter/--loss need --bw (netem sits above the rate shaper)")
        return None
    rate = up or bw
    return copt.build_cluster_spec(2, rate, up, None, delay or "0ms", jitter or "0ms", loss or "0%").up


@app.command()
def worker(
    iface: str = typer.Option(..., "--iface", envvar="GLOO_SOCKET_IFNAME", show_envvar=True,
                              help="Interface between the hosts: gloo's sockets, the byte counters, and shaping."),
    replicator: str = ropt.ReplicatorOpt,
    bw: Optional[str] = typer.Option(None, "--bw", help="Shape this host's egress on --iface to this rate (needs root). Unset: the host is left alone."),
    up: Optional[str] = typer.Option(None, "--up", help="Egress rate; overrides --bw (ingress is never shaped: every host shapes its own egress)."),
    delay: Optional[str] = typer.Option(None, "--delay", help="One-way delay on egress (needs --bw and the kernel's netem)."),
    jitter: Optional[str] = typer.Option(None, "--jitter", help="Std. deviation of the delay (netem)."),
    loss: Optional[str] = typer.Option(None, "--loss", help="Egress packet loss (netem)."),
    steps: int = typer.Option(20, "--steps", help="Measured optimizer steps."),
    warmup: int = typer.Option(2, "--warmup", help="Warm-up steps left out of the summary."),
    topk: int = ropt.TopkOpt,
    chunk: int = ropt.ChunkOpt,
    rate: float = ropt.RateOpt,
    sync_every: int = ropt.SyncEveryOpt,
    value_dtype: str = ropt.ValueDtypeOpt,
    index_dtype: str = ropt.IndexDtypeOpt,
    grad_dtype: str = ropt.GradDtypeOpt,
    rank: float = ropt.RankOpt,
    mu: float = ropt.MuOpt,
    params_every: int = ropt.ParamsEveryOpt,
    m1_every: int = ropt.M1EveryOpt,
    m2_every: int = ropt.M2EveryOpt,
    sign: bool = ropt.SignOpt,
    lr: float = ropt.LrOpt,
    bucket_mb: str = ropt.BucketMbOpt,
    workload: str = ropt.WorkloadOpt,
    shapes: str = ropt.ShapesOpt,
    compute_ms: float = ropt.ComputeMsOpt,
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Collective timeout in seconds; unset: from the model, at least 30."),
    out: Path = typer.Option(Path("reports/runs"), "--out", help="Parent directory of the run directory (written by rank 0)."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="Names the run directory; unset: torchrun's --rdzv-id."),
    threads: int = typer.Option(1, "--threads", help="torch threads per worker."),
    as_json: bool = typer.Option(False, "--json", help="Rank 0 prints the summary as one JSON object."),
    shard_in_host: bool = hopt.ShardInHostOpt,
) -> None:
    """One host's rank of a multi-host run; start it with torchrun on every host (README: Multiple hosts)."""
    from netbench.emulation.hostshaping import HostShapingError
    from netbench.orchestrator import torchrun as hosts
    from netbench.orchestrator.timeouts import collective_timeout_s
    from netbench.worker.__main__ import _exit
    from netbench.worker.spec import SpecError

    shaping = _shaping(bw, up, delay, jitter, loss)
    rep = ropt.build_replicator_config(replicator, topk=topk, chunk=chunk, rate=rate, sync_every=sync_every, value_dtype=value_dtype,
                                       index_dtype=index_dtype, grad_dtype=grad_dtype, sign=sign, lr=lr, rank=rank, mu=mu,
                                       params_every=params_every, m1_every=m1_every, m2_every=m2_every)
    work = ropt.build_workload_config(workload, shapes, compute_ms)
    try:
        rendezvous = hosts.rendezvous(iface)
        run = hosts.run_id_from(run_id)
    except SpecError as exc:
        raise UserError(str(exc)) from None
    g = hopt.local_world_size(shard_in_host, rendezvous.spec.world_size)
    cluster = hosts.cluster_spec(rendezvous.spec.world_size // g, iface, shaping)
    rep = ropt.with_bucket_mb(rep, bucket_mb, cluster.up.rate_bps, cluster.expected_rtt_s(), work, rendezvous.spec.world_size)
    config = _config(cluster=cluster, replicator=rep, workload=work, steps=steps, warmup_steps=warmup, timeout_s=timeout,
                     capture=False, out_dir=out, threads=threads, **({"gpus_per_node": g} if g > 1 else {}))
    plan = hosts.plan(config, rendezvous, run, shaping, collective_timeout_s(config))
    try:
        outcome = hosts.run_host(plan)
    except HostShapingError as exc:
        raise UserError(str(exc)) from None
    if outcome.run_dir is not None:
        if as_json:
            print(json.dumps(outcome.summary, default=str))
        else:
            Console().print(summary_table(outcome.summary, "netbench worker"))
            console.print(f"results: {outcome.run_dir}")
        if outcome.summary.get("status") != "ok":
            console.print(f"[red]run failed:[/] {outcome.summary.get('reason')}")
    _exit(outcome.code)  # skip torch's teardown at interpreter exit (see netbench.worker.__main__)
