"""``netbench plan`` on the clusters people buy: an accelerator's compute, a GPU backend, utilisation targets.

Everything here is parsed and checked before anything is computed (one line, exit 2, naming the option):
``--accelerator`` and the batch set the compute time from the model's FLOPs (``--compute-ms`` still overrides);
``--backend nccl`` or ``ideal`` prices the collectives as a GPU cluster runs them (:mod:`netbench.model.backends`);
``--target-utilization``, ``--tokens`` and ``--figure`` ask the planner's questions of any backend.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic
from rich.console import Console
from rich.table import Table

from netbench import untrusted
from netbench.cli.errors import UserError
from netbench.declarations.registry import spec
from netbench.model.accelerators import Accelerator, accelerator, accelerators
from netbench.model.backends import CodecCost, IdealBackend, NcclBackend, measured_codec_profile
from netbench.model.calibration import Calibration, CalibrationError, read_calibration
from netbench.model.compute import ComputeSpec, ModelShape, compute_time_s, flops_per_token, model_shape
from netbench.model.memory import memory_fit
from netbench.model.nccl import NCCL_RELEASE, WIRE_EFFICIENCY, NetProfile, net_limit, tcp_window_bytes
from netbench.model.nccl_tests import NcclFit
from netbench.model.planner import BW_RANGE_BPS, Planner
from netbench.model.rows import estimate_row
from netbench.model.schemes import Scheme, shape_key
from netbench.model.steptime import Scenario, StepEstimate
from netbench.model.utilization import DEFAULT_TARGETS, bandwidth_for, curve, log_grid, token_budget
from netbench.safe_files import UnsafeOutput, check_folder, write_bytes
from netbench.units import format_bytes, format_rate_digits, format_time
from netbench.validation import one_line

__all__ = [
    "GpuPlanOptions",
    "GpuCluster",
    "parse_gpu_options",
    "compute_seconds",
    "build_backend",
    "answers",
    "plan_gpu_cluster",
    "print_utilization",
]

BACKENDS = ("gloo", "nccl", "ideal")
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")
MAX_TOKENS = 1e16
MAX_TOKENS_PER_STEP = 1e9
MAX_LAYERS = 10_000


@dataclass(frozen=True)
class GpuPlanOptions:
    """What the GPU options ask for, checked."""

    backend: str
    accelerator: Accelerator | None
    mfu: float
    tokens_per_step: float | None
    seq_len: int
    layers: int | None
    targets: tuple[float, ...]
    tokens: float | None
    figure: Path | None
    transport: str
    channels: int | None
    socket_threads: int
    socks_per_thread: int
    nccl_fit: NcclFit | None
    nccl_fit_path: str | None

    @property
    def asked(self) -> bool:
        """Whether any of these options was used (else plan's output is exactly gloo's)."""
        return (
            self.backend != "gloo"
            or self.accelerator is not None
            or bool(self.targets)
            or self.tokens is not None
            or self.figure is not None
        )


def _targets(text: str | None) -> tuple[float, ...]:
    if text is None:
        return ()
    if text.strip().lower() == "default":
        return DEFAULT_TARGETS
    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        try:
            value = float(item)
        except ValueError:
            raise UserError(f"--target-utilization: expected fractions such as 0.5,0.9,0.99, got {item!r}") from None
        if not 0 < value < 1:
            raise UserError(f"--target-utilization: each must be between 0 and 1 (exclusive), got {item!r}")
        out.append(value)
    if not out or len(out) > 20:
        raise UserError(f"--target-utilization: one to 20 fractions, got {text!r}")
    return tuple(dict.fromkeys(out))


def _positive(option: str, text: str | None, hi: float) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{option}: expected a number such as 1e12, got {text!r}") from None
    if not (math.isfinite(value) and 1 <= value <= hi):
        raise UserError(f"{option}: must be between 1 and {hi:.0e}, got {text!r}")
    return value


def _nccl_fit(path: Path | None) -> NcclFit | None:
    if path is None:
        return None
    try:
        return NcclFit.model_validate(untrusted.read_json(path, untrusted.CALIBRATION))
    except untrusted.BadInput as exc:
        raise UserError(f"--nccl-calibration: {exc}") from None
    except pydantic.ValidationError as exc:
        raise UserError(
            one_line(exc, prefix=f"--nccl-calibration: {untrusted.shown_path(path)}: ", echo=False)
            + " (write one with netbench calibrate --from-nccl-tests)"
        ) from None


def _figure(path: Path | None) -> Path | None:
    if path is None:
        return None
    if path.suffix.lower() not in FIGURE_SUFFIXES:
        raise UserError(f"--figure: name a {', '.join(FIGURE_SUFFIXES)} file, got {str(path)!r}")
    if path.exists() and path.is_dir():
        raise UserError(f"--figure: {str(path)!r} is a directory")
    try:
        check_folder(path.parent if str(path.parent) else Path("."))
    except UnsafeOutput as exc:
        raise UserError(f"--figure: {exc}") from None
    return path


def parse_gpu_options(
    backend: str,
    accelerator_name: str | None,
    mfu: float,
    batch: int | None,
    seq_len: int,
    tokens_per_step: str | None,
    layers: int | None,
    targets: str | None,
    tokens: str | None,
    figure: Path | None,
    transport: str,
    channels: int | None,
    socket_threads: int,
    socks_per_thread: int,
    nccl_calibration: Path | None,
) -> GpuPlanOptions:
    """Every GPU option checked, before anything is computed."""
    name = backend.strip().lower()
    if name not in BACKENDS:
        raise UserError(f"--backend: choose from {', '.join(BACKENDS)}, got {backend!r}")
    acc = None
    if accelerator_name is not None:
        try:
            acc = accelerator(accelerator_name)
        except ValueError as exc:
            raise UserError(f"--accelerator: {exc}") from None
    if name == "nccl" and acc is None:
        raise UserError(f"--backend nccl: name the GPUs with --accelerator ({', '.join(accelerators())})")
    if not (math.isfinite(mfu) and 0 < mfu <= 1):
        raise UserError(f"--mfu: must be in (0, 1], got {mfu:g}")
    if not 1 <= seq_len <= 10_000_000:
        raise UserError(f"--seq: must be between 1 and 10000000 tokens, got {seq_len}")
    if batch is not None and tokens_per_step is not None:
        raise UserError("--batch and --tokens-per-step are exclusive: give sequences per step or tokens per step")
    if batch is not None and not 1 <= batch <= MAX_TOKENS_PER_STEP:
        raise UserError(f"--batch: must be between 1 and {MAX_TOKENS_PER_STEP:.0e} sequences, got {batch}")
    per_step = _positive("--tokens-per-step", tokens_per_step, MAX_TOKENS_PER_STEP)
    if batch is not None:
        per_step = float(batch * seq_len)
    if layers is not None and not 1 <= layers <= MAX_LAYERS:
        raise UserError(f"--layers: must be between 1 and {MAX_LAYERS}, got {layers}")
    budget = _positive("--tokens", tokens, MAX_TOKENS)
    if budget is not None and per_step is None:
        raise UserError("--tokens: needs the batch (--batch or --tokens-per-step) to count the steps")
    kind = transport.strip().lower()
    if kind not in ("socket", "rdma"):
        raise UserError(f"--transport: choose from socket, rdma, got {transport!r}")
    if channels is not None and not 1 <= channels <= 64:
        raise UserError(f"--channels: must be between 1 and 64, got {channels}")
    if not 0 <= socket_threads <= 16:
        raise UserError(f"--socket-threads: must be between 0 and 16 (NCCL_SOCKET_NTHREADS), got {socket_threads}")
    if not 1 <= socks_per_thread <= 64:
        raise UserError(f"--socks-per-thread: must be between 1 and 64 (NCCL_NSOCKS_PERTHREAD), got {socks_per_thread}")
    if nccl_calibration is not None and name != "nccl":
        raise UserError("--nccl-calibration: fitted NCCL costs are for --backend nccl")
    return GpuPlanOptions(
        backend=name,
        accelerator=acc,
        mfu=mfu,
        tokens_per_step=per_step,
        seq_len=seq_len,
        layers=layers,
        targets=_targets(targets),
        tokens=budget,
        figure=_figure(figure),
        transport=kind,
        channels=channels,
        socket_threads=socket_threads,
        socks_per_thread=socks_per_thread,
        nccl_fit=_nccl_fit(nccl_calibration),
        nccl_fit_path=str(nccl_calibration) if nccl_calibration else None,
    )


def compute_seconds(opts: GpuPlanOptions, model: ModelShape, workers: int, compute_ms: float) -> tuple[float, str]:
    """A step's forward + backward for ``workers`` accelerators, and how it was sized."""
    if compute_ms > 0:
        return compute_ms / 1e3, f"--compute-ms {compute_ms:g}"
    if opts.accelerator is None or opts.tokens_per_step is None:
        return 0.0, "none (pass --compute-ms, or --accelerator with --batch or --tokens-per-step)"
    spec = ComputeSpec(opts.accelerator, opts.mfu, opts.tokens_per_step, opts.seq_len)
    seconds = compute_time_s(model, spec, workers)
    attention = "" if model.d_model else " (width unknown: attention left out)"
    return seconds, (
        f"{opts.tokens_per_step:.4g} tokens/step x {flops_per_token(model, opts.seq_len):.4g} FLOP/token{attention}, "
        f"shared by the workers' {opts.accelerator.name} at MFU {opts.mfu:g}"
    )


