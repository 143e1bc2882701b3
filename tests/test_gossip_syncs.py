"""scripts/gossip_syncs.py: how well a sync's flows used each link between two sites, from a run's TCP samples."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from netbench.model.framing import Framing

REPO = Path(__file__).resolve().parents[1]
WAN_BPS = 10e6
SAMPLE_S = 0.1


def load_script():
    spec = importlib.util.spec_from_file_location("gossip_syncs", REPO / "scripts" / "gossip_syncs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def two_sites() -> dict:
    """run.json's parts the script reads: two nodes on two sites joined by a 10mbit WAN."""
    lan = {"rate_bps": 1e9, "delay_s": 0.0}
    wan = {"rate_bps": WAN_BPS, "delay_s": 0.0}
    return {
        "config": {
            "cluster": {
                "topology": {
                    "nodes": [{"name": "n0", "switch": "site0"}, {"name": "n1", "switch": "site1"}],
                    "switches": ["site0", "site1"],
                    "links": [
                        {"name": "n0", "a": "n0", "b": "site0", "forward": lan, "reverse": lan},
                        {"name": "n1", "a": "n1", "b": "site1", "forward": lan, "reverse": lan},
                        {"name": "site0--site1", "a": "site0", "b": "site1", "forward": wan, "reverse": wan},
                    ],
                }
            }
        },
        "cluster": {"nodes": [{"index": 0, "address": "10.0.0.1"}, {"index": 1, "address": "10.0.0.2"}]},
    }


def write_samples(run_dir: Path, share: float, cwnd: int, srtt_s: float) -> None:
    """n0 sends to n1 at ``share`` of the WAN's goodput from t = -0.5 s to 1 s; n1 only ACKs."""
    goodput = WAN_BPS / 8 * Framing().efficiency()
    tcp = run_dir / "tcp"
    tcp.mkdir(parents=True)
    lines = []
    for k in range(16):
        t = -0.5 + k * SAMPLE_S
        conn = {
            "conn": "10.0.0.1:40000->10.0.0.2:50000",
            "cwnd": cwnd,
            "srtt_us": int(srtt_s * 1e6),
            "in_flight_bytes": 60_000,
            "bytes_sent": int(k * share * goodput * SAMPLE_S),
            "delivery_rate_bps": int(share * goodput * 8),
        }
        lines.append(json.dumps({"event": "tcp", "t": round(t, 3), "conns": [conn]}))
    (tcp / "node0.jsonl").write_text("\n".join(lines) + "\n")
    (tcp / "node1.jsonl").write_text("")


def test_a_flow_held_by_its_window_shows_below_the_links_rate(tmp_path):
    """A flow whose window over its round trip is half the WAN's goodput: half the goodput over the span, and its
    window accounts for what it delivered; the direction that carried nothing prints no line."""
    script = load_script()
    mss = Framing().mss
    goodput = WAN_BPS / 8 * Framing().efficiency()
    srtt = 0.1
    cwnd = round(0.5 * goodput * srtt / mss)
    write_samples(tmp_path, 0.5, cwnd, srtt)
    lines = script.crossings(tmp_path, two_sites(), 0.0, 1.0, 1.0)
    assert len(lines) == 1
    line = lines[0]
    assert line.lstrip().startswith("site0->site1:")
    assert "0.50 of the goodput" in line
    assert "1 in flight 11 samples: 0.50 of it, windows/rtt 0.99 of that, rtt  100 ms" in line  # 41 segments


def test_a_flow_at_the_links_rate_fills_it_and_a_dilated_run_counts_emulated_time(tmp_path):
    """The same samples taken in a run dilated 2 times: wall seconds are half as many emulated ones, so the bytes
    over the span fill the goodput."""
    script = load_script()
    goodput = WAN_BPS / 8 * Framing().efficiency()
    write_samples(tmp_path, 0.5, round(goodput * 0.1 / Framing().mss), 0.1)
    line = script.crossings(tmp_path, two_sites(), 0.0, 1.0, 2.0)[0]
    assert "1.00 of the goodput" in line
    assert "rtt   50 ms" in line


def test_a_run_without_sites_prints_no_link_lines(tmp_path):
    script = load_script()
    write_samples(tmp_path, 0.5, 40, 0.1)
    data = two_sites()
    data["config"]["cluster"]["topology"] = None
    assert script.crossings(tmp_path, data, 0.0, 1.0, 1.0) == []
