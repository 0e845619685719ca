#!/usr/bin/env bash
# The serving table on one H200 for three execution strategies, in ONE device call (< 10 min):
#     bash scripts/gpu_serving.sh            # world sessions of wan-1.3b-world-preview at 1,2,4,8,16
# For each of strategies/default.toml, decoder-stream.toml and two-replicas.toml:
#     python3 -m loadtest.serving --model wan-1.3b-world-preview --device cuda --mode world \
#       --levels $LEVELS --starts 1 --seconds $SWEEP_SECONDS --max-batch 8 --strategy strategies/NAME.toml \
#       --serve-arg=--kv-budget-bytes=$KV_BYTES --out $OUT/h200_world_NAME
# One daemon start per strategy (not the CPU table's two) and $SWEEP_SECONDS of play per level (default
# 8, not 20) so the three fit one call; every run has its own time limit, so one that hangs leaves
# the others theirs, and each writes as it goes. The same KV budget for all three (default 48 GiB:
# 16 world sessions need 16 x 2.59 GB in bf16); two-replicas splits it in halves, one per replica.
# The GPU host has no web stack: carry the wheels in .whl/ (scripts/gpu_env.sh says which and how);
# this script installs them into /tmp/site when the folder is there. Results: $OUT/h200_world_*/
# (serving.json/.md/.png, daemon-1.log), $OUT/env.txt; copy them to results/serving/ with the commit.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
LEVELS=${LEVELS:-1,2,4,8,16}
MODEL=${MODEL:-wan-1.3b-world-preview}  # MODEL=demo DEVICE=cpu rehearses the call here
DEVICE=${DEVICE:-cuda}
SECONDS_PER_LEVEL=${SWEEP_SECONDS:-8}  # not $SECONDS: bash's own clock
KV_BYTES=${KV_BYTES:-51539607552}
PER_RUN_S=${PER_RUN_S:-185}
STRATEGIES=${STRATEGIES:-default decoder-stream two-replicas}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
source scripts/gpu_env.sh || exit 1
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  for m in starlette uvicorn websockets httpx msgpack matplotlib; do  # what the sweep imports beside torch
    python3 -c "import $m" 2>/dev/null || echo "MISSING python module $m: carry its wheel in .whl/"
  done
  git rev-parse HEAD 2>/dev/null || echo "no git: SESSIOND_COMMIT=${SESSIOND_COMMIT:-unset}"
  date -u
  echo "levels $LEVELS, $SECONDS_PER_LEVEL s per level, kv budget $KV_BYTES bytes, $PER_RUN_S s per strategy"
} 2>&1 | tee "$OUT/env.txt"
status=0
for name in $STRATEGIES; do
  echo "== strategy $name ($(date -u +%T))" | tee -a "$OUT/env.txt"
  timeout "$PER_RUN_S" python3 -m loadtest.serving --model "$MODEL" --device "$DEVICE" --mode world \
    --levels "$LEVELS" --starts 1 --seconds "$SECONDS_PER_LEVEL" --max-batch 8 --strategy "strategies/$name.toml" \
    --serve-arg=--kv-budget-bytes="$KV_BYTES" --out "$OUT/h200_world_$name" 2>&1 | tee "$OUT/h200_world_${name}_log.txt"
  rc=${PIPESTATUS[0]}
  echo "== strategy $name: exit $rc ($(date -u +%T))" | tee -a "$OUT/env.txt"
  [ "$rc" -eq 0 ] || status=1
done
exit $status
