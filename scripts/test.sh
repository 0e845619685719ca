#!/usr/bin/env bash
# Quick start 2: set up (idempotent) and run the whole test suite with its gates.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if ! command -v redis-server >/dev/null 2>&1; then
  echo "[test] installing redis-server"
  apt-get install -y -q redis-server >/dev/null
fi
if ! command -v etcd >/dev/null 2>&1; then
  echo "[test] installing etcd-server (the fleet's many-host discovery, tested on loopback)"
  (apt-get install -y -q etcd-server >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q etcd-server >/dev/null))
fi
if [ ! -x /usr/bin/chromium ]; then
  echo "[test] installing chromium (Debian package) for the browser tests"
  (apt-get install -y -q chromium >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null))
fi
echo "[test] ruff"
.venv/bin/ruff check protocols engine demo enginetools sessiond transports loadtest fleet httpapi tests
echo "[test] mypy"
.venv/bin/mypy protocols engine demo enginetools sessiond transports loadtest fleet httpapi
echo "[test] pytest"
.venv/bin/python -m pytest -q "$@"
