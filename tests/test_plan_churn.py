"""``plan --mtbf``: goodput under churn beside the plain step, the heal, the wall time to a token budget, and bad
values refused in one line."""

from __future__ import annotations

import pytest

# plan's own helpers, and its autouse fixture that keeps the developer's calibration file out
from test_plan_cli import _no_user_calibration, plan_error, plan_json  # noqa: F401

from netbench.cli.app import main
from netbench.declarations.config import ReplicatorConfig
from netbench.model.goodput import RUN_DRAWS
from netbench.model.heal import heal_bytes
from netbench.shapes import resolve_shapes

ARGS = ("--nodes", "2,4", "--bw", "1gbit", "--delay", "1ms", "--compute-ms", "200")


def test_goodput_sits_beside_the_plain_step_for_the_replicators_that_heal(capsys) -> None:
    doc = plan_json(capsys, "-r", "full,diloco,dct", "--mtbf", "20s", *ARGS)
    assert doc["churn"]["mtbf_s"] == 20 and doc["churn"]["away_s"] == 6
    shapes = resolve_shapes(doc["shapes"])
    for row in doc["rows"]:
        churn = row["churn"]
        if row["replicator"] == "dct":
            assert "does not train through churn" in churn["reason"]
            continue
        assert churn["plain_steps_per_s"] == pytest.approx(1 / row["step_time_s"])
        assert 0 < churn["steps_per_s"] < churn["plain_steps_per_s"]
        assert churn["heal_bytes"] == heal_bytes(ReplicatorConfig(name=row["replicator"]), shapes)
        assert churn["heal_s"] > churn["heal_bytes"] * 8 / 1e9


def test_a_node_that_fails_rarely_leaves_the_step_rate_as_it_is(capsys) -> None:
    doc = plan_json(capsys, "-r", "full", "--mtbf", "1e8s", *ARGS)
    for row in doc["rows"]:
        assert row["churn"]["ratio"] == pytest.approx(1.0, abs=1e-4)


def test_a_longer_time_away_trains_with_fewer_nodes(capsys) -> None:
    short = plan_json(capsys, "-r", "diloco", "--mtbf", "60s", "--away", "2s", *ARGS)["rows"][1]["churn"]
    long = plan_json(capsys, "-r", "diloco", "--mtbf", "60s", "--away", "30s", *ARGS)["rows"][1]["churn"]
    assert long["mean_away"] > short["mean_away"]
    assert long["member_share"] < short["member_share"]


def test_the_token_budget_takes_longer_under_churn(capsys) -> None:
    doc = plan_json(
        capsys, "-r", "full", "--mtbf", "30s", "--accelerator", "h100-sxm", "--batch", "8", "--tokens", "1e7", *ARGS
    )
    for row in doc["rows"]:
        assert row["churn"]["token_budget_wall_s"] > row["token_budget"]["wall_s"]


def test_a_budget_past_many_restarts_is_out_of_reach_without_a_checkpoint_in_one_line(capsys) -> None:
    common = ("-r", "diloco", "--mtbf", "20s", "--accelerator", "h100-sxm", "--batch", "8", *ARGS)
    small = plan_json(capsys, *common, "--tokens", "1e6")
    for row in small["rows"]:
        churn = row["churn"]
        assert churn["restarts_per_s"] > 0
        # the training lost now and then: longer than committing the budget's steps once at goodput
        once = row["token_budget"]["steps"] / (churn["steps_per_s"] * churn["member_share"])
        assert churn["token_budget_wall_s"] > once
    large = plan_json(capsys, *common, "--tokens", "1e9")
    for row in large["rows"]:
        churn = row["churn"]
        assert churn["token_budget_wall_s"] is None
        assert churn["token_budget_restart_every_s"] == pytest.approx(1 / churn["restarts_per_s"])
    main(["plan", *common, "--tokens", "1e9"])
    said = [line for line in capsys.readouterr().out.splitlines() if "out of reach" in line]
    assert len(said) == 2 and all("without a checkpoint: every node is away at once about every" in s for s in said)


def test_the_table_prints_goodput_and_each_heal(capsys) -> None:
    main(["plan", "-r", "full,dct", "--mtbf", "20s", *ARGS])
    out = capsys.readouterr().out
    assert "goodput" in out and "heal" in out and "does not train through churn" in out