def codec_profile(opts: GpuPlanOptions, path: Path | None) -> Calibration | None:
    """The codec profile: ``--calibration FILE`` as given, else the one measured on this accelerator, else None."""
    if path is not None:
        try:
            return read_calibration(path)
        except CalibrationError as exc:
            raise UserError(f"--calibration: {exc}") from None
    return measured_codec_profile(opts.accelerator.name) if opts.accelerator else None


def build_backend(
    opts: GpuPlanOptions, shapes, model: ModelShape, profile: Calibration | None, fit_as_measured_bps: float | None
):
    """The GPU backend the options name (``gloo`` is built by the planner itself); a fit of nccl-tests logs applies
    as measured at ``fit_as_measured_bps`` (the plan's bandwidth when --bw was left out)."""
    codec = CodecCost(opts.accelerator, profile)
    if opts.backend == "ideal":
        return IdealBackend(shapes=shapes, model=model, codec=codec)
    net = NetProfile(
        transport=opts.transport,
        channels=opts.channels or (2 if opts.transport == "socket" else 16),
        threads=opts.socket_threads,
        socks_per_thread=opts.socks_per_thread,
    )
    if opts.nccl_fit is not None:
        stream = _fitted_stream(opts.nccl_fit)
        if stream:
            net = net.model_copy(update={"stream_Bps": stream})
    return NcclBackend(
        shapes=shapes,
        model=model,
        codec=codec,
        accelerator=opts.accelerator,
        net=net,
        fitted=opts.nccl_fit,
        fit_as_measured_bps=fit_as_measured_bps,
    )


