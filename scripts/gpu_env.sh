#!/usr/bin/env bash
# Source on the GPU host (bash, from the repository root) before a device call's work:
#     source scripts/gpu_env.sh
# The GPU host has torch, Triton, numpy, msgpack, httpx, matplotlib and pillow, but no starlette,
# uvicorn, websockets, redis or FlashAttention-3. Their wheels travel with the call in .whl/ (ignored
# by git; name .whl in the call's carry list), downloaded here once for the host's Python 3.12:
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
#       -d .whl starlette uvicorn websockets redis fa3-fwd==0.0.3
# This installs them into $SITE (default /tmp/site), adds `flash_attn_config` (fa3-fwd 0.0.3's
# interface imports its config under that name; the wheel ships it as `fa3_fwd_config`) and puts
# $SITE first on PYTHONPATH. Without .whl/ it falls back to .fa3/ (scripts/gpu_fa3_env.sh).
SITE=${SITE:-/tmp/site}
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
    || { echo "gpu_env: installing .whl/ failed" >&2; return 1 2>/dev/null || exit 1; }
  if [ -f "$SITE/fa3_fwd_config.py" ] && [ ! -f "$SITE/flash_attn_config.py" ]; then
    echo "from fa3_fwd_config import *  # noqa: F403 - the name fa3-fwd's interface imports" > "$SITE/flash_attn_config.py"
  fi
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  echo "gpu_env: installed $(ls .whl | wc -l) wheels into $SITE"
elif [ -f .fa3/_C.abi3.so.xz ]; then
  FA3_SITE=$SITE source scripts/gpu_fa3_env.sh
else
  echo "gpu_env: neither .whl/ nor .fa3/ was carried: no web stack, no FlashAttention-3" >&2
fi
