"""Variables of the environment netbench takes values from: a bad one is one line, exit 2, that names the variable
and never shows its value (``netbench/environment.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_cli import netbench

from netbench import environment

SECRET = "481516"
TORCHRUN = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29533"}
WORKER = ["worker", "--iface", "lo", "--steps", "1", "--out", "OUT"]

# variable -> (value planted, the command that reads it)
PLANTED = {
    "RANK": (f"\x1b[31m{SECRET}", WORKER),
    "WORLD_SIZE": (f"-{SECRET}", WORKER),
    "MASTER_ADDR": (f"host\x1b]0;{SECRET}\x07", WORKER),
    "MASTER_PORT": (f"{SECRET}9", WORKER),
    "LOCAL_RANK": (f"{SECRET}x", WORKER),
    "LOCAL_WORLD_SIZE": ("9" * 5000 + SECRET, [*WORKER, "--shard-within", "host"]),
    "TORCHELASTIC_RUN_ID": (f"a {SECRET}", WORKER),
    "NETBENCH_DELAY_LINE": (f"native{SECRET}", ["run", "-n", "2", "--delay", "10ms", "--steps", "1", "--out", "OUT"]),
}


@pytest.mark.parametrize("var", list(PLANTED))
def test_no_value_from_the_environment_is_echoed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str) -> None:
    value, argv = PLANTED[var]
    for name, good in TORCHRUN.items():
        monkeypatch.setenv(name, good)
    monkeypatch.setenv(var, value)
    out = tmp_path / "out"
    done = netbench(*(str(out) if a == "OUT" else a for a in argv))
    shown = done.out + done.err
    assert f"${var} must be" in done.error_line, shown[-2000:]
    assert SECRET not in shown and "\x1b" not in shown and "\x07" not in shown, shown[-2000:]
    assert not out.exists()  # refused before anything was made


def test_a_user_sudo_could_not_have_been_run_by_trusts_no_one_more(monkeypatch: pytest.MonkeyPatch) -> None:
    from netbench import safe_files

    monkeypatch.setenv("SUDO_UID", "9" * 5000)
    trusted = safe_files._trusted_owners()
    monkeypatch.setenv("SUDO_UID", "1234")
    assert safe_files._trusted_owners() == trusted | {1234}


@pytest.mark.parametrize("text", ["", " 7 ", "+7", "0007"])
def test_whole_numbers_are_read_as_written(text: str) -> None:
    got = environment.whole_number("N", low=0, high=10, default=3, env={"N": text})
    assert got == (3 if not text else 7)


@pytest.mark.parametrize("text", ["11", "-1", "7.0", "1e1", "٧", "9" * 20])
def test_whole_numbers_out_of_form_or_range_are_refused_by_name(text: str) -> None:
    with pytest.raises(environment.BadEnvironment, match=r"^\$N must be a whole number from 0 to 10$"):
        environment.whole_number("N", low=0, high=10, env={"N": text})
