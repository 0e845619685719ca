#!/usr/bin/env bash
# Idempotent setup: a virtual environment in .venv with the project and its dev tools.
# torch is pinned to 2.13.0, the CPU wheel this kind of machine carries on disk; an unpinned
# torch would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.sessiond-setup
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[setup] installing torch (CPU) and the project"
  .venv/bin/python -m pip install -q --disable-pip-version-check "torch==2.13.0"
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev,fleet]"
  echo "$want" > "$stamp"
else
  echo "[setup] .venv is up to date"
fi
