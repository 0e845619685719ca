"""Themes of the demo world: palettes and overlays chosen by words in the prompt.

Every theme maps the same terrain materials to its own colours, strongly enough that a
nearest-centroid classifier on frame colours tells them apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "DEFAULT_THEME",
    "MATERIALS",
    "PROMPT_EXAMPLES",
    "THEMES",
    "THEME_NAMES",
    "Theme",
    "theme_for_prompt",
]

# terrain materials, indexed by the material map
MATERIALS: tuple[str, ...] = ("deep_water", "shallow_water", "sand", "grass", "bush", "canopy", "rock", "snowcap")

RGB = tuple[float, float, float]


@dataclass(frozen=True)
class Theme:
    """How one theme colours and lights the world."""

    name: str
    palette: tuple[RGB, ...]  # one colour per material, linear 0..1
    shade_amplitude: float  # how strongly the detail/shadow map modulates colour
    light: float  # global brightness multiplier
    night_light: bool = False  # dark except a pool of light around the avatar
    rain: bool = False  # moving streak overlay
    words: tuple[str, ...] = ()


THEMES: dict[str, Theme] = {
    "meadow": Theme(
        "meadow",
        ((0.10, 0.30, 0.62), (0.22, 0.50, 0.78), (0.86, 0.80, 0.56), (0.36, 0.66, 0.24),
         (0.26, 0.54, 0.18), (0.10, 0.36, 0.12), (0.52, 0.52, 0.50), (0.80, 0.80, 0.78)),
        0.30, 1.0, words=("meadow", "grass", "green", "field", "spring"),
    ),
    "snow": Theme(
        "snow",
        ((0.20, 0.30, 0.42), (0.55, 0.72, 0.86), (0.86, 0.89, 0.94), (0.94, 0.96, 0.99),
         (0.82, 0.88, 0.93), (0.16, 0.30, 0.26), (0.46, 0.50, 0.58), (1.00, 1.00, 1.00)),
        0.20, 1.0, words=("snow", "snowy", "winter", "ice", "icy", "frozen"),
    ),
    "desert": Theme(
        "desert",
        ((0.05, 0.42, 0.46), (0.20, 0.64, 0.62), (0.95, 0.78, 0.46), (0.90, 0.66, 0.36),
         (0.62, 0.62, 0.26), (0.30, 0.46, 0.16), (0.64, 0.34, 0.20), (0.74, 0.44, 0.26)),
        0.25, 1.05, words=("desert", "sand", "sandy", "dune", "dunes", "arid"),
    ),
    "night": Theme(
        "night",
        ((0.03, 0.06, 0.24), (0.08, 0.16, 0.40), (0.42, 0.42, 0.52), (0.16, 0.30, 0.38),
         (0.11, 0.23, 0.31), (0.04, 0.11, 0.16), (0.33, 0.33, 0.44), (0.58, 0.60, 0.72)),
        0.30, 1.0, night_light=True, words=("night", "dark", "moon", "moonlit", "midnight"),
    ),
    "autumn": Theme(
        "autumn",
        ((0.10, 0.26, 0.44), (0.24, 0.42, 0.56), (0.78, 0.66, 0.46), (0.66, 0.56, 0.22),
         (0.70, 0.40, 0.12), (0.78, 0.26, 0.08), (0.48, 0.42, 0.38), (0.76, 0.70, 0.62)),
        0.30, 1.0, words=("autumn", "fall", "orange", "leaves", "harvest"),
    ),
    "rain": Theme(
        "rain",
        ((0.14, 0.20, 0.26), (0.26, 0.34, 0.40), (0.50, 0.50, 0.46), (0.30, 0.40, 0.32),
         (0.24, 0.33, 0.27), (0.14, 0.22, 0.18), (0.38, 0.40, 0.42), (0.60, 0.62, 0.64)),
        0.20, 0.9, rain=True, words=("rain", "rainy", "storm", "stormy", "wet", "drizzle"),
    ),
}

THEME_NAMES: tuple[str, ...] = tuple(THEMES)
DEFAULT_THEME = "meadow"

# one prompt per theme, each naming its theme's words, brightest and most varied first (a client
# shows these as examples and pre-fills the first). Mean luma of the served frames (0..255, three
# 1.5 s director segments each, random seeds, CPU): meadow 122-130 (green with grey rock), desert
# 151-169, snow 175-196, autumn ~137, rain ~72, night ~31 (dark by design: a pool of light).
PROMPT_EXAMPLES: tuple[str, ...] = (
    "a green meadow in spring",
    "sunny desert dunes",
    "a snowy winter day",
    "autumn leaves, an orange forest",
    "a rainy stormy day",
    "a moonlit night",
)

_WORD = re.compile(r"[a-z]+")


def theme_for_prompt(prompt: str) -> str:
    """The theme a prompt asks for: the first theme word in it, else the default (meadow)."""
    for word in _WORD.findall(prompt.lower()):
        for theme in THEMES.values():
            if word in theme.words:
                return theme.name
    return DEFAULT_THEME
