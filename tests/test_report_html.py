"""report.html: self-contained (figures inline, no URL to fetch), rendered by headless Chromium where installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from synthetic_sweep import grid, write_sweep

NETBENCH = str(Path(sys.executable).parent / "netbench")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-headless-shell")


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    losses = {"full": [10.0 - s for s in range(12)], "dct": [10.0 - s / 2 for s in range(12)]}
    folder = write_sweep(tmp_path_factory.mktemp("html") / "sweep", grid(), kind="transformer", losses=losses)
    done = subprocess.run([NETBENCH, "report", str(folder)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return folder / "report.html"


def test_html_inlines_every_figure_and_names_no_url(report: Path) -> None:
    text = report.read_text()
    md = (report.parent / "report.md").read_text()
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert len(figures) >= 6
    images = re.findall(r'<img src="([^"]*)"', text)
    assert len(images) == len(figures) and all(src.startswith("data:image/png;base64,") for src in images)
    assert not re.search(r"https?://", text), "the page must not reference anything on a network"
    assert "<table>" in text and "full 2n 10mbit 0ms" in text and "Time to target loss" in text


def _page_requests(net_log: Path) -> list[str]:
    """URLs the page itself asked for (the browser's own background requests have no origin)."""
    doc = json.loads(net_log.read_text())
    start = doc["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return [
        p["url"]
        for e in doc["events"]
        if e["type"] == start and "url" in (p := e.get("params", {})) and p.get("initiator") != "not an origin"
    ]


def _render(page: Path, out: Path) -> tuple[Path, list[str]]:
    """Screenshot ``page`` with headless Chromium inside a network namespace of its own (nothing can leave)."""
    net_log, shot = out / f"{page.stem}.netlog.json", out / f"{page.stem}.png"
    isolate = ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-rn"]
    cmd = [
        *isolate,
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        f"--user-data-dir={out / 'profile'}",
        f"--log-net-log={net_log}",
        f"--screenshot={shot}",
        "--window-size=1280,3000",
        page.as_uri(),
    ]
    subprocess.run(cmd, capture_output=True, timeout=120, check=True)
    return shot, _page_requests(net_log)


@pytest.mark.skipif(
    CHROMIUM is None or shutil.which("unshare") is None, reason="needs Chromium (apt-get install chromium) and unshare"
)
def test_chromium_renders_the_page_without_fetching_anything(report: Path, tmp_path) -> None:
    shot, requests = _render(report, tmp_path)
    assert [u for u in requests if not u.startswith(("file:", "data:"))] == []
    from PIL import Image

    with Image.open(shot) as img:
        assert img.size == (1280, 3000)
        colours = img.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 50  # figures and tables drawn, not a blank page
    # the detector does see a page's own request (to loopback: nothing may go anywhere else)
    control = tmp_path / "control.html"
    control.write_text('<html><body><img src="http://127.0.0.1:9/x.png"></body></html>')
    _, requests = _render(control, tmp_path)
    assert "http://127.0.0.1:9/x.png" in requests
