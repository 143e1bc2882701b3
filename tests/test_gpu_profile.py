"""Accelerator codec profiles (scripts/bench_codec_gpu.py) as ``netbench plan --calibration`` reads them (no GPU
needed).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from netbench.model.calibration import read_calibration, save_calibration

REPO = Path(__file__).resolve().parents[1]
PROFILE = REPO / "reports" / "gpu" / "calibration-h100.json"
NETBENCH = (
    str(Path(sys.executable).parent / "netbench")
    if (Path(sys.executable).parent / "netbench").exists()
    else shutil.which("netbench")
)
CODEC_FIELDS = (
    "compression_s_per_param",
    "encode_s_per_param",
    "decode_s_per_param",
    "encode_s_per_tensor",
    "decode_s_per_tensor",
)


def _bench_module():
    spec = importlib.util.spec_from_file_location("bench_codec_gpu", REPO / "scripts" / "bench_codec_gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plan(tmp_path: Path, calibration: Path, *args: str) -> dict:
    """``netbench plan --json`` through the installed console script."""
    env = {
        "PATH": str(Path(NETBENCH).parent) + ":/usr/bin:/bin",
        "NETBENCH_CACHE_DIR": str(tmp_path / "cache"),
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        [NETBENCH, "plan", *args, "--calibration", str(calibration), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _scaled(source: Path, target: Path, factor: float) -> Path:
    calib = read_calibration(source)
    update = {f: {k: v * factor for k, v in getattr(calib, f).items()} for f in CODEC_FIELDS}
    return save_calibration(calib.model_copy(update=update), target)


def test_the_h100_profile_drives_plans_compression(tmp_path):
    """The committed H100 profile is accepted, named, and its codec costs are what plan's compression time scales
    with.
    """
    args = ("--shapes", "llama-1b", "--replicator", "dct,random,full", "--nodes", "8", "--bw", "10gbit")
    doc = plan(tmp_path, PROFILE, *args)
    assert doc["calibration"]["source"] == "measured" and "H100" in doc["calibration"]["host"]
    calib = read_calibration(PROFILE)
    for row in doc["rows"]:
        name = row["replicator"]
        per_param = calib.compression(name) * 1_235_814_400
        enc, dec = calib.encode_decode_s(name, 1_235_814_400, 146)  # llama-1b: 146 tensors
        # the per-parameter term at least; the per-tensor term too where the model takes it
        assert per_param * (1 - 1e-9) <= row["compression_time_s"] <= (enc + dec) * (1 + 1e-9)
        assert row["compression_calibrated"] is True
    doubled = plan(tmp_path, _scaled(PROFILE, tmp_path / "doubled.json", 2.0), *args)
    for a, b in zip(doc["rows"], doubled["rows"]):
        assert b["compression_time_s"] == pytest.approx(2 * a["compression_time_s"], rel=1e-9)
        assert b["step_time_s"] > a["step_time_s"]


def test_bench_profile_form_is_what_plan_reads(tmp_path):
    """What the benchmark writes (here from made-up timings, without a GPU) is a profile plan accepts."""
    bench = _bench_module()
    timed = {
        "dct": {"encode_s": 0.030, "decode_s": 0.020},
        "striding": {"encode_s": 0.010, "decode_s": 0.008},
        "mtdao": {"encode_s": 0.0, "decode_s": 0.0},
    }
    small = {
        "spec": "small",
        "params": 70_000,
        "tensors": 57,
        "schemes": {k: {"encode_s": v["encode_s"] / 10, "decode_s": v["decode_s"] / 10} for k, v in timed.items()},
    }
    rows = [{"spec": "big", "params": 1_000_000_000, "tensors": 150, "schemes": timed}]
    args = argparse.Namespace(iters=10, world=2, host_network=False)
    profile = bench.build_profile(rows, small, args, "Test GPU")
    enc, dec = profile.encode_decode_s("dct", 1_000_000_000, 150)
    assert (enc, dec) == (pytest.approx(0.030), pytest.approx(0.020))  # the fit passes through both shape sets
    assert profile.encode_decode_s("dct", 70_000, 57)[0] == pytest.approx(0.003)
    path = save_calibration(profile, tmp_path / "profile.json")
    doc = plan(tmp_path, path, "--params", "1e9", "--replicator", "dct,striding", "--nodes", "4")
    assert doc["calibration"]["host"].endswith("Test GPU")
    assert all(r["compression_time_s"] > 0 and r["compression_calibrated"] for r in doc["rows"])
