#!/usr/bin/env bash
# Issue 27's H200 part, one device call: one `sessiond serve` start (duty, its own
# start-up calibration, ~85 s) and six traces of a family replayed back to back by a separate
# client process, all within the 600 s a device call may run.
#
#     bash scripts/h200_family.sh FAMILY_DIR [TRACE_NAME ...]
#
# FAMILY_DIR: a folder `sessiond trace-gen family --out FAMILY_DIR --seed N` wrote here (60 s
# traces; commit it or carry it). Without names, six shapes: two director-only, the burst, the
# interrupting directors, players, mixed. Results under $OUT (default ./out). SERVE_ARGS: more
# options for the daemon, e.g. SERVE_ARGS="--attention fp8" (each word goes as one --serve-arg).
#
# Wheels: the GPU host has no web stack and no FlashAttention-3; their wheels travel in .whl/ (ignored
# by git): scripts/gpu_env.sh says how to fetch them and installs them there. Run with carry [".whl"].
set -u -o pipefail
cd "$(dirname "$0")/.."
family=${1:?usage: h200_family.sh FAMILY_DIR [TRACE_NAME ...]}
shift
OUT=${OUT:-out}
MODEL=${MODEL:-wan-1.3b-world-preview}  # MODEL=demo DEVICE=cpu KV_GIB=1 (and .whl/ set aside) rehearses the call here
DEVICE=${DEVICE:-cuda}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
source scripts/gpu_env.sh || exit 1
if [ $# -gt 0 ]; then
  names=("$@")
else
  names=(directors-middling directors-wide burst-directors directors-interrupting players-few mixed)
fi
traces=()
for name in "${names[@]}"; do
  for path in "$family"/"$name"-*.jsonl; do
    [ -e "$path" ] && traces+=("$path")
  done
done
if [ ${#traces[@]} -eq 0 ]; then
  echo "no trace of ${names[*]} in $family" >&2
  exit 2
fi
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  git rev-parse HEAD 2>/dev/null || echo "no git"
  date -u
  cat /proc/loadavg
  python3 -c "import fa3_fwd_interface as m; print('fa3_fwd_interface', m.__file__)" 2>&1 | tail -1
  # anything of a call before still running (a warm machine), and the GPU's state as this call starts
  ps -eo pid,pcpu,rss,etime,args --sort=-pcpu | head -8 | cut -c1-200
  nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu --format=csv
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv
  printf '%s\n' "${traces[@]}"
} 2>&1 | tee "$OUT/env.txt"
# the KV budget: 60 GiB on an H200 (139 GiB), 40 on an H100 (78 GiB; 60 does not fit beside the
# decoder there), which the device may lend for an H200 call; KV_GIB says otherwise
if [ -z "${KV_GIB:-}" ]; then
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" in
    *H200*) KV_GIB=60 ;;
    *) KV_GIB=40 ;;
  esac
fi
# 6 x ~65 s of replay + ~85 s start + drains: inside 590 s
# refusals and their reasons in the daemon's log (family/daemon-duty.log); SERVE_ARGS may say otherwise
serve=(--serve-arg=--log-level=info)
for word in ${SERVE_ARGS:-}; do
  serve+=("--serve-arg=$word")
done
# /v1/capacity each second (margin, prior duties, cost corrections: why a session was refused)
: > "$OUT/compare_log.txt"
python3 scripts/capacity_poll.py "$OUT/compare_log.txt" "$OUT/capacity.jsonl" 2> "$OUT/capacity_poll_err.txt" &
poller=$!
timeout "${LIMIT_S:-590}" python3 -m sessiond.cli replay-compare "${traces[@]}" --model "$MODEL" --device "$DEVICE" \
  --policies duty --max-batch 4 --kv-budget-gib "$KV_GIB" "${serve[@]}" --out "$OUT/family" 2>&1 | tee "$OUT/compare_log.txt"
rc=$?
kill "$poller" 2>/dev/null
# the per-trace reports (each session's refusal reason, timeline, plots) lie three folders down, deeper
# than a device call returns: one archive beside the table
[ -d "$OUT/family/duty" ] && tar czf "$OUT/reports.tgz" -C "$OUT/family" duty
exit $rc