def _fitted_stream(fit: NcclFit) -> float | None:
    """The fit's largest bus bandwidth: the transport's ceiling where the fit has no such collective."""
    buses = [s.bus_Bps for c in fit.collectives.values() for s in c.segments]
    return max(buses) if buses else None


def bottleneck(backend: Any, est: StepEstimate, scenario: Scenario) -> str:
    """What the step spends the most time on: compute, the codec, or waiting for the collectives (named by the link
    that caps them): a row at 98 % utilisation is compute-bound whatever its last 2 % waits for."""
    exposed = max(0.0, est.step_time_s - est.compute_time_s)
    codec = min(est.compression_time_s, exposed)
    waiting = exposed - codec
    if est.compute_time_s >= max(codec, waiting):
        return "compute"
    if codec >= waiting:
        return "codec"
    if not isinstance(backend, NcclBackend):
        return "network"
    return "intra-node link" if backend.limit(scenario)[1] == "the intra-node link" else "inter-node network"


def answers(
    planner: Planner,
    schemes: list[Scheme],
    scenarios: list[Scenario],
    opts: GpuPlanOptions,
    rows: list[dict],
) -> dict:
    """Utilisation per row, the bandwidth per target, the token budget, and the figure's curves."""
    step = planner.step
    for row, (scheme, scenario) in zip(rows, [(s, sc) for s in schemes for sc in scenarios]):
        est = step(scheme, scenario)
        row["compute_utilization"] = est.compute_time_s / est.step_time_s if est.step_time_s > 0 else None
        row["bottleneck"] = bottleneck(planner.backend, est, scenario)
        if isinstance(planner.backend, NcclBackend | IdealBackend):
            row["codec_source"] = planner.backend.codec.source(scheme)
        if opts.tokens is not None and opts.tokens_per_step:
            row["token_budget"] = token_budget(est, opts.tokens, opts.tokens_per_step)
        if opts.accelerator is not None:
            fit = memory_fit(scheme, planner.shapes, planner.params, scenario.nodes, opts.accelerator.memory_bytes)
            row["memory"] = fit.as_dict()
    out: dict[str, Any] = {}
    if opts.targets:
        out["bandwidth_for_utilization"] = [
            bandwidth_for(step, s, sc, t) for sc in scenarios for s in schemes for t in opts.targets
        ]
    if opts.figure is not None:
        lo, hi = BW_RANGE_BPS
        grid = log_grid(max(lo, 1e6), min(hi, 1e13), 43)
        out["curves"] = {s.name: curve(step, s, scenarios[0], grid) for s in schemes}
    return out


