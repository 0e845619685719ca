#!/usr/bin/env bash
# One GPU call, several rollout-training recipes side by side: each variant trains from the shipped
# weights (engine/weights, or RESUME) in its own process on the one GPU for MINUTES (the demo DiT at batch 48
# leaves most of an H100/H200 idle, so three share it at little cost each), then OUT gets, per
# variant, NAME.safetensors (the written weights; the encoder is the shipped one) and NAME.tar.gz
# (demo.json, losses.png, the training log), plus gpu.txt. At most three variants: the device
# returns eight files.
#
#   bash scripts/demo_variants_gpu.sh OUT MINUTES "NAME:FLAGS" ["NAME:FLAGS" ...]
#   e.g. bash scripts/demo_variants_gpu.sh "$OUT" 7.5 "regress8:--max-horizon 8" \
#          "adv01:--objective adversarial --adversarial-weight 0.1 --max-horizon 8"
#
# RESUME (environment): the weights every variant starts from (default engine/weights; a directory
# outside the tree's tracked files travels with the call's carry list).
# CONTINUE=1 (environment): each variant continues its run of the previous call exactly (optimizer,
# step, average, critic or teacher: /tmp/demo-variant-NAME/rollout_state.pt, which lives while the
# machine stays up); a variant without that state fails. Give each variant the very flags of the
# first call (the trainer refuses others: --new-settings overrides), and the first call
# --schedule-minutes over all the calls so that the horizon growth and the learning-rate decay span them.
#
# Evaluate each elsewhere: put NAME.safetensors as demo.safetensors beside engine/weights'
# demo_encoder.safetensors and the variant's demo.json, then `python -m demo.eval --weights
# DIR/demo.safetensors --long-play --seconds 300 --threads 1 --json J --figures DIR`.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bash scripts/demo_variants_gpu.sh OUT MINUTES NAME:FLAGS ...}
minutes=${2:?give the minutes each variant trains}
shift 2
[ "$#" -ge 1 ] && [ "$#" -le 3 ] || { echo "give one to three NAME:FLAGS variants" >&2; exit 2; }
python=${PYTHON:-python3}  # DEVICE (environment): cuda by default; cpu to try the script here
export PYTHONUNBUFFERED=1
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv > "$out/gpu.txt" || true
pids=()
names=()
for variant in "$@"; do
  name=${variant%%:*}
  flags=${variant#*:}
  work=/tmp/demo-variant-$name
  from=${RESUME:-engine/weights}
  if [ "${CONTINUE:-0}" = 1 ]; then
    [ -f "$work/rollout_state.pt" ] || { echo "CONTINUE=1: $work holds no rollout_state.pt to continue" >&2; exit 2; }
    from=$work
    [ -f "$work/train_log.txt" ] && mv "$work/train_log.txt" "$work/train_log_before.txt"
  fi
  mkdir -p "$work"
  # shellcheck disable=SC2086  # the variant's flags are split into flags on purpose
  "$python" -m demo.train_rollout --resume "$from" --out "$work" --minutes "$minutes" --device "${DEVICE:-cuda}" \
    $flags > "$work/train_log.txt" 2>&1 &
  pids+=("$!")
  names+=("$name")
done
status=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { echo "variant ${names[$i]} failed" >&2; status=1; }
done
for name in "${names[@]}"; do
  work=/tmp/demo-variant-$name
  tail -4 "$work/train_log.txt" | sed "s/^/[$name] /"
  [ -f "$work/demo.safetensors" ] && cp "$work/demo.safetensors" "$out/$name.safetensors"
  (cd "$work" && tar czf "$out/$name.tar.gz" train_log.txt $(ls demo.json losses.png 2>/dev/null))
done
exit "$status"
