"""Encode/decode costs are keyed by the replicator settings that change them: non-default settings are measured
and cached under their own key, never predicted with the default settings' cost."""

from __future__ import annotations

import pytest
from test_calibration_cache import cache  # noqa: F401 - the same empty per-test calibration cache

import netbench.calibrate.measure as measure_mod
from netbench.calibrate.hostcache import cache_path, host_calibration, host_key, missing_keys
from netbench.declarations.config import ReplicatorConfig
from netbench.declarations.registry import names
from netbench.model.calibration import (
    Calibration,
    CalibrationError,
    cost_key,
    cost_settings,
    read_calibration,
    save_calibration,
    scheme_of,
)
from netbench.orchestrator.prediction import encode_decode_s


def test_default_settings_key_is_the_name() -> None:
    for name in names():
        assert cost_key(ReplicatorConfig(name=name)) == name


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"name": "dct", "topk": 8}, "dct[topk=8]"),
        ({"name": "dct", "topk": 8, "chunk": 32}, "dct[chunk=32,topk=8]"),  # sorted, so one key per combination
        ({"name": "dct", "value_dtype": "bf16"}, "dct[value_dtype=bf16]"),
        ({"name": "dct", "sign": False}, "dct[sign=False]"),
        ({"name": "random", "rate": 0.01}, "random[rate=0.01]"),
        ({"name": "diloco", "sync_every": 4}, "diloco[sync_every=4]"),
        ({"name": "lowrank", "rank": 16}, "lowrank[rank=16.0]"),
        ({"name": "full", "grad_dtype": "bf16"}, "full[grad_dtype=bf16]"),
    ],
)
def test_cost_settings_change_the_key(settings, key) -> None:
    assert cost_key(ReplicatorConfig(**settings)) == key and scheme_of(key) == settings["name"]


@pytest.mark.parametrize(
    "settings", [{"lr": 0.5}, {"seed": 3}, {"momentum_decay": 0.9}, {"bucket_mb": 2.0}, {"rate": 0.3}]
)
def test_settings_that_change_no_codec_work_keep_the_key(settings) -> None:
    # rate is random/striding's, not dct's; lr/seed/momentum_decay change no work; the pipeline is modelled apart
    # (model/overlap.py)
    assert cost_key(ReplicatorConfig(name="dct", **settings)) == "dct"


def test_every_cost_setting_is_a_replicator_field() -> None:
    assert names() and all(f in ReplicatorConfig.model_fields for name in names() for f in cost_settings(name))


CALIB = Calibration(
    source="measured",
    encode_s_per_param={"dct": 2e-9, "dct[topk=8]": 1e-9},
    decode_s_per_param={"dct": 1e-9, "dct[topk=8]": 3e-9},
    encode_s_per_tensor={"dct": 1e-5},
    decode_s_per_tensor={"dct[topk=8]": 2e-5},
)


def test_a_measured_key_uses_its_own_constants() -> None:
    assert CALIB.encode_decode_s("dct[topk=8]", 1000, 10) == pytest.approx((1e-6, 3e-6 + 2e-4))
    assert CALIB.encode_decode_s("dct", 1000, 10) == pytest.approx((2e-6 + 1e-4, 1e-6))


def test_an_unmeasured_key_falls_back_to_the_default_settings() -> None:
    assert not CALIB.measured("dct[chunk=32]") and CALIB.resolve("dct[chunk=32]") == "dct"
    assert CALIB.encode_decode_s("dct[chunk=32]", 1000, 10) == CALIB.encode_decode_s("dct", 1000, 10)
    assert CALIB.compression("dct[topk=8]") == pytest.approx(4e-9)


