"""Reading what others wrote: the one way netbench opens, reads and parses a file it did not write itself.

netbench runs as root and reads files users hand it: topologies, schedules, scenarios, shapes, calibrations, sweep
folders and run directories copied from someone else, traces from a paper's artifact. Any of them may be a link to a
file only root can read, a FIFO that blocks forever, ``/dev/zero``, gigabytes, bytes that are not UTF-8, JSON nested
ten thousand deep or a number of ten thousand digits. So every such file is read here, by one rule:

- a **regular file only**: opened without blocking (a FIFO never waits for a writer) and checked with ``fstat``
  before a byte is read; a directory, FIFO, socket or device is refused;
- **no links**, except where the command line names that very path (:func:`named_on_command_line`): a link in a
  folder, or a path a file names (a scenario's ``schedule = "..."``), is refused; under a folder the user named
  (``within``), no folder between it and the file may be a link either;
- a **size cap per kind** of file (:class:`Kind`), checked on the file's size and again on what was read;
- **strict UTF-8**;
- for TOML and JSON (:func:`parse_toml`, :func:`parse_json`), a **nesting cap** and a **number-length cap**, so no
  parse recurses without bound or converts a ten-thousand-digit integer, and JSON's ``NaN`` and ``Infinity`` refused
  (no writer netbench trusts puts them there, and every later reader would refuse them);
- **each file read once per command** and a **byte budget per command** (:func:`begin_command`): a file read again
  (a sweep's summary naming one steps.csv on every row) comes from the command's cache (:func:`parsed` keeps what it
  was parsed into as well), and bytes read past :data:`READ_BUDGET` are refused, so a command's reading grows with
  what is new in its input, never with how often a file is named;
- every problem is one :class:`BadInput` line that names the file and the problem and **never echoes the content**
  (a file may be ``/etc/shadow`` behind a link a scenario names). A name a message must show (a key, a node) goes
  through :func:`shown_name`, which shows only short plain names.
"""

import errno
import json
import os
import re
import stat
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

__all__ = [
    "BadInput",
    "Kind",
    "TOPOLOGY",
    "SCENARIO",
    "SCHEDULE",
    "SHAPES",
    "CALIBRATION",
    "RUN_JSON",
    "RUN_FILE",
    "TRACE",
    "POINT_STEPS",
    "FIGURE",
    "COUNTERS",
    "NCCL_TESTS_LOG",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "READ_BUDGET",
    "begin_command",
    "begin_point",
    "named_on_command_line",
    "parsed",
    "named",
    "read_bytes",
    "read_text",
    "read_text_if_present",
    "parse_json",
    "parse_toml",
    "read_json",
    "read_toml",
    "shown_name",
    "shown_path",
]

MAX_DEPTH = 32  # tables and lists inside each other: netbench's own files nest 5 deep
MAX_INT_DIGITS = 19  # a 64-bit integer: TOML's own range, and more than any count or size netbench takes
MAX_FLOAT_CHARS = 64  # a float written out in full is 25 characters
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}")
READ_BUDGET = 8 << 30  # bytes one command (or one point of a sweep) reads: a 100,000-step run of 64 nodes, twice
CACHE_BYTES = 512 << 20  # what the per-command cache keeps of the files (and their parses) read last


class BadInput(ValueError):
    """A file netbench reads is not what it should be (a link, a FIFO, too big, not UTF-8, wrong content): one line
    naming the file and the problem, never its content.
    """


@dataclass(frozen=True)
class Kind:
    """A kind of file netbench reads: how messages call it and the most bytes one may hold."""

    what: str
    max_bytes: int


