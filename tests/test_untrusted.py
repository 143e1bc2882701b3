"""The one reader of files others wrote (netbench.untrusted): regular files only, no link unless the command line
names it, a size cap per kind, strict UTF-8, capped TOML and JSON, and messages that never echo the content."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from netbench import untrusted
from netbench.untrusted import BadInput

SECRET = "root:$6$secretsalt$hash:19000:0:99999:7:::"
SMALL = untrusted.Kind("test file", 10)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    out = tmp_path / "in"
    out.mkdir()
    (out / "secret").write_text(SECRET + "\n")
    (out / "secret").chmod(0o600)
    (out / "link").symlink_to(out / "secret")
    os.mkfifo(out / "fifo")
    (out / "folder").mkdir()
    (out / "big").write_bytes(b"x" * 100)
    (out / "latin1").write_bytes(b"caf\xe9")
    return out


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("link", "symbolic link"),
        ("fifo", "a FIFO, not a regular file"),
        ("folder", "a directory, not a regular file"),
        ("missing", "cannot be read"),
        ("latin1", "not UTF-8"),
    ],
)
def test_only_regular_utf8_files_are_read_and_nothing_waits(folder: Path, name: str, why: str) -> None:
    with pytest.raises(BadInput, match=why) as err:
        untrusted.read_text(folder / name, untrusted.RUN_FILE)
    assert "\n" not in str(err.value) and "secret" not in str(err.value).replace(str(folder), "")


def test_devices_are_refused_by_type_not_read() -> None:
    with pytest.raises(BadInput, match="character device"):
        untrusted.read_bytes("/dev/zero", untrusted.SHAPES)


def test_each_kind_has_its_cap(folder: Path) -> None:
    with pytest.raises(BadInput, match="100 bytes, more than the 10"):
        untrusted.read_bytes(folder / "big", SMALL)
    assert untrusted.read_bytes(folder / "big", untrusted.TOPOLOGY) == b"x" * 100


def test_a_link_is_followed_only_where_the_command_line_names_it(folder: Path) -> None:
    with pytest.raises(BadInput, match="symbolic link"):
        untrusted.read_text(folder / "link", untrusted.RUN_FILE)
    untrusted.named_on_command_line(["report", "--calibration", str(folder / "link")])
    assert untrusted.read_text(folder / "link", untrusted.RUN_FILE) == SECRET + "\n"


def test_no_folder_inside_the_named_one_may_be_a_link(tmp_path: Path, folder: Path) -> None:
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "runs").symlink_to(folder)
    with pytest.raises(BadInput, match="its folder .* is a symbolic link"):
        untrusted.read_text(sweep / "runs" / "big", untrusted.RUN_FILE, within=sweep)
    assert untrusted.read_text(folder / "big", untrusted.RUN_FILE, within=folder) == "x" * 100


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("a = " + "[" * 5000 + "]" * 5000, "nested more than 32 deep"),
        ("a = " + "[" * 40 + "]" * 40, "nested more than 32 deep"),
        ("x = " + "{a = " * 40 + "1" + "}" * 40, "nested more than 32 deep"),
        ("a = " + "9" * 5000, "a number longer than 19 digits"),
        ("a = 99999999999999999999", "a number longer than 19 digits"),
        ("a = 1e" + "9" * 100, "a number longer than 64 characters"),
        (f"[a]\nb = 1\n[a]\nb = '{SECRET}'\n", "invalid TOML at line 3"),
    ],
)
def test_toml_is_capped_and_its_errors_quote_nothing(text: str, why: str) -> None:
    started = time.monotonic()
    with pytest.raises(BadInput, match=why) as err:
        untrusted.parse_toml(text, "f.toml")
    assert time.monotonic() - started < 1
    assert str(err.value).startswith("f.toml: ") and "secret" not in str(err.value)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested more than 32 deep"),
        (json.dumps({"a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}), "nested more than 32"),
        ("9" * 5000, "a number longer than 19 digits"),
        ('{"a": 1' + "0" * 30 + "}", "a number longer than 19 digits"),
        ('{"a": "' + SECRET + '", }', "not valid JSON"),
    ],
)
def test_json_is_capped_and_its_errors_quote_nothing(text: str, why: str) -> None:
    with pytest.raises(BadInput, match=why) as err:
        untrusted.parse_json(text, "f.json")
    assert "secret" not in str(err.value)


def test_names_from_files_are_shown_only_when_plain() -> None:
    assert untrusted.shown_name("bogus") == "'bogus'"
    assert untrusted.shown_name("nodes.3", quoted=False) == "nodes.3"
    assert untrusted.shown_name(SECRET) == f"(a name of {len(SECRET)} characters)"
    assert untrusted.shown_name("\x1b[31mred") == "(a name of 8 characters)"
    assert untrusted.shown_path("a\x1bb") == "'a\\x1bb'"
