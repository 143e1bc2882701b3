"""``netbench calibrate``: a short real measurement saved where asked, read back by ``plan``; bad input exits 2."""

import json

import pytest

from netbench.calibrate.hostcache import load_calibration
from netbench.cli.app import main
from netbench.shapes import resolve_shapes

SMALL = "llama:d_model=128,layers=1,ffn=256,vocab=512"


def test_calibrate_measures_saves_and_plan_reads_it(tmp_path, capsys):
    out = tmp_path / "calib.json"
    main(
        [
            "calibrate",
            "--out",
            str(out),
            "--iters",
            "50",
            "--replicator",
            "lowrank,mtdao",
            "--shapes",
            SMALL,
            "--steps",
            "1",
        ]
    )
    c = load_calibration(out)
    assert c.source == "measured" and c.torch_version
    assert c.software_overhead_s > 0 and c.overhead("all_gather") > 0
    assert c.loopback_bandwidth_bps and c.loopback_bandwidth_bps > 1e6
    assert c.compression("lowrank") > 0 and c.compression_s_per_param["mtdao"] == 0
    assert c.encode_s_per_param["lowrank"] > 0 and c.decode_s_per_param["lowrank"] > 0  # measured separately
    assert c.compression("lowrank") == pytest.approx(c.encode_s_per_param["lowrank"] + c.decode_s_per_param["lowrank"])
    capsys.readouterr()
    main(["plan", "--replicator", "lowrank", "--nodes", "4", "--calibration", str(out), "--json"])
    doc = json.loads(capsys.readouterr().out)
    row = doc["rows"][0]
    assert doc["calibration"]["source"] == "measured"
    # plan's encode + decode: per parameter and per tensor, as run predictions (gpt2-small:blocks=2: 24 tensors)
    tensors = len(resolve_shapes("gpt2-small:blocks=2"))
    assert row["compression_time_s"] == pytest.approx(
        row["params"] * c.compression("lowrank")
        + tensors * (c.encode_s_per_tensor.get("lowrank", 0) + c.decode_s_per_tensor.get("lowrank", 0))
    )
    # P (+ dense), R: gloo's pipeline hides part of the 2(N-1) per-hop overheads of each call behind transfers
    assert 0 < row["comm_latency_s"] <= 2 * 6 * c.software_overhead_s * (1 + 1e-9)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--shapes", "nope"], "--shapes"),
        (["--replicator", "zip"], "--replicator"),
        (["--iters", "3"], "--iters"),
        (["--topk", "9999"], "topk"),
    ],
)
def test_calibrate_bad_input(tmp_path, capsys, args, needle):
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", "--out", str(tmp_path / "c.json"), *args])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err
    assert not (tmp_path / "c.json").exists()
