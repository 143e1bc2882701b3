"""The layer schedule: what overlaps backward, what stalls the next forward, and how a period averages."""

import pytest

from netbench.model.accelerators import accelerator
from netbench.model.backends import CodecCost, NcclBackend
from netbench.model.compute import model_shape
from netbench.model.schedule import AFTER_BACKWARD, StepSchedule, Transfer, compile_schedule, simulate
from netbench.model.schemes import SchemeSettings, build_scheme, shape_key
from netbench.model.shapes_from_count import synthetic_shapes
from netbench.model.steptime import Scenario


def layers(n: int, step_s: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    return (step_s / 3 / n,) * n, (2 * step_s / 3 / n,) * n


def ddp(n: int, step_s: float, comm_s: float, period: int = 1) -> StepSchedule:
    """One collective per layer, released by its backward, needed by its forward in the next step."""
    fwd, bwd = layers(n, step_s)
    per = comm_s / n
    return StepSchedule(fwd, bwd, tuple(Transfer(period - 1, i, per, i) for i in range(n)), period)


def test_no_transfers_is_all_compute():
    fwd, bwd = layers(4, 1.0)
    result = simulate(StepSchedule(fwd, bwd))
    assert result.step_s == pytest.approx(1.0) and result.utilization == pytest.approx(1.0)


@pytest.mark.parametrize("comm_s", [0.05, 0.3, 0.6, 1.5, 4.0])
def test_ddp_buckets_hide_behind_backward_but_the_last_one(comm_s):
    """The first layer's bucket leaves last and is needed first: the exposed time is
    max(C / L, C - B (L - 1) / L) for a backward of B over L layers (the queue either keeps up or falls behind)."""
    n, step = 8, 1.0
    backward = 2 * step / 3
    exposed = max(comm_s / n, comm_s - backward * (n - 1) / n)
    result = simulate(ddp(n, step, comm_s))
    assert result.step_s == pytest.approx(step + exposed)
    assert result.stall_s == pytest.approx(exposed)


def test_a_transfer_after_backward_is_not_hidden():
    fwd, bwd = layers(4, 1.0)
    schedule = StepSchedule(fwd, bwd, (Transfer(0, AFTER_BACKWARD, 0.25, 0, post_s=0.05),), 1, (0.1,))
    result = simulate(schedule)
    assert result.step_s == pytest.approx(1.0 + 0.1 + 0.25 + 0.05)  # encode, wire, decode in a row
    assert result.overhead_s == pytest.approx(0.15)
    assert result.utilization == pytest.approx(1.0 / 1.4)


def test_a_periodic_sync_stalls_only_the_step_after_it():
    n, step, comm, period = 8, 1.0, 3.0, 10
    exposed = max(comm / n, comm - (2 * step / 3) * (n - 1) / n)
    result = simulate(ddp(n, step, comm, period))
    assert result.step_s == pytest.approx(step + exposed / period)


def test_a_result_needed_later_hides_behind_whole_steps():
    """A transfer needed two steps on (Streaming DiLoCo's overlap) costs nothing while it takes under a step."""
    fwd, bwd = layers(4, 1.0)
    late = StepSchedule(fwd, bwd, (Transfer(0, AFTER_BACKWARD, 1.5, 0, delay=2),), 1)
    soon = StepSchedule(fwd, bwd, (Transfer(0, AFTER_BACKWARD, 1.5, 0, delay=1),), 1)
    assert simulate(soon).step_s == pytest.approx(2.5)
    assert simulate(late).step_s == pytest.approx(1.5)  # the queue, not the compute, sets the pace


def test_a_compiled_schedule_runs_at_any_seconds_as_a_schedule_built_with_them():
    """A search compiles a schedule once and runs it at each bandwidth's seconds: no run leaves state for the next."""
    n, step = 8, 1.0
    compiled = compile_schedule(ddp(n, step, 0.0, period=3))
    for comm_s in (0.05, 4.0, 0.3, 4.0):
        assert compiled.run([comm_s / n] * n) == simulate(ddp(n, step, comm_s, period=3))


@pytest.mark.parametrize("name", ["full", "diloco", "desloc", "dct", "gossip"])
def test_a_step_time_alone_is_the_whole_estimate_s(name):
    """The planner's searches ask a GPU backend for the step's time alone; it is the full estimate's, at every
    bandwidth and node count, whichever is asked first."""
    shapes = shape_key(synthetic_shapes(10**9))
    scheme = build_scheme(name, SchemeSettings())

    def backend() -> NcclBackend:
        return NcclBackend(
            shapes=shapes,
            model=model_shape(shapes, layers=8),
            codec=CodecCost(None),
            accelerator=accelerator("h100-sxm"),
        )

    alone, whole = backend(), backend()
    for workers in (2, 16):
        for bw in (1e8, 1e10, 4e11):
            scenario = Scenario(workers=workers, up_bps=bw, down_bps=bw, delay_s=0.005, compute_s=0.3)
            assert alone.step_time(scheme, scenario) == whole.step(scheme, scenario).step_time_s
            assert alone.step(scheme, scenario).step_time_s == whole.step_time(scheme, scenario)
