#!/usr/bin/env bash
# Install everything netbench needs on a fresh Debian-like machine (run as root).
# torch is installed first and pinned: any other request makes pip fetch a multi-GB CUDA build.
# --for-tests also installs what the test suite checks against: Chromium (the reports render offline), the
# published reference replicators (the equivalence test races them) and mkdocs-material (the docs site builds strictly).
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
if command -v apt-get >/dev/null; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends \
        iproute2 iptables iperf3 tcpdump ethtool libnetfilter-queue-dev gcc python3-dev >/dev/null
fi
python3 -m pip install -q torch==2.13.0
python3 -m pip install -q -e '.[dev,churn]'  # torchft after torch: it keeps the CPU build
if [ "${1:-}" = "--for-tests" ]; then
    if command -v apt-get >/dev/null; then
        apt-get install -y -qq --no-install-recommends chromium >/dev/null
    fi
    python3 -m pip install -q -e '.[dev,churn,reference,docs]'
fi
echo "netbench: setup done ($(python3 -c 'import torch; print("torch", torch.__version__)'))"
