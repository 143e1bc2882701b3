"""Concurrent runs on one host, and the host itself: nothing is shared, nothing outside is touched.

Two `netbench run`s at once get their own names, subnets and shaping and measure only their own
traffic; and the host namespace's links, addresses, routes, qdiscs, firewall rules and bridge
sysctls read the same before and after (every netbench object lives in namespaces it created).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import leftovers
import pytest

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root")]
REPO = Path(__file__).resolve().parents[1]

# (command, what to drop from its output): counters and lifetimes change on their own.
_HOST_STATE = [
    (["ip", "-d", "link", "show"], None),
    (["ip", "addr", "show"], re.compile(r"^\s*valid_lft .*$", re.M)),
    (["ip", "route", "show", "table", "all"], None),
    (["ip", "-6", "route", "show", "table", "all"], None),
    (["ip", "rule", "show"], None),
    (["tc", "qdisc", "show"], None),
    (["iptables-legacy-save"], re.compile(r"^#.*$|\[\d+:\d+\]", re.M)),
    (["iptables-save"], re.compile(r"^#.*$|\[\d+:\d+\]", re.M)),
    (["nft", "list", "ruleset"], re.compile(r"counter packets \d+ bytes \d+")),
]


def host_state() -> dict[str, str]:
    """What the host namespace looks like, from each tool present on this machine."""
    state = {}
    for argv, noise in _HOST_STATE:
        if shutil.which(argv[0]) is None:
            continue
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        state[" ".join(argv)] = noise.sub("", out.stdout + out.stderr) if noise else out.stdout + out.stderr
    bridge = Path("/proc/sys/net/bridge")
    state["net.bridge present"] = str(bridge.is_dir())  # appears when br_netfilter loads
    for path in sorted(bridge.glob("*")) if bridge.is_dir() else ():
        state[str(path)] = path.read_text()
    state["ip_forward"] = Path("/proc/sys/net/ipv4/ip_forward").read_text()
    state.update(kernel_modules())
    return state


def kernel_modules() -> dict[str, str]:
    """The host kernel's module state: loaded modules (where the kernel has modules) and /sys/module.

    A `-m physdev` rule would load br_netfilter on a modular kernel, and with it switch on
    bridge-nf-call-iptables for every bridge on the host.
    """
    state = {}
    modules = Path("/proc/modules")
    if modules.exists():  # name, size, use count, users, state, address: the names and states are what matter
        state["/proc/modules"] = "\n".join(
            sorted(" ".join(line.split()[:1] + line.split()[4:5]) for line in modules.read_text().splitlines())
        )
    state["/sys/module"] = "\n".join(sorted(p.name for p in Path("/sys/module").iterdir()))
    return state


def _start(out: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "netbench",
            "run",
            "-r",
            "full",
            "--workload",
            "mlp",
            "--steps",
            "3",
            "--warmup",
            "1",
            "--out",
            str(out),
            "--json",
            *args,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_runs_at_once_keep_apart_and_leave_the_host_as_it_was(tmp_path: Path) -> None:
    before = host_state()
    slow = _start(tmp_path / "slow", "--bw", "20mbit")
    fast = _start(
        tmp_path / "fast", "--bw", "1gbit", "--delay", "5ms"
    )  # the delay line: iptables in its switch namespace
    outputs = [proc.communicate(timeout=300) for proc in (slow, fast)]
    assert [proc.returncode for proc in (slow, fast)] == [0, 0], [err[-2000:] for _, err in outputs]
    a, b = (json.loads(out) for out, _ in outputs)

    assert a["run_id"] != b["run_id"]
    clusters = [json.loads((Path(s["run_dir"]) / "run.json").read_text())["cluster"] for s in (a, b)]
    assert clusters[0]["subnet"] != clusters[1]["subnet"]
    assert (a["bw_bps"], a["delay_engine"]) == (20e6, "none") and b["delay_engine"] in ("delayline", "netem")
    assert a["comm_time_s"] > 3 * b["comm_time_s"]  # each run was shaped by its own links
    # Same workload and replicator: each capture saw only its own cluster's traffic, so the same bytes.
    assert a["capture_wire_bytes_per_step"] == pytest.approx(b["capture_wire_bytes_per_step"], rel=0.05)
    assert a["wire_tx_bytes_per_step"] == pytest.approx(a["capture_wire_bytes_per_step"], rel=0.05)

    for summary in (a, b):
        assert leftovers.clean(summary["run_id"]), leftovers.traces(summary["run_id"])
    after = host_state()
    assert after.keys() == before.keys()
    changed = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
    assert not changed, changed


def test_delay_line_and_doctor_leave_kernel_modules_and_bridge_sysctls_alone(tmp_path: Path) -> None:
    """The delay line matches ports with -i/-o on a routed switch: no physdev, so no br_netfilter."""
    before = host_state()
    doctor = subprocess.run(
        [sys.executable, "-m", "netbench", "doctor", "--json"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert doctor.returncode == 0, doctor.stderr[-2000:]
    assert json.loads(doctor.stdout)["delay_line"] or shutil.which("iptables-restore") is None
    delayed = _start(tmp_path / "delayed", "--bw", "100mbit", "--delay", "5ms", "--engine", "delayline")
    out, err = delayed.communicate(timeout=300)
    assert delayed.returncode == 0, err[-2000:]
    assert json.loads(out)["delay_engine"] == "delayline"
    after = host_state()
    changed = {k: (before[k], after[k]) for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert not changed, changed
