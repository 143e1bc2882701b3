"""Calibration save/load round trip, defaults, env override and broken files."""

import json

import pytest

from netbench.calibrate.hostcache import load_calibration
from netbench.model.calibration import ENV_VAR, Calibration, CalibrationError, default_path, save_calibration


def test_defaults_when_absent(tmp_path):
    c = load_calibration(tmp_path / "missing.json")
    assert c.source == "defaults"
    assert c.software_overhead_s == 0 and c.compression("dct") == 0 and c.acks_per_segment == 0.5


def test_round_trip(tmp_path):
    c = Calibration(
        source="measured",
        software_overhead_s=4e-5,
        software_overhead_by_collective={"all_gather": 7e-5},
        loopback_bandwidth_bps=2e10,
        encode_s_per_param={"dct": 3e-8, "full": 0.0},
        acks_per_segment=0.25,
        notes={"x": "y"},
    )
    path = save_calibration(c, tmp_path / "deep" / "calibration.json")
    assert path.exists() and json.loads(path.read_text())["source"] == "measured"
    back = load_calibration(path)
    assert back == c
    assert back.overhead("all_gather") == 7e-5 and back.overhead("all_reduce") == 4e-5
    assert back.compression("dct") == 3e-8 and back.compression("random") == 0


def test_env_var_sets_the_default_path(tmp_path, monkeypatch):
    target = tmp_path / "env.json"
    monkeypatch.setenv(ENV_VAR, str(target))
    assert default_path() == target
    save_calibration(Calibration(software_overhead_s=1e-4), target)
    assert target.exists()
    assert load_calibration().software_overhead_s == 1e-4


def test_no_env_means_the_host_cache(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert default_path() is None


@pytest.mark.parametrize("text", ["{not json", json.dumps({"software_overhead_s": -1}), json.dumps({"bogus": 1})])
def test_broken_file_is_an_error_not_defaults(tmp_path, text):
    path = tmp_path / "c.json"
    path.write_text(text)
    with pytest.raises(CalibrationError, match="c.json"):
        load_calibration(path)