def figure_bytes(curves: dict[str, list[tuple[float, float]]], title: str, suffix: str) -> bytes:
    """Utilisation against bandwidth, one line per replicator (the replicators' own colours)."""
    import matplotlib  # late: keeps matplotlib off this module's import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # late: keeps matplotlib off this module's import

    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=120)
    for name, points in curves.items():
        xs = [bw / 1e9 for bw, _ in points]
        ys = [100 * u for _, u in points]
        ax.plot(xs, ys, label=name, color=spec(name).color or None, linewidth=1.8)
    ax.set_xscale("log")
    ax.set_xlabel("bandwidth per node (Gbit/s)")
    ax.set_ylabel("compute utilization (%)")
    ax.set_ylim(0, 101)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=suffix.lstrip("."))
    plt.close(fig)
    return buf.getvalue()


def write_figure(path: Path, curves: dict, title: str) -> None:
    try:
        write_bytes(path, figure_bytes(curves, title, path.suffix.lower()))
    except (OSError, UnsafeOutput) as exc:
        raise UserError(f"--figure: cannot write {str(path)!r}: {exc}") from None


def describe(opts: GpuPlanOptions, backend: Any, compute_how: str, model: ModelShape) -> dict:
    """What the JSON says about the backend and the compute term."""
    doc: dict[str, Any] = {
        "backend": backend.describe() if hasattr(backend, "describe") else {"name": opts.backend},
        "compute": {
            "how": compute_how,
            "accelerator": opts.accelerator.model_dump() if opts.accelerator else None,
            "mfu": opts.mfu,
            "tokens_per_step": opts.tokens_per_step,
            "seq_len": opts.seq_len,
            "layers": model.layers,
            "flops_per_token": flops_per_token(model, opts.seq_len),
        },
    }
    if opts.nccl_fit_path:
        doc["backend"]["nccl_calibration"] = opts.nccl_fit_path
    return doc


