"""The web client's pts rule (web/timeline.js), in Chromium, against the golden table the
server's rule is tested with (tests/protocols/pts_golden.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # Chromium takes seconds to start

GOLDEN = Path(__file__).resolve().parents[1] / "protocols" / "pts_golden.json"

CHECK = """
async (cases) => {
  const { ptsFor } = await import("/timeline.js");
  return cases.filter((c) => ptsFor(c.n, c.fps) !== c.pts).map((c) => `${c.n}@${c.fps}: ${ptsFor(c.n, c.fps)}`);
}
"""

REJECTS = """
async () => {
  const { ptsFor } = await import("/timeline.js");
  const thrown = (n, fps) => { try { ptsFor(n, fps); return null; } catch (e) { return e.name; } };
  return [thrown(-1, 30), thrown(0, 0), thrown(1.5, 30), thrown(1, 29.97), thrown(2 ** 52, 30)];
}
"""


def test_js_pts_match_every_golden_case(page: Page, daemon_url: str) -> None:
    cases = json.loads(GOLDEN.read_text())["cases"]
    page.goto(f"{daemon_url}/")
    assert page.evaluate(CHECK, cases) == []
    assert len(cases) >= 50


def test_js_pts_reject_what_has_no_exact_pts(page: Page, daemon_url: str) -> None:
    page.goto(f"{daemon_url}/")
    assert page.evaluate(REJECTS) == ["RangeError"] * 5
