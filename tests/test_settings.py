"""A setting reads what the user typed in its unit, checks its range, and names its option in a one-line error."""

from __future__ import annotations

import math

import pytest

from netbench.settings import Override, Setting, SettingError, table

BW = Setting("--bw", "bw", "rate", "Link rate both ways, tc units.", "100mbit", range=(1e6, 1e10))
LOSS = Setting("--loss", "loss", "fraction", "Uplink packet loss.", "0%", range=(0.0, 1.0))
SITES = Setting("--sites", "sites", "count", "Sites.", 2, range=(1, 64))
ENGINE = Setting("--engine", "engine", "choice", "Engine.", "auto", choices=("auto", "netem"))
TCP = Setting(
    "--tcp-cc", "tcp_cc", "text", "Congestion control.", None, overrides={"plan": Override("stock hosts", "cubic")}
)


def test_units_parse_to_si_numbers() -> None:
    assert BW.parse("2.5gbit") == 2.5e9
    assert LOSS.parse("0.5%") == pytest.approx(0.005)
    assert SITES.parse("4") == 4 and SITES.parse(4) == 4
    assert ENGINE.parse("netem") == "netem"
    assert BW.parse(None) is None


@pytest.mark.parametrize(
    ("setting", "typed", "message"),
    [
        (BW, "fast", "--bw: "),
        (BW, "100gbit", "--bw: must be between 1e+06 and 1e+10, got 1e+11"),
        (LOSS, "150%", "--loss: must be between 0 and 1, got 1.5"),
        (SITES, "2.5", "--sites: expected a whole number"),
        (SITES, "0", "--sites: must be between 1 and 64, got 0"),
        (ENGINE, "tc", "--engine: choose auto, netem, got 'tc'"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_option(setting: Setting, typed: str, message: str) -> None:
    with pytest.raises(SettingError) as caught:
        setting.parse(typed)
    text = str(caught.value)
    assert text.startswith(message) and "\n" not in text


def test_nan_is_out_of_every_range() -> None:
    with pytest.raises(SettingError, match="--sites"):
        SITES.check_range(math.nan)


def test_a_command_override_changes_only_that_command() -> None:
    assert TCP.default_for("run") is None and TCP.default_for("plan") == "cubic"
    assert TCP.help_for("run") == "Congestion control."
    assert BW.help_for("run", " (10mbit-10gbit)") == "Link rate both ways, tc units (10mbit-10gbit)."


def test_a_table_refuses_a_second_declaration() -> None:
    assert list(table([BW, LOSS])) == ["bw", "loss"]
    with pytest.raises(AssertionError):
        table([BW, Setting("--bw", "rate", "rate", "Again.")])
