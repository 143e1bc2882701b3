#!/usr/bin/env bash
# Install netbench into an empty virtual environment (no system site-packages, not editable) and
# run its console script: --help, doctor, and a small run over a delayed link. Proves pyproject declares every
# import and ships the native delay line's source (built from the installed package on first use).
# torch goes in first, pinned: any other request makes pip fetch a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
python=$(command -v python3)
venv=$(mktemp -d /tmp/netbench-fresh-venv.XXXXXX)
work=$(mktemp -d /tmp/netbench-fresh-run.XXXXXX)
trap 'rm -rf "$venv" "$work"' EXIT
"$python" -m venv "$venv"
"$venv/bin/pip" install -q torch==2.13.0
"$venv/bin/pip" install -q .
cd "$work"  # away from the checkout: only the installed package can be imported
"$venv/bin/netbench" --help >/dev/null
"$venv/bin/netbench" doctor
export NETBENCH_CACHE_DIR="$work/cache"  # an empty cache: the delay line is compiled from the installed source
"$venv/bin/netbench" run --bw 100mbit --delay 5ms --workload mlp --steps 3 --warmup 1 --out "$work/runs" --json >"$work/summary.json"
"$venv/bin/python" - "$work/summary.json" "$(command -v cc || true)" <<'PY'
import json, pathlib, sys
summary = json.load(open(sys.argv[1]))
assert summary.get("status", "ok") == "ok" and summary["step_time_s"] > 0, summary
cluster = json.loads((pathlib.Path(summary["run_dir"]) / "run.json").read_text())["cluster"]
expected = "native" if sys.argv[2] else "python"  # setup.sh installs cc and libnetfilter-queue-dev
assert cluster.get("delay_line") == expected, (cluster.get("delay_line"), cluster.get("delay_line_note"))
print(f"fresh venv: netbench run ok over 5 ms, {cluster['delay_line']} delay line, step {summary['step_time_s']:.4f} s")
PY
echo "fresh venv: install, --help, doctor and run passed"