_rate4 = format_rate_digits


def _duration(seconds: float) -> str:
    """Seconds to the largest unit that reads well (days for a training run, minutes for a slow step)."""
    for unit, scale in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= 2 * scale:
            return f"{seconds / scale:,.1f} {unit}"
    return format_time(seconds)


def _rate_Bps(n: float) -> str:
    """Bytes per second as the collectives' bus bandwidths are quoted (GB/s, MB/s below one GB/s)."""
    return f"{n / 1e9:.3g} GB/s" if n >= 1e9 else f"{n / 1e6:.3g} MB/s"


def _total_bytes(n: float) -> str:
    """A run's bytes in decimal units up to petabytes."""
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.3g} B"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def print_gpu_table(doc: dict, console: Console) -> None:
    """One row per replicator and cluster: payload, communication alone, codec, compute, step, utilisation."""
    table = Table(show_header=True, header_style="bold")
    for col in (
        "replicator",
        "workers",
        "payload/step",
        "comm alone",
        "codec",
        "compute",
        "step",
        "util %",
        "bottleneck",
        "memory/GPU",
    ):
        table.add_column(col, justify="left" if col in ("replicator", "bottleneck") else "right", no_wrap=True)
    for r in doc["rows"]:
        codec = format_time(r["compression_time_s"])
        if r.get("codec_source", "").startswith("estimate"):
            codec += "~"
        table.add_row(
            r["replicator"],
            f"{r['machines']} x{r['gpus_per_node']}" if r["gpus_per_node"] > 1 else str(r["nodes"]),
            format_bytes(r["payload_bytes_per_step"]),
            _duration(r["comm_time_s"]),
            codec,
            _duration(r["compute_time_s"]),
            _duration(r["step_time_s"]),
            _pct(r.get("compute_utilization")),
            r.get("bottleneck", ""),
            memory_cell(r),
        )
    console.print(table)
    if any(r.get("codec_source", "").startswith("estimate") for r in doc["rows"]):
        console.print("~ codec time estimated from the replicator's declared memory traffic (no measured profile)")
    print_memory_note(doc, console)


def _gb(n: float) -> str:
    """Device memory in decimal GB, as accelerator datasheets state it."""
    return f"{n / 1e9:.3g} GB"


def memory_cell(row: dict) -> str:
    """A row's memory per accelerator, ``!`` where it does not fit."""
    memory = row.get("memory")
    if memory is None:
        return "-"
    return _gb(memory["bytes"]) + ("" if memory["fits"] else " !")


def print_memory_note(doc: dict, console: Console) -> None:
    """What the memory column counts, and which rows do not fit."""
    rows = [r for r in doc["rows"] if "memory" in r]
    if not rows:
        return
    capacity = _gb(rows[0]["memory"]["accelerator_bytes"])
    over = [f"{r['replicator']} @ {r['nodes']}" for r in rows if not r["memory"]["fits"]]
    if not over:
        verdict = f"every row fits the accelerator's {capacity}"
    elif len(over) == len(rows):
        verdict = f"! no row fits the accelerator's {capacity} (shard the model and its state: FSDP, ZeRO)"
    else:
        verdict = f"! over the accelerator's {capacity}: {', '.join(over)}"
    console.print(
        "memory/GPU: fp32 weights and gradients, optimizer and replicator state, collective buffers; activations "
        f"not counted (a floor); {verdict}",
        highlight=False,
    )


