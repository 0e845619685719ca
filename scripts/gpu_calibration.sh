#!/usr/bin/env bash
# One GPU call (issues 25 and 27): the start-up cost profile of `sessiond serve` on the H200 before and
# after FlashAttention-3, through `sessiond replay-compare` (each daemon its own process, the
# replayer another): one start with `--attention sdpa` (cuDNN, the engine before issue 25) and one
# with the default `auto` (FA3 where installed), each replaying one family trace at 2x. The
# daemons log at info level, so `daemon-duty.log` holds the profile's steps and "cost model
# calibrated ... in N s"; `compare.json` holds ready_after_s and the calibrated costs.
#
#     bash scripts/gpu_calibration.sh [TRACE]      # results under $OUT (default ./out), one .tgz per start
#
# Run with carry [".whl"] (scripts/gpu_env.sh: the web stack and fa3-fwd travel as wheels).
set -u -o pipefail
cd "$(dirname "$0")/.."
trace=${1:-load_traces/families/f97620682-60s/directors-middling-6.jsonl}
OUT=${OUT:-out}
MODEL=${MODEL:-wan-1.3b-world-preview}  # MODEL=demo DEVICE=cpu rehearses the call here
DEVICE=${DEVICE:-cuda}
export PYTHONUNBUFFERED=1
python=${PYTHON:-python3}
mkdir -p "$OUT"
source scripts/gpu_env.sh || exit 1
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  echo "commit ${SESSIOND_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
  date -u
  "$python" -c "import torch; print('torch', torch.__version__)"
  "$python" -c "import fa3_fwd_interface as m; print('fa3_fwd_interface', m.__file__)" 2>&1 | tail -1
} 2>&1 | tee "$OUT/env.txt"
for attention in sdpa auto; do
  began=$(date +%s)
  timeout 270 "$python" -m sessiond.cli replay-compare "$trace" --model "$MODEL" --device "$DEVICE" --policies duty \
    --max-batch 4 --kv-budget-gib "${KV_GIB:-60}" --speed 2 --serve-arg=--attention="$attention" --serve-arg=--log-level=info \
    --out "$OUT/$attention" > "$OUT/$attention.log" 2>&1
  echo "attention $attention: rc $? in $(( $(date +%s) - began )) s" | tee -a "$OUT/env.txt"
  grep -h "ready after\|calibrated\|engine ready\|start verdict" "$OUT/$attention.log" "$OUT/$attention"/daemon-*.log \
    2>/dev/null | tee -a "$OUT/env.txt"
  tar czf "$OUT/$attention.tgz" -C "$OUT" "$attention" "$attention.log" && rm -rf "${OUT:?}/$attention" "$OUT/$attention.log"
done
