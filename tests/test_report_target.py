"""Time to target loss: the projection against hand-computed cases, and `netbench report` on a transformer sweep."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from report_cli import report_command
from synthetic_sweep import grid, write_sweep

from netbench.reports.target import (
    DENSE_MODEL,
    DENSE_STEPS,
    STEP_MODEL,
    LossCurve,
    crossovers,
    smooth,
    step_time_functions,
    steps_to_target,
    time_to_target,
)

NETBENCH = str(Path(sys.executable).parent / "netbench")


def test_smooth_and_steps_to_target() -> None:
    assert list(smooth([4.0, 2.0, 6.0, 0.0], window=2)) == [4.0, 3.0, 4.0, 3.0]
    assert steps_to_target([5.0, 4.0, 3.0, 2.0], 3.0) == 3  # reached after the third step
    assert steps_to_target([5.0, 4.0], 1.0) is None


def test_crossover_rate_matches_the_hand_computed_one() -> None:
    # A needs 4 steps of 0.1 s + 8 Mbit of transfer, B 10 steps of 0.1 s + 0.1 Mbit:
    # 4 (0.1 + 8e6/r) = 10 (0.1 + 1e5/r)  <=>  r = 3.1e7 / 0.6 = 51.67 Mbit/s; B (less traffic) wins below it
    fns = {"A": lambda r: 0.1 + 8e6 / r, "B": lambda r: 0.1 + 1e5 / r}
    (cross,) = crossovers(fns, {"A": 4, "B": 10}, 1e6, 1e10)
    assert cross.rate_bps == pytest.approx(3.1e7 / 0.6, rel=1e-4)
    assert (cross.below, cross.above) == (("B", "A"), ("A", "B"))
    assert cross.describe() == "A overtakes B (below: B < A; above: A < B)"
    assert crossovers(fns, {"A": 4, "B": None}, 1e6, 1e10) == []  # B never reaches the target


def test_time_to_target_projection_and_measured() -> None:
    def curve(rep: str, rate: float, loss: list[float], step_s: float) -> LossCurve:
        return LossCurve(rep, 2, 0.0, rate, np.asarray(loss), step_s * np.arange(1, len(loss) + 1), step_s)

    curves = [
        curve("full", 1e7, [5, 4, 3, 2], 1.0),
        curve("full", 1e8, [5, 4, 3, 2], 0.25),
        curve("dct", 1e7, [5, 4.5, 4, 3.5], 0.1),
        curve("dct", 1e8, [5, 4.5, 4, 3.5], 0.1),
    ]
    model = {("full", 2, 0.0): lambda r: 0.2 + 8e6 / r, ("dct", 2, 0.0): lambda r: 0.1 + 1e4 / r}
    (group,) = time_to_target(curves, model, span=(1e6, 1e10))
    assert group.target == 3.5  # the worst final loss
    assert group.steps_needed == {"full": 3, "dct": 4}
    assert group.measured_s[("full", 1e7)] == pytest.approx(3.0) and group.measured_s[("full", 1e8)] == pytest.approx(
        0.75
    )
    assert group.measured_s[("dct", 1e7)] == pytest.approx(0.4)
    assert group.projected_s[("full", 1e7)] == pytest.approx(3 * (0.2 + 0.8))  # 3 steps x 1.0 s
    assert group.projected_s[("dct", 1e8)] == pytest.approx(4 * (0.1 + 1e-4))
    # 3 (0.2 + 8e6/r) = 4 (0.1 + 1e4/r)  <=>  0.2 r = 4e4 - 2.4e7  -> never positive: full never wins? check the other
    # way full wins when 0.6 + 2.4e7/r < 0.4 + 4e4/r, impossible for r > 0: dct is first everywhere
    assert group.crossovers == []
    (given,) = time_to_target(curves, model, target=4.0)
    assert given.steps_needed == {"full": 2, "dct": 3}


def test_points_on_two_sites_run_along_their_wan_and_star_points_along_their_access_link() -> None:
    frame = pd.DataFrame(
        [
            # two sites: one access link (1gbit, 0 ms), the WAN at 10mbit and 1gbit, 50 ms
            dict(replicator="full", nodes=4, bw_bps=1e9, delay_ms=0.0, wan_bw_bps=1e7, wan_delay_ms=50.0),
            dict(replicator="full", nodes=4, bw_bps=1e9, delay_ms=0.0, wan_bw_bps=1e9, wan_delay_ms=50.0),
            # the star: no WAN
            dict(replicator="full", nodes=2, bw_bps=1e7, delay_ms=5.0, wan_bw_bps=None, wan_delay_ms=None),
            dict(replicator="full", nodes=2, bw_bps=1e8, delay_ms=5.0, wan_bw_bps=None, wan_delay_ms=None),
        ]
    ).assign(status="ok", **{STEP_MODEL: [2.0, 0.2, 1.0, 0.1]})
    fns = step_time_functions(frame)
    assert set(fns) == {("full", 4, 50.0), ("full", 2, 5.0)}
    wan, star = fns[("full", 4, 50.0)].step, fns[("full", 2, 5.0)].step
    assert wan(1e7) == pytest.approx(2.0) and wan(1e9) == pytest.approx(0.2)
    assert wan(1e8) == pytest.approx(math.sqrt(2.0 * 0.2))  # log-log halfway
    assert star(1e7) == pytest.approx(1.0) and star(1e8) == pytest.approx(0.1)


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_a_zero_time_or_rate_is_left_out_of_the_log_log_price() -> None:
    """A summary may hold a zero (a crafted one, a negative where nothing checked it): those points have no
    logarithm, so the price runs through the others, with no divide-by-zero on the way."""
    rows = [(1e7, 1.0, 1.0), (1e8, 0.1, 0.1), (1e9, 0.0, 0.0), (3e8, -1.0, float("inf")), (0.0, 0.5, 0.5)]
    frame = pd.DataFrame(
        [
            dict(replicator="onebit", nodes=2, bw_bps=b, delay_ms=0.0, **{DENSE_MODEL: d, DENSE_STEPS: 8})
            for b, _, d in rows
        ]
    ).assign(status="ok", **{STEP_MODEL: [t for _, t, _ in rows]})
    price = step_time_functions(frame)[("onebit", 2, 0.0)]
    for step in (price.step, price.dense):
        assert step(1e7) == pytest.approx(1.0) and step(1e8) == pytest.approx(0.1)
        assert step(1e9) == pytest.approx(0.1)  # held flat beyond the last point kept, not pulled to zero


def test_onebit_reaching_the_target_inside_its_dense_warm_up_is_priced_at_the_dense_step() -> None:
    # onebit's model: 8 dense steps at 1.0 s (10mbit) / 0.1 s (100mbit), then 0.05 s / 0.02 s a compressed step
    frame = pd.DataFrame(
        [
            dict(replicator="onebit", nodes=2, bw_bps=1e7, delay_ms=0.0, **{DENSE_MODEL: 1.0, DENSE_STEPS: 8}),
            dict(replicator="onebit", nodes=2, bw_bps=1e8, delay_ms=0.0, **{DENSE_MODEL: 0.1, DENSE_STEPS: 8}),
            dict(replicator="full", nodes=2, bw_bps=1e7, delay_ms=0.0),
            dict(replicator="full", nodes=2, bw_bps=1e8, delay_ms=0.0),
        ]
    ).assign(status="ok", **{STEP_MODEL: [0.05, 0.02, 1.0, 0.1]})
    prices = step_time_functions(frame)
    assert prices[("full", 2, 0.0)].dense is None and prices[("onebit", 2, 0.0)].dense_steps == 8

    def curve(rep: str, rate: float, loss: list[float]) -> LossCurve:
        return LossCurve(rep, 2, 0.0, rate, np.asarray(loss), np.arange(1.0, len(loss) + 1), None)

    falling = [10.0 - s for s in range(12)]
    curves = [curve(rep, rate, falling) for rep in ("onebit", "full") for rate in (1e7, 1e8)]
    (inside,) = time_to_target(curves, prices, target=5.0)  # reached after step 6, inside the 8 dense steps
    assert inside.steps_needed["onebit"] == 6
    assert inside.projected_s[("onebit", 1e7)] == pytest.approx(6 * 1.0)  # not 6 x 0.05 s
    assert inside.projected_s[("onebit", 1e8)] == pytest.approx(6 * 0.1)
    assert inside.projected_s[("full", 1e7)] == pytest.approx(6 * 1.0)
    (after,) = time_to_target(curves, prices, target=0.0)  # after step 11: 8 dense steps, 3 compressed
    assert after.projected_s[("onebit", 1e7)] == pytest.approx(8 * 1.0 + 3 * 0.05)
    assert after.projected_s[("onebit", 1e8)] == pytest.approx(8 * 0.1 + 3 * 0.02)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([NETBENCH, *args], capture_output=True, text=True, timeout=300)


def test_report_of_a_transformer_sweep_prints_time_to_target(tmp_path) -> None:
    # losses 10 - s (full) and 10 - s/2 (dct) over 12 steps; a trailing mean over 5 steps gives 12 - s and 11 - s/2
    # from the fifth step on. Default target: dct's final 5.5 -> full after 8 steps, dct after 12.
    losses = {"full": [10.0 - s for s in range(12)], "dct": [10.0 - s / 2 for s in range(12)]}
    folder = write_sweep(tmp_path / "t", grid(), kind="transformer", spread=0.0, losses=losses, local=False)
    out = run("report", str(folder))
    assert out.returncode == 0, out.stderr
    assert "time to loss 5.500 (2 nodes, 0 ms)" in out.stdout
    # full: 8 steps x 1.0 s at 10mbit, x 0.5 s at 100mbit; dct: 12 x 0.2 s, 12 x 0.1 s; measured equals model here
    assert "full        8 steps: 10mbit 8 s / 8 s; 100mbit 4 s / 4 s" in out.stdout
    assert "dct        12 steps: 10mbit 2.4 s / 2.4 s; 100mbit 1.2 s / 1.2 s" in out.stdout
    assert (
        "no change of order between 10mbit and 1gbit" in out.stdout
    )  # the measured rates, widened 10x within 10mbit-10gbit
    text = (folder / "report.md").read_text()
    assert "## Time to target loss" in text and "| full | 8 | 8 s | 8 s | 4 s | 4 s |" in text
    for name in (
        "loss_vs_time.png",
        "time_to_target.png",
        "time_vs_bandwidth.png",
        "measured_vs_predicted.png",
        "step_breakdown.png",
    ):
        assert (folder / name).read_bytes()[:4] == b"\x89PNG" and f"]({name})" in text
    given = run("report", str(folder), "--target-loss", "7")
    assert "full        6 steps" in given.stdout and "dct         9 steps" in given.stdout


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_report_of_a_sweep_whose_model_predicted_a_zero_step_leaves_that_point_off_the_log_axes(tmp_path) -> None:
    losses = {"full": [10.0 - s for s in range(12)], "dct": [10.0 - s / 2 for s in range(12)]}
    folder = write_sweep(tmp_path / "t", grid(), kind="transformer", spread=0.0, losses=losses, local=False)
    frame = pd.read_csv(folder / "summary.csv")
    frame.loc[0, STEP_MODEL] = 0.0
    frame.to_csv(folder / "summary.csv", index=False)
    done = report_command(folder)
    assert done.code == 0, done.err
    assert (folder / "measured_vs_predicted.png").read_bytes()[:4] == b"\x89PNG"
    assert "## Time to target loss" in (folder / "report.md").read_text()


def test_shapes_sweep_has_no_time_to_target_and_no_runs_means_no_error_bars(tmp_path) -> None:
    folder = write_sweep(tmp_path / "s", grid(), kind="shapes", with_runs=False)
    out = run("report", str(folder))
    assert out.returncode == 0, out.stderr
    assert "time to loss" not in out.stdout and "Time to target" not in (folder / "report.md").read_text()
    assert (folder / "time_vs_bandwidth.png").stat().st_size > 10_000 and (folder / "report.html").exists()
