"""How long one collective may take before a run calls its peer dead.

gloo's timeout bounds every single operation. A fixed 30 s is right for a dead peer on a fast
link but kills healthy runs on slow ones: one all-reduce of a 57 MB gradient at 10 Mbit/s takes
about 50 s. So the default comes from the analytic model: the slowest single collective call the
replicator makes, at the link's rate (lowered by what TCP can sustain under the configured loss),
with a safety factor, and never below a floor that covers process start-up and rendezvous.
"""

from __future__ import annotations

import math

from netbench.calibrate.hostcache import load_calibration
from netbench.frames import MSS
from netbench.model.collectives import Link
from netbench.model.schemes import scheme_from_config
from netbench.model.steptime import call_cost
from netbench.orchestrator.config import RunConfig
from netbench.orchestrator.prediction import scenario_for, workload_shapes

__all__ = ["FLOOR_S", "CEILING_S", "SAFETY", "loss_limited_bps", "slowest_call_s", "collective_timeout_s"]

FLOOR_S = 30.0  # start-up of 8 workers importing torch on 2 cores, and the rendezvous, fit in this
CEILING_S = 3600.0  # RunConfig's upper bound on timeout_s
FALLBACK_S = 120.0  # when the model cannot say (it always should; this keeps a model bug from failing runs)
SAFETY = 4.0  # measured collectives come within ~20% of the model; 4x leaves room for host load
_RTT_FLOOR_S = 0.010  # loss recovery waits on at least this much (timers, delayed ACKs) even on a 0-delay link


def loss_limited_bps(rate_bps: float, loss: float, one_way_delay_s: float) -> float:
    """The link rate, or what one TCP flow sustains under random ``loss`` (Mathis et al. 1997), if lower."""
    if loss <= 0:
        return rate_bps
    rtt = max(2 * one_way_delay_s, _RTT_FLOOR_S)
    return min(rate_bps, 1.22 * MSS * 8 / (rtt * math.sqrt(loss)))


def slowest_call_s(config: RunConfig) -> float:
    """The model's time for the replicator's largest single collective call on this run's links."""
    calibration = load_calibration()
    spec = config.cluster
    scenario = scenario_for(spec, 0.0, calibration)
    # Loss is applied on the uplink (ClusterSpec); it slows the TCP flows in both directions.
    up = loss_limited_bps(spec.up.rate_bps, spec.up.loss, scenario.delay_s)
    down = loss_limited_bps(spec.down.rate_bps, spec.up.loss, scenario.delay_s)
    exchanges = scheme_from_config(config.replicator).exchanges(
        workload_shapes(config.workload, spec.nodes), spec.nodes
    )
    times = [
        call_cost(
            ex,
            spec.nodes,
            Link(up, down, scenario.delay_s + calibration.overhead(ex.collective), one_way_s=scenario.delay_s),
            scenario.framing,
            scenario.algorithm,
            scenario.tcp,
            idle_s=None,
        ).time_s
        for ex in exchanges
    ]
    return max(times, default=0.0)


def collective_timeout_s(config: RunConfig) -> float:
    """``config.timeout_s`` when the user gave one, else the model's slowest call x SAFETY, within [FLOOR_S,
    CEILING_S].
    """
    if config.timeout_s is not None:
        return config.timeout_s
    try:
        slowest = slowest_call_s(config)
    except Exception:  # noqa: BLE001 - the model never fails a run; fall back to a generous fixed bound
        return FALLBACK_S
    return min(CEILING_S, max(FLOOR_S, SAFETY * slowest + FLOOR_S / 3))
