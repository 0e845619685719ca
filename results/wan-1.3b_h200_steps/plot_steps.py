"""Where the 81-frame single-stream wall time went at each step of the speed work (H200, wan-1.3b,
global workload, batch 1): python results/wan-1.3b_h200_steps/plot_steps.py -> steps.png."""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
from matplotlib import pyplot as plt

HERE = Path(__file__).resolve().parent
STEPS = [
    ("before\n39da28b", HERE.parent / "wan-1.3b_h200_39da28b" / "wan-1.3b_h200.json"),
    ("1 fused norm,\nbench fix", HERE / "1_fused_norm_b1.json"),
    ("2 GELU\nepilogue", HERE / "2_gelu_epilogue_b1.json"),
    ("3 bias fold,\ncross K/V", HERE / "3_bias_fold_cross_kv_b1.json"),
    ("4 conv taps", HERE / "4_conv_taps_full" / "wan-1.3b_h200.json"),
    ("5 view alias", HERE / "5_view_alias_full" / "wan-1.3b_h200.json"),
    ("final\n(results/)", HERE.parent / "wan-1.3b_h200.json"),
]
PARTS = ("denoise", "cache", "decode")
COLOURS = {"denoise": "#4c72b0", "cache": "#55a868", "decode": "#c44e52", "outside steps": "#999999"}

labels, stacks, fps = [], [], []
for label, path in STEPS:
    if not path.exists():
        continue
    run = json.loads(path.read_text())["workloads"]["global"]["1"]
    seconds = {p: run["phases"][p]["total_s"] for p in PARTS}
    seconds["outside steps"] = run["wall_s"] - sum(seconds.values())
    labels.append(label)
    stacks.append(seconds)
    fps.append(run["fps_aggregate"])

fig, ax = plt.subplots(figsize=(8.0, 4.4), dpi=110)
bottom = [0.0] * len(labels)
for part in (*PARTS, "outside steps"):
    values = [s[part] for s in stacks]
    ax.bar(labels, values, bottom=bottom, color=COLOURS[part], label=part)
    bottom = [b + v for b, v in zip(bottom, values, strict=True)]
for x, (total, rate) in enumerate(zip(bottom, fps, strict=True)):
    ax.text(x, total + 0.04, f"{rate:.1f} fps", ha="center", fontsize=8)
ax.axhline(81 / 27, color="black", linestyle="--", linewidth=1, label="target 27 fps (3.0 s)")
ax.axhline(81 / 18.3, color="grey", linestyle=":", linewidth=1, label="reference loop 18.3 fps")
ax.set_ylabel("seconds for 81 frames (1 stream)")
ax.set_title("wan-1.3b on one H200: global workload, batch 1, DiT + streaming Wan-VAE decode", fontsize=9)
ax.tick_params(axis="x", labelsize=7)
ax.legend(fontsize=7, loc="upper right")
fig.tight_layout()
fig.savefig(HERE / "steps.png")
print(HERE / "steps.png")
