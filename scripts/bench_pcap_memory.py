#!/usr/bin/env python3
"""Peak memory of turning a capture into per-step columns, against the number of packets in it.

Writes synthetic header-only pcaps (IPv4/TCP frames of one node's link, as tcpdump writes them
with snaplen 96) of growing size, and parses each in a fresh process two ways:

* ``streamed`` -- :func:`netbench.capture.pcap.bin_pcap`, what `netbench run` does: records are
  read a chunk at a time and summed into per-step bins on the fly;
* ``whole``    -- :func:`netbench.capture.pcap.parse_pcap` + ``per_step``: one row per packet in
  a DataFrame first (what every run did before; kept for tests and small captures).

Prints each process's peak RSS (ru_maxrss), its growth over the smallest capture, and the
parse rate. Streamed memory should stay flat as packets grow; whole grows with them.

    python3 scripts/bench_pcap_memory.py                    # 100k, 1M and 3M packets
    python3 scripts/bench_pcap_memory.py --packets 100000 2000000 --json
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NODE, PEER = "198.18.0.1", "198.18.0.2"
STEPS = 50
RUN_S = 100.0  # the synthetic capture spans this many seconds, STEPS equal windows


def frame(src: str, dst: str, seq: int, payload: int) -> bytes:
    """Ethernet + IPv4 + TCP (20-byte header) with ``payload`` bytes claimed by the IP length, cut to 96 bytes."""
    ip_src, ip_dst = (bytes(int(x) for x in a.split(".")) for a in (src, dst))
    eth = b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00"
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + payload, 0, 0, 64, 6, 0, ip_src, ip_dst)
    tcp = struct.pack("!HHIIBBHHH", 40000, 29500, seq % 2**32, 0, 5 << 4, 0x10, 65535, 0, 0)
    return (eth + ip + tcp + b"x" * payload)[:96]


def write_pcap(path: Path, packets: int) -> None:
    """``packets`` frames over RUN_S seconds: data one way, an ACK back for every second one."""
    data_frame = frame(NODE, PEER, 0, 1448)
    ack_frame = frame(PEER, NODE, 0, 0)
    record = struct.Struct("<IIII")
    with path.open("wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 96, 1))
        chunk = []
        for i in range(packets):
            t = 1_700_000_000 + RUN_S * (i + 0.5) / packets  # inside the windows (t_from, t_to]
            sec, usec = int(t), int((t % 1) * 1e6)
            if i % 3 == 2:
                body = ack_frame
                chunk.append(record.pack(sec, usec, len(body), 54) + body)
            else:
                body = data_frame[:38] + struct.pack("!I", (i * 1448) % 2**32) + data_frame[42:]
                chunk.append(record.pack(sec, usec, len(body), 1514) + body)
            if len(chunk) >= 65536:
                fh.write(b"".join(chunk))
                chunk.clear()
        fh.write(b"".join(chunk))


CHILD = """
import json, resource, sys, time
import pandas as pd
from netbench.capture.pcap import bin_pcap, parse_pcap, per_step
how, path = sys.argv[1], sys.argv[2]
t0 = 1_700_000_000.0
edges = [t0 + {run_s} * k / {steps} for k in range({steps} + 1)]
windows = pd.DataFrame({{"step": range({steps}), "t_from": edges[:-1], "t_to": edges[1:]}})
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
if how == "streamed":
    frame = bin_pcap(path, "{node}", windows).frame()
else:
    frame = per_step(parse_pcap(path, "{node}"), windows)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
packets = int(frame["capture_tx_packets"].sum() + frame["capture_rx_packets"].sum())
print(json.dumps({{"seconds": time.perf_counter() - started, "peak_kib": peak, "base_kib": base, "packets": packets}}))
"""


def measure(how: str, path: Path) -> dict:
    code = CHILD.format(run_s=RUN_S, steps=STEPS, node=NODE)
    out = subprocess.run(
        [sys.executable, "-c", code, how, str(path)], capture_output=True, text=True, cwd=REPO, check=True
    )
    return json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, nargs="+", default=[100_000, 1_000_000, 3_000_000])
    parser.add_argument(
        "--skip-whole-above",
        type=int,
        default=3_000_000,
        help="don't run the whole-file parser above this many packets",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="netbench-pcap-bench-") as tmp:
        for packets in sorted(args.packets):
            path = Path(tmp) / f"{packets}.pcap"
            write_pcap(path, packets)
            for how in ("streamed", "whole"):
                if how == "whole" and packets > args.skip_whole_above:
                    continue
                r = measure(how, path)
                rows.append(
                    {
                        "how": how,
                        "packets": packets,
                        "file_mib": path.stat().st_size / 2**20,
                        "peak_mib": r["peak_kib"] / 1024,
                        "import_mib": r["base_kib"] / 1024,
                        "seconds": r["seconds"],
                        "binned": r["packets"],
                    }
                )
            path.unlink()
    for how in ("streamed", "whole"):
        mine = [r for r in rows if r["how"] == how]
        for r in mine:
            r["growth_mib"] = r["peak_mib"] - mine[0]["peak_mib"]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"{'parser':9s} {'packets':>10s} {'pcap MiB':>9s} {'peak RSS MiB':>13s} {'growth MiB':>11s} {'s':>7s} "
        f"{'packets/s':>10s}"
    )
    for r in rows:
        print(
            f"{r['how']:9s} {r['packets']:>10,d} {r['file_mib']:9.1f} {r['peak_mib']:13.1f} {r['growth_mib']:+11.1f} "
            f"{r['seconds']:7.2f} {r['packets'] / r['seconds']:10,.0f}"
        )
    streamed = [r for r in rows if r["how"] == "streamed"]
    whole = [r for r in rows if r["how"] == "whole"]
    if len(streamed) > 1:
        print(
            f"streamed: peak RSS grew {streamed[-1]['growth_mib']:+.1f} MiB from {streamed[0]['packets']:,} to "
            f"{streamed[-1]['packets']:,} packets"
        )
    if len(whole) > 1:
        per_packet = (
            (whole[-1]["peak_mib"] - whole[0]["peak_mib"]) * 2**20 / (whole[-1]["packets"] - whole[0]["packets"])
        )
        print(f"whole:    about {per_packet:.0f} bytes per packet")
    return 0


if __name__ == "__main__":
    sys.exit(main())
