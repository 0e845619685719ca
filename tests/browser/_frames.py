"""What the video element shows, as pixels: the middle of the picture (inside any letterbox)."""

from __future__ import annotations

import io

from PIL import Image, ImageStat
from playwright.sync_api import Page


def video_picture(page: Page) -> Image.Image:
    shot = Image.open(io.BytesIO(page.locator("#video").screenshot())).convert("RGB")
    width, height = shot.size
    return shot.crop((width // 4, height // 4, 3 * width // 4, 3 * height // 4))


def mean_luma(picture: Image.Image) -> float:
    """Mean of ITU-R 601 luma, 0..255."""
    return float(ImageStat.Stat(picture.convert("L")).mean[0])
