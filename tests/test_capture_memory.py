"""Parsing a capture takes memory that does not grow with its packets (the bins are per step)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_pcap_memory", REPO / "scripts" / "bench_pcap_memory.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def peak(path: Path) -> dict:
    code = bench.CHILD.format(run_s=bench.RUN_S, steps=bench.STEPS, node=bench.NODE)
    out = subprocess.run(
        [sys.executable, "-c", code, "streamed", str(path)], capture_output=True, text=True, cwd=REPO, check=True
    )
    return json.loads(out.stdout)


def test_streamed_parse_memory_is_flat_in_the_number_of_packets(tmp_path: Path) -> None:
    small, large = tmp_path / "small.pcap", tmp_path / "large.pcap"
    bench.write_pcap(small, 20_000)
    bench.write_pcap(large, 400_000)  # 20x the packets: a per-packet row (~0.5 KB) would add ~180 MiB
    a, b = peak(small), peak(large)
    assert (a["packets"], b["packets"]) == (20_000, 400_000)  # every packet binned into a step
    assert (b["peak_kib"] - a["peak_kib"]) / 1024 < 16, (a, b)
