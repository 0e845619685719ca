#!/usr/bin/env bash
# Quick start 1: set up (idempotent) and run the daemon on its embedded default.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/sessiond serve "$@"