def print_gpu_derived(derived: dict, console: Console) -> None:
    """The derived answers of a GPU plan, rows sharing a reason grouped under it (a cluster's transport caps every
    replicator alike)."""
    console.print("[bold]bandwidth per node where communication = compute[/bold]")
    floors: dict[str, list[str]] = {}
    for d in derived["comm_equals_compute_bw"]:
        where = f"{d['replicator']} @ {d['nodes']}"
        if d["bw_bps"]:
            console.print(f"  {where:>20} workers: {_rate4(d['bw_bps'])}", highlight=False)
        elif "floor_cause" in d:
            floors.setdefault(d["floor_cause"], []).append(f"{where} ({format_time(d['comm_floor_s'])})")
        else:
            console.print(f"  {where:>20} workers: none: {d['reason']}", highlight=False)
    for cause, rows in floors.items():
        console.print(
            f"  none at any NIC rate: {cause}; communication alone stays at {', '.join(rows)}", highlight=False
        )
    doubling = derived["doubling_nodes"]
    if doubling:
        console.print(
            f"[bold]workers where step time doubles against two nodes ({doubling[0]['baseline_nodes']} workers), "
            "each step's compute held[/bold]"
        )
    for d in doubling:
        answer = str(d["nodes"]) if d["nodes"] else f"none: {d['reason']}"
        console.print(f"  {d['replicator']:>12} @ {_rate4(d['bw_bps'])}: {answer}", highlight=False)
    print_crossovers(derived, console, _rate4)


def print_crossovers(derived: dict, console: Console, rate: Callable[[float], str]) -> None:
    """The bandwidths where two replicators take equal step time, and how many pairs have none."""
    crossings = [d for d in derived["crossover_bw"] if d["crossovers"]]
    if derived["crossover_bw"]:
        console.print("[bold]crossover bandwidths (equal step time)[/bold]")
    for d in crossings:
        a, b = d["pair"]
        text = "; ".join(
            f"{rate(c['bw_bps'])} ({c['faster_below']} faster below, {c['faster_above']} above)"
            for c in d["crossovers"]
        )
        console.print(f"  {a} vs {b} @ {d['nodes']} workers: {text}", highlight=False)
    if len(crossings) < len(derived["crossover_bw"]):
        lo, hi = BW_RANGE_BPS
        console.print(
            f"  {len(derived['crossover_bw']) - len(crossings)} pair(s) without a crossover from {rate(lo)} to "
            f"{rate(hi)} (--json says which is faster)",
            highlight=False,
        )


def print_utilization(doc: dict, console: Console, opts: GpuPlanOptions) -> None:
    """Utilisation per row (when the table did not show it), the bandwidth per target and the token budget."""
    if not any("codec_source" in r for r in doc["rows"]):
        if doc.get("compute", {}).get("how"):
            console.print(f"compute: {doc['compute']['how']}", highlight=False)
        console.print("[bold]compute utilization[/bold]")
        for r in doc["rows"]:
            memory = f", memory/GPU {memory_cell(r)}" if "memory" in r else ""
            console.print(
                f"  {r['replicator']:>12} @ {r['nodes']:>6}: {_pct(r.get('compute_utilization'))} % "
                f"({r.get('bottleneck', '')}{memory})",
                highlight=False,
            )
        print_memory_note(doc, console)
    targets = doc.get("bandwidth_for_utilization")
    if targets:
        console.print("[bold]bandwidth per node for a compute utilization of[/bold]")
        by_key: dict[tuple[str, int], dict[float, str]] = {}
        for t in targets:
            text = _rate4(t["bw_bps"]) if t["bw_bps"] else "none"
            by_key.setdefault((t["replicator"], t["nodes"]), {})[t["target"]] = text
        header = "  ".join(f"{100 * t:>9g}%" for t in opts.targets)
        console.print(f"  {'':>22}{header}", highlight=False)
        for (name, nodes), cells in by_key.items():
            line = "  ".join(f"{cells.get(t, '-'):>10}" for t in opts.targets)
            console.print(f"  {name:>12} @ {nodes:>6}: {line}", highlight=False)
        ceilings = {
            f"{t['replicator']} @ {t['nodes']} {100 * t['max_utilization']:.1f} %": None
            for t in targets
            if "max_utilization" in t
        }
        if ceilings:
            console.print(f"  none: out of reach at any bandwidth; utilisation tops out at {', '.join(ceilings)}")
        for reason in dict.fromkeys(t["reason"] for t in targets if t["bw_bps"] is None and "max_utilization" not in t):
            console.print(f"  none: {reason}", highlight=False)
    budgets = [r for r in doc["rows"] if "token_budget" in r]
    if budgets:
        console.print(f"[bold]training {budgets[0]['token_budget']['tokens']:.3g} tokens[/bold]")
        for r in budgets:
            b = r["token_budget"]
            console.print(
                f"  {r['replicator']:>12} @ {r['nodes']:>6}: {b['steps']:,} steps, wall {_duration(b['wall_s'])} "
                f"(compute {_duration(b['compute_s'])}), {_total_bytes(b['bytes_per_node'])} sent per worker",
                highlight=False,
            )