def test_run_prediction_uses_the_runs_settings() -> None:
    class Run:  # the parts of a RunConfig the prediction reads
        from netbench.emulation.spec import ClusterSpec

        cluster = ClusterSpec(nodes=2, up={"rate_bps": 1e8}, down={"rate_bps": 1e8})
        replicator = ReplicatorConfig(name="dct", topk=8)

    shapes = __import__("netbench.shapes", fromlist=["resolve_shapes"]).resolve_shapes("gpt2-small:blocks=1")
    params = sum(s.numel for s in shapes)
    enc, dec = encode_decode_s(Run, shapes, CALIB, cpus=Run.cluster.nodes)
    assert (enc, dec) == pytest.approx((params * 1e-9, params * 3e-9 + len(shapes) * 2e-5))


@pytest.fixture
def fake_measure(monkeypatch) -> list:
    """The measurement replaced by a recorder: every replicator at its defaults, plus ``opts.configs`` under their
    keys.
    """
    calls: list = []

    def measure(opts) -> Calibration:
        calls.append(opts)
        keys = [n for n in opts.schemes] + [cost_key(c) for c in opts.configs]
        return Calibration(
            source="measured",
            host="h",
            software_overhead_s=1e-4 * len(calls),
            encode_s_per_param={k: 1e-8 * len(calls) for k in keys},
            notes={f"compression.{k}": "timed" for k in keys},
        )

    monkeypatch.setattr(measure_mod, "measure", measure)
    return calls


def test_non_default_settings_are_measured_once_and_cached(cache, fake_measure) -> None:
    host_calibration()
    assert len(fake_measure) == 1
    topk8 = ReplicatorConfig(name="dct", topk=8)
    found = host_calibration(replicators=[topk8, ReplicatorConfig(name="dct"), topk8])
    assert found.measured_now and len(fake_measure) == 2
    extra = fake_measure[1]
    assert extra.schemes == () and [cost_key(c) for c in extra.configs] == ["dct[topk=8]"]  # only what was missing
    saved = read_calibration(cache_path(host_key()))
    assert saved.measured("dct[topk=8]") and saved.encode_s_per_param["dct[topk=8]"] == pytest.approx(2e-8)
    assert saved.encode_s_per_param["dct"] == pytest.approx(1e-8)  # the first measurement's constants are kept
    assert saved.software_overhead_s == pytest.approx(1e-4) and "compression.dct[topk=8]" in saved.notes
    again = host_calibration(replicators=[topk8])
    assert not again.measured_now and again.origin == "cache" and len(fake_measure) == 2


def test_fresh_cache_with_non_default_settings_measures_both(cache, fake_measure) -> None:
    found = host_calibration(replicators=[ReplicatorConfig(name="random", rate=0.01)])
    assert (
        len(fake_measure) == 2
        and found.calibration.measured("random[rate=0.01]")
        and found.calibration.measured("random")
    )


def test_explicit_file_is_never_changed(cache, fake_measure, tmp_path) -> None:
    path = save_calibration(CALIB, tmp_path / "mine.json")
    before = path.read_text()
    found = host_calibration(path, replicators=[ReplicatorConfig(name="dct", chunk=32)])
    assert found.origin == "file" and not fake_measure and path.read_text() == before
    assert missing_keys(found.calibration, [ReplicatorConfig(name="dct", chunk=32)])[0].chunk == 32


SIZED = Calibration(
    source="measured",
    encode_s_per_param={"dct": 6e-9},
    decode_s_per_param={"dct": 4e-9},
    encode_s_per_param_large={"dct": 7e-9},
    decode_s_per_param_large={"dct": 6e-9},
    decode_s_per_tensor={"dct": 1e-5},
    params_at=2_000_000,
    large_params=8_000_000,
)


