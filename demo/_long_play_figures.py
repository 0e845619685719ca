"""Pictures of the long-play evaluation: a filmstrip and the per-direction table (PNG, via PIL and
matplotlib, imported only when drawn: the GPU host needs neither)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["save_direction_table", "save_filmstrip"]

_PER_ROW = 10  # frames per row of the filmstrip


def save_filmstrip(truth: np.ndarray, model: np.ndarray, every_seconds: float, fps: int, path: Path,
                   title: str = "long play") -> None:
    """One frame every ``every_seconds`` (at most the whole play): per group of ``_PER_ROW`` picks a
    row of the true world above a row of the model, with a 2 px gap between groups; the time of each
    pick under it (matplotlib). Makes ``path``'s directory."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    every = min(round(every_seconds * fps), len(model))
    picks = list(range(every - 1, len(model), every))
    rows = -(-len(picks) // _PER_ROW)
    h, w = model.shape[1:3]
    fig, axes = plt.subplots(2 * rows, _PER_ROW, figsize=(_PER_ROW * 1.3, 2 * rows * 1.45), squeeze=False)
    for ax in axes.ravel():
        ax.axis("off")
    for n, j in enumerate(picks):
        r, c = divmod(n, _PER_ROW)
        axes[2 * r, c].imshow(truth[j])
        axes[2 * r + 1, c].imshow(model[j])
        axes[2 * r + 1, c].set_title(f"{(j + 1) / fps:.0f} s", fontsize=7, y=-0.2)
        if c == 0:
            for row, label in ((2 * r, "world"), (2 * r + 1, "model")):
                axes[row, c].text(-8, h / 2, label, rotation=90, va="center", ha="right", fontsize=8)
    fig.suptitle(f"{title}: true world (upper) and model (lower) every {every / fps:.0f} s; {w}x{h}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def save_direction_table(probes: dict[str, dict[str, dict[str, float]]], path: Path) -> None:
    """A table: per direction, the model's and the true world's direction accuracy from rest and after
    play; cells under 0.90 in red."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(probes["from_rest"])
    columns = ["model, from rest", "world, from rest", "model, after play", "world, after play"]
    cells = [[probes[where][n][who] for where in ("from_rest", "after_play") for who in ("model", "ground_truth")]
             for n in names]
    fig, ax = plt.subplots(figsize=(7.5, 0.35 * len(names) + 1.2))
    ax.axis("off")
    table = ax.table(cellText=[[f"{v:.2f}" for v in row] for row in cells], rowLabels=names, colLabels=columns,
                     loc="center",
                     cellColours=[["#f4c7c3" if v < 0.9 else "#d9ead3" for v in row] for row in cells])
    table.scale(1.0, 1.3)
    ax.set_title("direction accuracy per held direction (>= 0.90 green)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