def intra_source(opts: GpuPlanOptions, cluster: GpuCluster) -> str:
    """Where each GPU's intra-node bandwidth comes from: --intra-bw shared by the node's GPUs (as ``run`` means it),
    else the accelerator's own link."""
    acc = opts.accelerator
    own = f"the {acc.label}'s {acc.intra_link}" if acc else ""
    if cluster.intra_bps is None:
        return own or "a default of 100 GB/s a GPU"
    g = cluster.gpus_per_node
    given = f"--intra-bw {_rate4(cluster.intra_bps * g)}" + (f" shared by the node's {g} GPUs" if g > 1 else "")
    faster = own and acc.intra_Bps * 8 > cluster.intra_bps
    return given + (f"; leave it out for {own}, {acc.intra_Bps / 1e9:.3g} GB/s a GPU" if faster else "")


def links(backend: Any, scenario: Scenario, source: str) -> dict:
    """What carries the collectives of ``scenario``, for the header and ``--json``: each GPU's intra-node bandwidth
    and where it comes from (``source``), and the bus bandwidth across nodes and what sets it."""
    if not isinstance(backend, NcclBackend):
        return {}
    cluster = backend.cluster(scenario)
    doc = {"intra_node_Bps_per_gpu": cluster.intra_Bps, "intra_node_source": source}
    if cluster.nodes > 1:
        bus, why = net_limit(cluster.net)
        doc |= {"net_bus_Bps": bus, "net_bus_limit": why, "tcp_window_bytes": tcp_window_bytes(cluster.net.tcp)}
    return doc


def header_lines(doc: dict, opts: GpuPlanOptions) -> list[str]:
    backend = doc["backend"]
    lines = [f"compute: {doc['compute']['how']}"]
    if backend["name"] == "nccl":
        net, link = backend["net"], doc.get("links", {})
        how = f"NCCL {NCCL_RELEASE}'s tuning model, {net['transport']} transport, {net['channels']} channels" + (
            f" x {max(1, net['threads'] * net['socks_per_thread'])} socket(s) (a TCP window of "
            f"{link.get('tcp_window_bytes', 0) / 1e6:.3g} MB, at most {net['stream_Bps'] / 1e9:.3g} GB/s a socket)"
            if net["transport"] == "socket" and not backend.get("nccl_calibration")
            else ""
        )
        if backend.get("nccl_calibration"):
            how = f"fitted from {backend['nccl_calibration']} (what the fit lacks: {how})"
            for kind in backend.get("fit_regimes", {}):
                how += f" (its {kind} holds two regimes, each size priced by its own: calibrate's output says which)"
        lines.append(f"collectives: {how}")
        if link:
            lines.append(f"intra-node: {_rate_Bps(link['intra_node_Bps_per_gpu'])} a GPU ({link['intra_node_source']})")
        if "net_bus_Bps" in link:
            lines.append(
                f"across nodes: {_rate_Bps(link['net_bus_Bps'])} of bus bandwidth, set by {link['net_bus_limit']}"
            )
    elif backend["name"] == "ideal":
        lines.append("collectives: the link alone (bus bytes over the bandwidth, no latency)")
    return lines


