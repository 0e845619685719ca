#!/usr/bin/env bash
# One GPU call: train the demo model on its own rollouts, then run the long-play and the quick
# evaluation on the GPU, and copy what to look at into OUT. Fits a 10-minute command at the defaults.
#
#   bash scripts/demo_rollout_gpu.sh OUT [MINUTES] [FROM]
#
# MINUTES: training wall clock (default 7; with the evaluations about 9.5 minutes on one H200). FROM: the weights to start from (default engine/weights,
# the shipped model); give /tmp/demo-rollout to continue the previous call's run exactly (its
# optimizer, step and average live there while the machine stays up), or a directory holding an
# earlier call's demo.safetensors, demo_encoder.safetensors and demo.json to start anew from them.
# ROLLOUT_FLAGS (environment): more flags for the trainer, e.g. ROLLOUT_FLAGS="--objective dmd" for
# distribution matching (a new run's default is regress; a continued run keeps its own). A dmd
# step runs about twice the network passes of a regress step: expect about half the steps.
# EVALUATE=0 (environment): train only and copy the weights out; evaluate them elsewhere with
# `python -m demo.eval --weights W --long-play --seconds 300 --figures DIR --json J` (the long
# play's statistics are CPU work: about 12 minutes on a 2-core box), leaving the GPU call's minutes
# to training.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bash scripts/demo_rollout_gpu.sh OUT [MINUTES] [FROM]}
minutes=${2:-7}
from=${3:-engine/weights}
work=/tmp/demo-rollout
python=${PYTHON:-python3}
mkdir -p "$out" "$work"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv > "$out/gpu.txt" || true
# shellcheck disable=SC2086  # ROLLOUT_FLAGS is split into flags on purpose
"$python" -m demo.train_rollout --resume "$from" --out "$work" --minutes "$minutes" --device cuda \
  ${ROLLOUT_FLAGS:-} 2>&1 | tee "$out/train_log.txt"
cp "$work/demo.safetensors" "$work/demo_encoder.safetensors" "$work/demo.json" "$work/losses.png" "$out/"
if [ "${EVALUATE:-1}" = "0" ]; then
  exit 0
fi
"$python" -m demo.eval --weights "$work/demo.safetensors" --device cuda --long-play --seconds 300 \
  --figures "$out" --json "$out/long_play.json" > "$out/long_play_log.txt" 2>&1
"$python" -m demo.eval --weights "$work/demo.safetensors" --device cuda --quick --json "$out/eval_quick.json" \
  > /dev/null
"$python" - "$out" <<'EOF'
import json, sys
out = sys.argv[1]
targets = json.load(open(f"{out}/long_play.json"))["long_play"]["targets"]
quick = json.load(open(f"{out}/eval_quick.json"))["targets"]
for name, row in {**targets, **quick}.items():
    print(f"{name:32s} {row['measured']:.3f} (target {row['target']}) {'met' if row['met'] else 'NOT met'}")
EOF