TOPOLOGY = Kind("topology file", 256 << 10)
SCENARIO = Kind("scenario file", 1 << 20)
SCHEDULE = Kind("schedule file", 16 << 20)
SHAPES = Kind("shapes file", 16 << 20)  # a list of tensor shapes: kilobytes, not gigabytes
CALIBRATION = Kind("calibration file", 1 << 20)
RUN_JSON = Kind("JSON file", 64 << 20)  # run.json, sweep.json, a worker's spec: a few kB to a few MB
RUN_FILE = Kind("file", 256 << 20)  # steps.csv of 100 000 steps x 64 nodes, summary.csv, a worker's records
TRACE = Kind("trace file", 256 << 20)
POINT_STEPS = Kind("steps.csv drawn in a sweep's figures", 16 << 20)  # larger: the point is drawn without its spread
FIGURE = Kind("figure", 32 << 20)  # a figure netbench draws is well under 1 MB
NCCL_TESTS_LOG = Kind("nccl-tests log", 4 << 20)  # all_reduce_perf with NCCL_DEBUG=INFO for a few hundred ranks
COUNTERS = Kind("counters file", 1 << 16)  # the delay line's counters and control file: a few hundred bytes

_named: set[str] = set()


@dataclass
class _Reading:
    """What the running command has read: bytes so far, and the last files read (and parsed) by identity."""

    spent: int = 0
    kept: int = 0
    cache: dict[tuple[object, ...], tuple[int, object]] = field(default_factory=dict)

    def get(self, key: tuple[object, ...]) -> tuple[int, object] | None:
        """(size, value) kept under ``key`` (the value may be None), or None."""
        hit = self.cache.pop(key, None)
        if hit is not None:
            self.cache[key] = hit  # most recently used last
        return hit

    def keep(self, key: tuple[object, ...], size: int, value: object) -> None:
        """Keep ``value`` (``size`` bytes of file behind it), dropping the least recently used past CACHE_BYTES."""
        if size > CACHE_BYTES:
            return
        self.cache[key] = (size, value)
        self.kept += size
        while self.kept > CACHE_BYTES:
            old = next(iter(self.cache))
            self.kept -= self.cache.pop(old)[0]


_reading = _Reading()


def begin_command(argv: list[str]) -> None:
    """A command starts: its byte budget full, its cache empty, and the paths its command line names remembered
    (:func:`named_on_command_line`)."""
    global _reading
    _reading = _Reading()
    _named.clear()
    named_on_command_line(argv)


def begin_point() -> None:
    """A sweep's next point starts: what its workers write is read within a budget of its own (the cache emptied)."""
    global _reading
    _reading = _Reading()


def named_on_command_line(argv: list[str]) -> None:
    """Remember the paths the command line names (``FILE``, ``--opt FILE``, ``--opt=FILE``): a link there is followed.

    The user typed them, so a link among them is theirs to follow; a link anywhere else (inside a folder, or named by
    a file) is not.
    """
    for arg in argv:
        for value in (arg, arg.partition("=")[2]) if arg.startswith("--") else (arg,):
            if value:
                _named.add(os.path.abspath(value))


def named(path: str | Path) -> bool:
    """True where the command line names ``path`` itself (so a link there is the user's to follow)."""
    return os.path.abspath(path) in _named


def shown_path(path: str | Path) -> str:
    """A path as a message shows it: as it is where plain, quoted with its control and invisible characters escaped
    where not."""
    text = str(path)
    return text if text.isprintable() and not any(c.isspace() for c in text) else ascii(text)


def shown_name(name: object, quoted: bool = True) -> str:
    """A name read from a file (a key, a node, a column) as a message may show it: a short plain name (letters,
    digits, ``_.+-``) as it is (quoted unless ``quoted`` is False, as in a dotted field ``nodes.3``), anything else
    only as ``(a name of N characters)``, so no content of another kind is echoed.
    """
    text = str(name)
    if not _PLAIN_NAME.fullmatch(text):
        return f"(a name of {len(text)} characters)"
    return repr(text) if quoted else text


def _refuse(path: str | Path, why: str) -> BadInput:
    """``/x/t.toml: WHY``: the path and the problem."""
    return BadInput(f"{shown_path(path)}: {why}")


