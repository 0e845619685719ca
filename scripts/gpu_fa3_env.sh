#!/usr/bin/env bash
# Source on the GPU host (bash, from the repository root) to make FlashAttention-3 importable:
#     source scripts/gpu_fa3_env.sh
# Unpacks what .fa3/ carries (the fa3-fwd 0.0.3 wheel's files, its 105 MB extension xz-compressed so
# that the tree travels; copy .fa3/ next to the checkout and name it in the call's carry list) into
# $FA3_SITE (default /tmp/site): fa3_fwd/_C.abi3.so, fa3_fwd_interface.py, fa3_fwd_config.py and
# flash_attn_config.py (the interface imports its config under that name), then puts $FA3_SITE first
# on PYTHONPATH. Idempotent. A host that can install packages needs none of this: pip install
# 'sessiond[gpu]'.
FA3_SITE=${FA3_SITE:-/tmp/site}
if [ ! -f .fa3/_C.abi3.so.xz ]; then
  echo "gpu_fa3_env: .fa3/_C.abi3.so.xz is missing (carry .fa3 with the call)" >&2
  return 1 2>/dev/null || exit 1
fi
python3 - "$FA3_SITE" <<'PY'
import lzma, pathlib, shutil, sys

site, src = pathlib.Path(sys.argv[1]), pathlib.Path(".fa3")
(site / "fa3_fwd").mkdir(parents=True, exist_ok=True)
so = site / "fa3_fwd" / "_C.abi3.so"
if not so.exists():
    with lzma.open(src / "_C.abi3.so.xz") as packed, open(so, "wb") as out:
        shutil.copyfileobj(packed, out)
for name in ("fa3_fwd_interface.py", "fa3_fwd_config.py"):
    shutil.copy(src / name, site / name)
(site / "flash_attn_config.py").write_text("from fa3_fwd_config import *  # noqa: F403 - the name the interface imports\n")
info = src / "fa3_fwd-0.0.3.dist-info"
if info.is_dir():
    shutil.copytree(info, site / info.name, dirs_exist_ok=True)
print(f"gpu_fa3_env: FlashAttention-3 unpacked into {site} ({so.stat().st_size / 2**20:.0f} MiB extension)")
PY
export PYTHONPATH="$FA3_SITE${PYTHONPATH:+:$PYTHONPATH}"
