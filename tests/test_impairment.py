"""Choosing the impairment engine, and what each one asks the shaper for (no namespaces needed)."""

from __future__ import annotations

import dataclasses

import pytest

from netbench.emulation import impairment, shaping
from netbench.emulation.capabilities import Capabilities
from netbench.emulation.errors import ClusterError
from netbench.emulation.spec import ClusterSpec, DirectionSpec

RUN_ID = "0123abcd"


def caps(netem: bool, delay_line: bool) -> Capabilities:
    return Capabilities(
        root=True,
        user_namespaces=True,
        tbf=True,
        netem=netem,
        nfqueue_rule=delay_line,
        netfilterqueue_module=delay_line,
    )


def spec(delay_s: float = 0.0, engine: str = "auto") -> ClusterSpec:
    return ClusterSpec(
        nodes=2, up=DirectionSpec(rate_bps=1e8, delay_s=delay_s), down=DirectionSpec(rate_bps=1e8), engine=engine
    )


@pytest.mark.parametrize(
    ("delay_s", "engine", "netem", "delay_line", "chosen"),
    [
        (0.0, "auto", True, True, "none"),
        (0.0, "netem", False, False, "none"),  # nothing to impair: no engine needed, whatever was asked
        (0.005, "auto", True, True, "netem"),
        (0.005, "auto", False, True, "delayline"),
        (0.005, "delayline", True, True, "delayline"),
        (0.005, "netem", True, False, "netem"),
    ],
)
def test_the_engine_follows_the_spec_and_the_host(
    delay_s: float, engine: str, netem: bool, delay_line: bool, chosen: str
) -> None:
    assert impairment.choose(spec(delay_s, engine), caps(netem, delay_line), RUN_ID).name == chosen


@pytest.mark.parametrize(
    ("engine", "netem", "message"), [("netem", False, "no sch_netem"), ("auto", False, "neither works here")]
)
def test_no_engine_for_an_impaired_spec_is_a_cluster_error(engine: str, netem: bool, message: str) -> None:
    with pytest.raises(ClusterError, match=message):
        impairment.choose(spec(0.005, engine), caps(netem, delay_line=False), RUN_ID)


@pytest.mark.parametrize(("engine", "netem_below_tbf"), [("netem", True), ("delayline", False)])
def test_only_netem_puts_a_qdisc_of_its_own_on_the_links(monkeypatch, engine: str, netem_below_tbf: bool) -> None:
    asked = []
    monkeypatch.setattr(
        shaping, "apply", lambda ipr, index, direction, offload, use_netem, acks_first: asked.append(use_netem) or {}
    )
    chosen = impairment.choose(spec(0.005, engine), caps(netem=True, delay_line=True), RUN_ID)
    chosen.shape(None, 1, spec(0.005).up, offload=False)
    assert asked == [netem_below_tbf]


@pytest.mark.parametrize("engine", ["netem", "delayline"])
@pytest.mark.parametrize("acks_first", [True, False])
def test_links_serve_small_packets_first_where_the_kernel_can(monkeypatch, engine: str, acks_first: bool) -> None:
    asked = []
    monkeypatch.setattr(shaping, "apply", lambda *args, acks_first, **kwargs: asked.append(acks_first) or {})
    found = dataclasses.replace(caps(netem=True, delay_line=True), acks_first=acks_first)
    for delay_s in (0.0, 0.005):
        impairment.choose(spec(delay_s, engine), found, RUN_ID).shape(None, 1, spec(delay_s).up, offload=False)
    assert asked == [acks_first, acks_first]


def test_only_the_delay_line_runs_a_helper_and_counts(tmp_path, monkeypatch) -> None:
    netem = impairment.choose(spec(0.005), caps(netem=True, delay_line=True), RUN_ID)
    line = impairment.choose(spec(0.005, "delayline"), caps(netem=True, delay_line=True), RUN_ID)
    assert netem.pid is None and netem.stats() is None
    assert line.pid is None and line.stats() is None and line.stats_path is None  # not started: nothing counted yet
    monkeypatch.setattr(impairment.tmpfolders, "parent", lambda: tmp_path)
    line.stats_folder = impairment.delaystats.make_folder(RUN_ID)
    impairment.delaystats.write(line.stats_path, {"passed": 3, "dropped": 0})
    assert line.stats() == {"passed": 3, "dropped": 0}
    line.stop()
    assert list(tmp_path.iterdir()) == []  # its folder went with it


def test_native_delay_line_built_once_into_the_cache(tmp_path, monkeypatch) -> None:
    from netbench.emulation import delayline_native

    if delayline_native.shutil.which("cc") is None:
        pytest.skip("no C compiler")
    monkeypatch.setenv("NETBENCH_CACHE_DIR", str(tmp_path / "cache"))
    program = delayline_native.binary()
    assert program.parent == tmp_path / "cache" and program.stat().st_mode & 0o111
    built = program.stat().st_mtime_ns
    assert delayline_native.binary() == program and program.stat().st_mtime_ns == built  # cached: not rebuilt
    assert [p.name for p in program.parent.iterdir()] == [program.name]  # no half-built leftovers
    config = {
        "up": {7: {"delay_s": 0.01, "jitter_s": 0.0, "loss": 0.02}},
        "down": {},
        "seed": 42,
        "stats_path": "/tmp/x.json",
    }
    assert delayline_native.argv(program, config) == [str(program), "/tmp/x.json", "42", "up:7:0.01:0.0:0.02"]


@pytest.mark.parametrize(
    ("wanted", "buildable", "outcome"),
    [
        ("auto", True, "native"),
        ("auto", False, "python"),
        ("python", True, "python"),
        ("native", False, ClusterError),
        ("bogus", True, ClusterError),
    ],
)
def test_which_delay_line_runs(monkeypatch, tmp_path, wanted: str, buildable: bool, outcome) -> None:
    """Native where it builds; the Python one, with the reason in run.json, where it does not; forced by
    $NETBENCH_DELAY_LINE.
    """
    from netbench.emulation import delayline_native

    def binary():
        if not buildable:
            raise delayline_native.NativeUnavailable("no C compiler (apt-get install gcc)")
        return tmp_path / "delayline"

    monkeypatch.setenv("NETBENCH_DELAY_LINE", wanted)
    monkeypatch.setattr(delayline_native, "binary", binary)
    line = impairment.choose(spec(0.005, "delayline"), caps(netem=False, delay_line=True), RUN_ID)
    if outcome is ClusterError:
        with pytest.raises(ClusterError):
            line._native_program()
        return
    program = line._native_program()
    assert line.describe()["delay_line"] == outcome and (program is not None) == (outcome == "native")
    if not buildable and wanted == "auto":
        assert (
            line.describe()["delay_line_note"] == "native delay line unavailable: no C compiler (apt-get install gcc)"
        )