def _type_of(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _check_folders(path: Path, within: Path, kind: Kind) -> None:
    """No folder between ``within`` (the folder the user named) and ``path`` is a link."""
    try:
        inner = Path(os.path.abspath(path)).relative_to(os.path.abspath(within))
    except ValueError:
        raise _refuse(path, f"lies outside {shown_path(within)}") from None
    folder = Path(os.path.abspath(within))
    for part in inner.parts[:-1]:
        folder = folder / part
        if os.path.islink(folder):
            why = f"its folder {shown_path(folder)} is a symbolic link (netbench follows none in folders it reads)"
            raise _refuse(path, why)


def _identity(info: os.stat_result) -> tuple[object, ...]:
    """What tells one file's content from another's while a command runs (a rewritten file gets a new one)."""
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _opened(path: str | Path, kind: Kind, within: str | Path | None) -> tuple[int, os.stat_result]:
    """An open descriptor of ``path`` and its ``fstat``, checked: regular, within the cap, no link where none may be."""
    if within is not None:
        _check_folders(Path(path), Path(within), kind)
    follow = named(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW))
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            why = "is a symbolic link (netbench follows a link only where the command line names it)"
            raise _refuse(path, why) from None
        raise _refuse(path, f"cannot be read ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refuse(path, f"is {_type_of(info.st_mode)}, not a regular file")
        if info.st_size > kind.max_bytes:
            raise _refuse(path, f"{info.st_size} bytes, more than the {kind.max_bytes} a {kind.what} may hold")
        if _reading.spent + info.st_size > READ_BUDGET:
            raise _refuse(path, f"past the {READ_BUDGET} bytes one command reads (split the input)")
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _read_all(path: str | Path, fd: int, kind: Kind) -> bytes:
    chunks, size = [], 0
    try:
        while size <= kind.max_bytes:
            chunk = os.read(fd, min(1 << 20, kind.max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            _reading.spent += len(chunk)
    except OSError as exc:
        raise _refuse(path, f"cannot be read ({exc.strerror})") from None
    if size > kind.max_bytes:
        raise _refuse(path, f"more than the {kind.max_bytes} bytes a {kind.what} may hold")
    if _reading.spent > READ_BUDGET:
        raise _refuse(path, f"past the {READ_BUDGET} bytes one command reads (split the input)")
    return b"".join(chunks)


def read_bytes(path: str | Path, kind: Kind, *, within: str | Path | None = None) -> bytes:
    """The bytes of ``path``, a regular file of at most ``kind.max_bytes`` (else :class:`BadInput`).

    A link is followed only where the command line names ``path``; ``within``: the folder the user named that holds
    ``path`` (a sweep folder, a run directory), none of whose folders on the way may be a link. A file the command
    read before (the same file, unchanged) comes from its cache and costs nothing of :data:`READ_BUDGET`.
    """
    return _cached(path, kind, within, "bytes", lambda data: data)


T = TypeVar("T")


def _cached(path: str | Path, kind: Kind, within: str | Path | None, how: str, make: Callable[[bytes], T]) -> T:
    """``make(bytes of path)``, from the command's cache where the same file was made into ``how`` before."""
    fd, info = _opened(path, kind, within)
    key = (*_identity(info), how)
    try:
        hit = _reading.get(key)
        if hit is not None:
            return hit[1]  # type: ignore[return-value]
        data = _read_all(path, fd, kind)
    finally:
        os.close(fd)
    value = make(data)
    _reading.keep(key, len(data), value)
    return value


def read_text(path: str | Path, kind: Kind, *, within: str | Path | None = None) -> str:
    """:func:`read_bytes`, decoded strictly as UTF-8 (a byte-order mark dropped)."""
    return _cached(path, kind, within, "text", lambda data: _decoded(path, data))


def _decoded(path: str | Path, data: bytes) -> str:
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise _refuse(path, f"not UTF-8 text (byte {exc.start})") from None


def parsed(path: str | Path, kind: Kind, how: str, parse: Callable[[str], T], *, within: str | Path | None = None) -> T:
    """``parse(read_text(path))``, made once per command for each file and ``how`` (what the parse makes of it): a
    table named on every row of another is parsed once. ``parse`` raises :class:`BadInput` for what it refuses; what
    it returns is shared, so a caller that changes it takes a copy.
    """
    return _cached(path, kind, within, how, lambda data: parse(_decoded(path, data)))


def read_text_if_present(path: str | Path, kind: Kind, *, within: str | Path | None = None) -> str | None:
    """:func:`read_text`, or None where nothing (not even a dangling link) is at ``path``."""
    if not os.path.lexists(path):
        return None
    return read_text(path, kind, within=within)


def _depth_problem(data: object, check_ints: bool) -> str | None:
    """Why ``data`` nests too deep (or, with ``check_ints``, holds an integer too long), or None.

    Iterative, so data nested deeper than the interpreter's stack is measured rather than recursed into.
    """
    limit = 10**MAX_INT_DIGITS
    todo: list[tuple[object, int]] = [(data, 1)]
    while todo:
        item, depth = todo.pop()
        if depth > MAX_DEPTH:
            return f"nested more than {MAX_DEPTH} deep"
        for value in item.values() if isinstance(item, dict) else item:  # type: ignore[attr-defined]
            if isinstance(value, (dict, list)):
                todo.append((value, depth + 1))
            elif check_ints and type(value) is int and not -limit < value < limit:
                return f"a number longer than {MAX_INT_DIGITS} digits"
    return None


class _Unusable(ValueError):
    pass


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Unusable(f"a number longer than {MAX_INT_DIGITS} digits")
    return int(text)


def _float(text: str) -> float:
    if len(text) > MAX_FLOAT_CHARS:
        raise _Unusable(f"a number longer than {MAX_FLOAT_CHARS} characters")
    return float(text)


def _constant(name: str) -> float:
    raise _Unusable(f"{name} is not a number JSON holds")


def parse_json(text: str, source: str | Path) -> object:
    """JSON ``text`` (from ``source``, named in messages), within the nesting and number caps; ``NaN`` and
    ``Infinity`` (which Python's reader takes and strict JSON has not) refused."""
    load = lambda t: json.loads(t, parse_int=_int, parse_float=_float, parse_constant=_constant)  # noqa: E731
    return _parsed(load, text, source, "JSON")


def parse_toml(text: str, source: str | Path) -> dict[str, object]:
    """TOML ``text`` (from ``source``, named in messages), within the nesting and number caps."""
    return _parsed(lambda t: tomllib.loads(t, parse_float=_float), text, source, "TOML")  # type: ignore[return-value]


def _parsed(load: Callable[[str], object], text: str, source: str | Path, form: str) -> object:
    """``load(text)`` where it parses within the caps, else BadInput saying which cap, or where the syntax broke."""
    try:
        data = load(text)
    except _Unusable as exc:
        raise _refuse(source, f"not usable {form} ({exc})") from None
    except RecursionError:
        raise _refuse(source, f"not usable {form} (nested more than {MAX_DEPTH} deep)") from None
    except ValueError as exc:
        raise _refuse(source, _syntax_problem(exc, form)) from None
    problem = _depth_problem(data, check_ints=form == "TOML") if isinstance(data, (dict, list)) else None
    if problem:
        raise _refuse(source, f"not usable {form} ({problem})")
    return data


def _syntax_problem(exc: ValueError, form: str) -> str:
    """Where the parser stopped, in its own words where they never quote the file (JSON's), by place alone (TOML's
    may quote keys); a ValueError of neither is an integer longer than Python converts."""
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
    if isinstance(exc, tomllib.TOMLDecodeError):
        return f"invalid TOML{_toml_place(exc)}"
    return f"not usable {form} (a number longer than {MAX_INT_DIGITS} digits)"


def _toml_place(exc: tomllib.TOMLDecodeError) -> str:
    """Where tomllib stopped (" at line 3, column 8"): its message may quote the file's keys, so only the place."""
    found = re.search(r"line (\d+), column (\d+)", str(exc))
    return f" at line {found[1]}, column {found[2]}" if found else " (at its end)"


def read_json(path: str | Path, kind: Kind, *, within: str | Path | None = None) -> object:
    """:func:`read_text` then :func:`parse_json`."""
    return parse_json(read_text(path, kind, within=within), path)


def read_toml(path: str | Path, kind: Kind, *, within: str | Path | None = None) -> dict[str, object]:
    """:func:`read_text` then :func:`parse_toml`."""
    return parse_toml(read_text(path, kind, within=within), path)