def test_cost_per_parameter_grows_from_the_cache_size_to_the_memory_size() -> None:
    """Hand computation: decode at 2 M params 4 ns, at 8 M 6 ns; 4 M is halfway in log(params): 5 ns."""
    assert SIZED.encode_decode_s("dct", 1_000_000, 0) == pytest.approx((6e-3, 4e-3))  # below: the small model's cost
    assert SIZED.encode_decode_s("dct", 2_000_000, 0) == pytest.approx((12e-3, 8e-3))
    assert SIZED.encode_decode_s("dct", 4_000_000, 3) == pytest.approx((4e6 * 6.5e-9, 4e6 * 5e-9 + 3e-5))
    assert SIZED.encode_decode_s("dct", 8_000_000, 0) == pytest.approx((56e-3, 48e-3))
    assert SIZED.encode_decode_s("dct", 100_000_000, 0) == pytest.approx((0.7, 0.6))  # beyond: memory-bound, constant


def test_without_a_large_measurement_the_cost_is_size_independent() -> None:
    flat = SIZED.model_copy(update={"encode_s_per_param_large": {}, "decode_s_per_param_large": {}})
    assert flat.encode_decode_s("dct", 100_000_000, 0) == pytest.approx((0.6, 0.4))
    unsized = SIZED.model_copy(update={"params_at": 0, "large_params": 0})
    assert unsized.encode_decode_s("dct", 100_000_000, 0) == pytest.approx((0.6, 0.4))


def test_plan_and_run_use_the_same_size_dependent_cost() -> None:
    from netbench.model.network import GraphModel
    from netbench.model.schemes import scheme_from_config
    from netbench.model.steptime import Scenario
    from netbench.shapes import resolve_shapes

    shapes = resolve_shapes("gpt2-small:blocks=2")
    params = sum(s.numel for s in shapes)
    est = GraphModel.star_step(scheme_from_config(ReplicatorConfig(name="dct")), shapes, Scenario(workers=2), SIZED)
    assert est.compression_time_s == pytest.approx(sum(SIZED.encode_decode_s("dct", params, len(shapes))))
    assert est.compression_time_s == pytest.approx(params * 13e-9 + len(shapes) * 1e-5)  # 14.2 M > 8 M: the large costs


def test_plan_names_the_settings_it_fell_back_for(tmp_path, capsys) -> None:
    from netbench.cli.app import main

    path = save_calibration(CALIB, tmp_path / "mine.json")
    main(["plan", "--replicator", "dct", "--chunk", "32", "--nodes", "2", "--calibration", str(path)])
    out = capsys.readouterr().out
    assert "dct[chunk=32]: not measured with these settings; the default settings' cost is used" in " ".join(
        out.split()
    )
    main(["plan", "--replicator", "dct", "--topk", "8", "--nodes", "2", "--calibration", str(path), "--json"])
    import json

    doc = json.loads(capsys.readouterr().out)
    assert doc["calibration"]["measured"] == ["dct[topk=8]"]


def test_an_entry_from_before_the_size_and_settings_costs_is_measured_again(cache, fake_measure) -> None:
    from netbench.model.calibration import SCHEMA_VERSION

    key = host_key()
    assert key["calibration"] == str(SCHEMA_VERSION) == "4"
    old = {**key, "calibration": "3"}
    assert cache_path(old) != cache_path(key)


def test_a_calibration_without_encode_and_decode_apart_is_refused_in_one_line(tmp_path) -> None:
    """Version 1 stored encode + decode as one sum per parameter, which the step model cannot place on its two
    phases: reading it says so and names the way out, rather than predicting with a cost split by guess."""
    path = tmp_path / "old.json"
    path.write_text('{"version": 1, "source": "measured", "compression_s_per_param": {"dct": 1e-08}}')
    with pytest.raises(CalibrationError) as caught:
        read_calibration(path)
    message = str(caught.value)
    assert "\n" not in message and "version" in message and "re-run netbench calibrate" in message
    assert "1e-08" not in message  # the file's values are never echoed
    path.write_text('{"version": 2, "source": "measured", "encode_s_per_param": {"dct": 1e-08}}')
    assert read_calibration(path).encode_decode_s("dct", 1e6, 1) == pytest.approx((0.01, 0.0))
