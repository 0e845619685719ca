#!/usr/bin/env bash
# The engine's GPU cost runs (issue 25), one device call each, results under $OUT (default ./out):
#     bash scripts/gpu_engine_cost.sh smoke     # kernels checked and timed, a mixed-context profile,
#                                               # one quick round of every lever at b=1 with fidelity
#     bash scripts/gpu_engine_cost.sh world     # the levers in 3 alternating rounds at b=1,2,4, fidelity
#     bash scripts/gpu_engine_cost.sh serving   # the 7-chunk serving window with the Wan VAE, b=1
#     bash scripts/gpu_engine_cost.sh diag      # where FP8's error comes from, GPU busy/idle per lever, serving
# Extra arguments go to the cost benchmark (e.g. --levers ...). Each step has its own time limit, so
# one that hangs leaves the others their time; every step writes as it goes.
set -u -o pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
source scripts/gpu_env.sh || exit 1
mode=${1:-smoke}
shift || true
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
  python3 -c "import fa3_fwd_interface as m; print('fa3_fwd_interface', m.__file__)"
  git rev-parse HEAD 2>/dev/null || echo "no git"
  date -u
} 2>&1 | tee "$OUT/env.txt"
model=wan-1.3b-world-preview
case "$mode" in
  smoke)
    timeout 270 python3 -m enginetools.bench.attention --json "$OUT/attention.json" --batch 1,2,4 --chunks 4,8 \
      --engine "$model" --engine-attention fa3,fp8 2>&1 | tee "$OUT/attention_log.txt"
    timeout 300 python3 -m enginetools.bench.cost --model "$model" --geometries world --batch 1 --rounds 1 \
      --steady-chunks 4 --levers base,fa3,fp8,fp8+graphs,fp8+fp8_proj,fp8+fp8_ffn --fidelity-seeds 1 \
      --json "$OUT/cost_smoke.json" "$@" 2>&1 | tee "$OUT/cost_smoke_log.txt"
    ;;
  world)
    timeout 575 python3 -m enginetools.bench.cost --model "$model" --geometries world --batch 1,2,4 --rounds 3 \
      --steady-chunks 8 --levers base,fa3,fa3+graphs,fp8,fp8+graphs,fp8+graphs+fp8_proj --fidelity-seeds 2 \
      --profile-levers base,fp8,fp8+graphs --json "$OUT/cost_world.json" --plot "$OUT/cost_world.png" "$@" \
      2>&1 | tee "$OUT/cost_world_log.txt"
    ;;
  diag)  # FP8 error sources on the model's own q/k/v, GPU busy/idle of one steady chunk per lever, then serving
    timeout 200 python3 -m enginetools.bench.cost --model "$model" --geometries world --batch 1 --rounds 1 \
      --steady-chunks 2 --chunks 4 --levers base,fp8 --fidelity-seeds 1 --profile-levers base,fa3,fp8,fp8+graphs \
      --json "$OUT/cost_diag.json" 2>&1 | tee "$OUT/cost_diag_log.txt"
    timeout 330 python3 -m enginetools.bench.cost --model wan-1.3b --geometries serving --batch 1 --rounds 3 \
      --steady-chunks 8 --levers base,fa3+graphs,fp8+graphs --fidelity-seeds 0 --json "$OUT/cost_serving.json" \
      2>&1 | tee "$OUT/cost_serving_log.txt"
    ;;
  fa3direct)  # FA3 through its registered op (less host time per call): checked, then b=1 in rounds
    timeout 60 python3 -m enginetools.bench.attention --json "$OUT/attention_direct.json" --batch 1 --chunks 4 \
      2>&1 | tee "$OUT/attention_direct_log.txt"
    timeout 200 python3 -m enginetools.bench.cost --model "$model" --geometries world --batch 1 --rounds 3 \
      --steady-chunks 8 --levers base,fa3,fa3+graphs --fidelity-seeds 0 --profile-levers fa3 \
      --json "$OUT/cost_fa3direct.json" 2>&1 | tee "$OUT/cost_fa3direct_log.txt"
    ;;
  serving)
    timeout 570 python3 -m enginetools.bench.cost --model wan-1.3b --geometries serving --batch 1 --rounds 3 \
      --steady-chunks 8 --levers base,fa3+graphs,fp8+graphs --fidelity-seeds 0 --json "$OUT/cost_serving.json" \
      "$@" 2>&1 | tee "$OUT/cost_serving_log.txt"
    ;;
  *)
    echo "unknown mode $mode: smoke, world or serving" >&2
    exit 2
    ;;
esac