def test_a_run_of_a_given_length_gets_its_mean_spread_and_seed_beside_the_long_run(capsys) -> None:
    doc = plan_json(capsys, "-r", "full,diloco", "--mtbf", "20s", "--for", "120s", "--seed", "3", *ARGS)
    assert doc["churn"]["for_s"] == 120 and doc["churn"]["seed"] == 3
    for row in doc["rows"]:
        run = row["churn"]["run"]
        assert run["for_s"] == 120 and run["draws"] == RUN_DRAWS and run["seed"] == 3
        assert 0 < run["p10"] < run["steps_per_s"] < run["p90"] < row["churn"]["plain_steps_per_s"]
        assert run["sd"] > 0 and run["seed_steps_per_s"] > 0
        # what the runs hold at their end: less than they committed where some restarted
        assert 0 < run["kept_steps_per_s"] <= run["steps_per_s"] and 0 < run["seed_kept_steps_per_s"]
    plain = plan_json(capsys, "-r", "full", "--mtbf", "20s", *ARGS)
    assert all("run" not in row["churn"] for row in plain["rows"])


def test_a_run_of_given_steps_trains_on_after_its_churn_and_reads_above_one_that_ends_with_it(capsys) -> None:
    common = ("-r", "diloco", "--sync-every", "4", "--mtbf", "20s", "--for", "60s", "--seed", "1", *ARGS)
    ended = plan_json(capsys, *common)
    longer = plan_json(capsys, *common, "--steps", "2000")
    assert longer["churn"]["steps"] == 2000
    for short, long in zip(ended["rows"], longer["rows"]):
        assert long["churn"]["run"]["steps"] == 2000 and "steps" not in short["churn"]["run"]
        # the steps after the churn are trained with every node present
        assert long["churn"]["run"]["steps_per_s"] > short["churn"]["run"]["steps_per_s"]
    main(["plan", *common, "--steps", "2000"])
    assert "run of 60s, 2000 steps" in capsys.readouterr().out


def test_the_table_prints_the_run_and_its_seed(capsys) -> None:
    main(["plan", "-r", "full", "--mtbf", "20s", "--for", "120s", "--seed", "5", *ARGS])
    out = capsys.readouterr().out
    assert "run of 120s" in out
    assert "seed 5" in out and "10th-90th percentiles" in out


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--mtbf", "0.5s"), "--mtbf: must be between 1 and"),
        (("--mtbf", "soon"), "--mtbf: cannot read time"),
        (("--mtbf", "nan"), "--mtbf:"),
        (("--away", "3s"), "--away: the time away of a churn: give --mtbf too"),
        (("--mtbf", "20s", "--away", "0s"), "--away: must be between 0.1 and"),
        (("--mtbf", "20s", "--backend", "ideal"), "--mtbf: churn is priced over gloo"),
        (("--mtbf", "20s", "--topology", "sites"), "--mtbf: churn is priced on the star"),
        (
            (
                "--for",
                "120s",
            ),
            "--for: the length of a run through churn: give --mtbf too",
        ),
        (("--mtbf", "20s", "--seed", "3"), "--seed: the draw of a run of --for's length: give --for too"),
        (("--mtbf", "20s", "--for", "0.5s"), "--for: must be between 1 and"),
        (("--mtbf", "20s", "--for", "later"), "--for: cannot read time"),
        (("--mtbf", "20s", "--for", "60s", "--seed", "-1"), "--seed: must be between 0 and"),
        (("--mtbf", "20s", "--for", "60s", "--seed", "2.5"), "--seed: expected a whole number"),
        (("--mtbf", "20s", "--for", "1e6s"), "--for: a run of 1e+06 s on 2 nodes draws more than"),
        (("--mtbf", "20s", "--steps", "100"), "--steps: the steps of a run whose churn lasts --for: give --for too"),
        (("--mtbf", "20s", "--for", "60s", "--steps", "0"), "--steps: must be between 1 and"),
        (("--mtbf", "20s", "--for", "60s", "--steps", "many"), "--steps: expected a number"),
    ],
)
def test_bad_churn_values_exit_2_in_one_line(capsys, args: tuple[str, ...], said: str) -> None:
    assert said in plan_error(capsys, "-r", "full", *args)
