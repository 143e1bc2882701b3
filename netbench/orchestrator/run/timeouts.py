"""How long one collective, and joining the process group, may take before a run calls a peer dead.

gloo's timeout bounds every single operation. A fixed 30 s is right for a dead peer on a fast
link but kills healthy runs on slow ones: one all-reduce of a 57 MB gradient at 10 Mbit/s takes
about 50 s. So the default comes from the analytic model: the slowest single collective call the
replicator makes, at the link's rate (lowered by what TCP can sustain under the configured loss),
with a safety factor, and never below a floor for a peer's late arrival (wake-ups, a peer still in its
last step). That floor stretches with the time dilation and with the workers sharing each core.

Joining the process group has a limit of its own (:func:`setup_timeout_s`): every worker's start on the
host's cores, and gloo's handshake with every peer over the (dilated) links, grow with the node count; a
32-node run on 2 cores joins minutes after its first worker started.
"""

from __future__ import annotations

import math

from netbench.calibrate.hostcache import load_calibration
from netbench.frames import MSS
from netbench.model.collectives import Link
from netbench.model.schemes import scheme_from_config
from netbench.model.steptime import call_cost
from netbench.model.waits import SAFETY
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.prediction import scenario_for, workload_shapes

__all__ = [
    "FLOOR_S",
    "CEILING_S",
    "SAFETY",
    "loss_limited_bps",
    "slowest_call_s",
    "collective_timeout_s",
    "setup_timeout_s",
    "stall_limit_s",
]

FLOOR_S = 30.0  # a peer's late arrival at a collective on an undilated host with a core per worker
WORKER_START_S = 8.0  # one worker's start on one core: 32 interpreters importing torch on 2 cores joined after 129 s
HANDSHAKE_RTTS = 3.0  # gloo's connection to each peer: TCP's handshake and the pair's address exchange
CEILING_S = 3600.0  # RunConfig's upper bound on timeout_s
FALLBACK_S = 120.0  # when the model cannot say (it always should; this keeps a model bug from failing runs)
_RTT_FLOOR_S = 0.010  # loss recovery waits on at least this much (timers, delayed ACKs) even on a 0-delay link


def loss_limited_bps(rate_bps: float, loss: float, one_way_delay_s: float) -> float:
    """The link rate, or what one TCP flow sustains under random ``loss`` (Mathis et al. 1997), if lower."""
    if loss <= 0:
        return rate_bps
    rtt = max(2 * one_way_delay_s, _RTT_FLOOR_S)
    return min(rate_bps, 1.22 * MSS * 8 / (rtt * math.sqrt(loss)))


def slowest_call_s(config: RunConfig) -> float:
    """The model's time for the replicator's largest single collective call on this run's links, in any phase of the
    run (1-bit Adam's dense warm-up all-reduces what its compressed steps send as sign bits)."""
    calibration = load_calibration()
    spec = config.cluster
    scenario = scenario_for(spec, 0.0, calibration)
    # Loss is applied on the uplink (ClusterSpec); it slows the TCP flows in both directions.
    access = spec.access
    up = loss_limited_bps(access.forward.rate_bps, access.forward.loss, scenario.delay_s)
    down = loss_limited_bps(access.reverse.rate_bps, access.forward.loss, scenario.delay_s)
    scheme, shapes = scheme_from_config(config.replicator), workload_shapes(config.workload, spec.nodes)
    exchanges = (*scheme.exchanges(shapes, spec.nodes), *scheme.dense_phase().exchanges(shapes, spec.nodes))
    times = [
        call_cost(
            ex,
            spec.nodes,
            Link(up, down, scenario.delay_s + calibration.overhead(ex.collective), one_way_s=scenario.delay_s),
            scenario.framing,
            scenario.algorithm,
            scenario.tcp,
            idle_s=None,
            timers=scenario.timers,
        ).time_s
        for ex in exchanges
    ]
    return max(times, default=0.0)


def crowding(config: RunConfig, dilation: float = 1.0, cpus: int | None = None) -> float:
    """How many times longer than on a host with a core per worker a wait may take here: the time dilation, or the
    workers per core where that is more (``cpus`` None: real hosts, one each)."""
    workers = config.cluster.nodes * config.gpus_per_node
    return max(1.0, dilation, workers / cpus if cpus else 1.0)


def collective_timeout_s(config: RunConfig, dilation: float = 1.0, cpus: int | None = None) -> float:
    """``config.timeout_s`` when the user gave one, else the model's slowest call x SAFETY, within [FLOOR_S,
    CEILING_S]; the floor x :func:`crowding` (``config`` is the dilated one the emulator runs).
    """
    if config.timeout_s is not None:
        return config.timeout_s
    floor = FLOOR_S * crowding(config, dilation, cpus)
    try:
        slowest = slowest_call_s(config)
    except Exception:  # noqa: BLE001 - the model never fails a run; fall back to a generous fixed bound
        return max(FALLBACK_S, floor)
    return min(CEILING_S, max(floor, SAFETY * slowest + floor / 3))


def longest_one_way_s(config: RunConfig) -> float:
    """The longest configured one-way delay between two nodes (over a topology's paths too)."""
    spec = config.cluster
    graph, n = spec.topology, spec.nodes
    return max((graph.one_way_delay_s(a, b) for a in range(n) for b in range(n) if a != b), default=0.0)


def setup_timeout_s(config: RunConfig, cpus: int) -> float:
    """How long joining the process group may take: FLOOR_S, plus twice (every worker's start on the host's ``cpus``
    cores, and gloo's handshakes with every peer over the links of ``config``, the dilated one), within CEILING_S;
    never below the collective timeout.
    """
    workers = config.cluster.nodes * config.gpus_per_node
    starts = WORKER_START_S * workers / max(1, cpus)
    handshakes = HANDSHAKE_RTTS * (workers - 1) * 2 * longest_one_way_s(config)
    setup = min(CEILING_S, FLOOR_S + 2 * (starts + handshakes))
    return max(setup, config.timeout_s or 0.0)


def stall_limit_s(timeout_s: float) -> float:
    """How long the watcher waits for any progress before it calls a run stalled: two collective timeouts and the
    floor, so that a worker's own timeout (which names its error) comes first."""
    return 2 * timeout_s + FLOOR_S