@dataclass(frozen=True)
class GpuCluster:
    """The cluster options plan parsed: node counts, the links, GPUs per node, the TCP settings."""

    node_counts: list[int]
    up_bps: float
    down_bps: float
    delay_s: float
    gpus_per_node: int
    intra_bps: float | None  # one worker's share of --intra-bw, bits/s (None: the accelerator's link)
    tcp: Any
    bw_given: bool


def figure_title(shapes_label: str, scenario: Scenario, backend: str) -> str:
    return (
        f"{shapes_label} on {scenario.nodes} workers ({backend}), delay {format_time(scenario.delay_s)}, "
        f"compute {format_time(scenario.compute_s)} a step"
    )


def plan_gpu_cluster(
    opts: GpuPlanOptions,
    shape_list: list,
    shapes_label: str,
    schemes: list[Scheme],
    cluster: GpuCluster,
    compute_ms: float,
    calibration: Path | None,
) -> tuple[dict, list[str]]:
    """``plan --backend nccl|ideal``: the document (rows, derived answers, utilisation answers) and its header lines;
    the figure is written here."""

    shapes = shape_key(shape_list)
    model = model_shape(shapes, opts.layers)
    profile = codec_profile(opts, calibration)
    up, down, nic_note = cluster.up_bps, cluster.down_bps, ""
    if opts.nccl_fit is not None and not cluster.bw_given:
        # the log's NIC, as far as the fit shows it: its best bus bandwidth as the NIC's payload rate
        up = down = (_fitted_stream(opts.nccl_fit) or up / 8) * 8 / WIRE_EFFICIENCY
        nic_note = " (the fit's best bus bandwidth; --bw to plan another)"
    backend = build_backend(opts, shapes, model, profile, None if cluster.bw_given else min(up, down))
    g = cluster.gpus_per_node
    intra = cluster.intra_bps
    if intra is None and opts.accelerator is not None:
        intra = opts.accelerator.intra_Bps * 8
    compute_how = ""
    scenarios = []
    for n in cluster.node_counts:
        compute_s, compute_how = compute_seconds(opts, model, n * g, compute_ms)
        scenarios.append(
            Scenario(
                nodes=n * g,
                up_bps=up,
                down_bps=down,
                delay_s=cluster.delay_s,
                compute_s=compute_s,
                gpus_per_node=g,
                intra_bps=intra,
                tcp=cluster.tcp,
            )
        )
    calib = profile or Calibration()
    planner = Planner(shapes, calib, backend)
    rows = [estimate_row(planner.step(s, sc), calib) for s in schemes for sc in scenarios]
    derived = planner.derived(schemes, scenarios)
    extra = answers(planner, schemes, scenarios, opts, rows)
    doc = {
        "shapes": shapes_label,
        "params": model.params,
        **describe(opts, backend, compute_how, model),
        "links": links(backend, scenarios[0], intra_source(opts, cluster)),
        "rows": rows,
        "derived": derived,
        **extra,
    }
    if opts.figure is not None:
        write_figure(opts.figure, doc.pop("curves"), figure_title(shapes_label, scenarios[0], opts.backend))
        doc["figure"] = str(opts.figure)
    sc = scenarios[0]
    link = _rate4(sc.up_bps) if sc.up_bps == sc.down_bps else f"up {_rate4(sc.up_bps)} / down {_rate4(sc.down_bps)}"
    acc = f"{opts.accelerator.label}" if opts.accelerator else "no accelerator profile"
    lines = [
        f"{shapes_label}: {model.params:,} params in {model.layers} layers; {acc}, {g} per node; "
        f"NIC {link}{nic_note}, one-way delay {format_time(sc.delay_s)}",
        *header_lines(doc, opts),
    ]
    return doc, lines
