"""The web client's own msgpack codec (web/msgpack.js), in Chromium, against the protocol's
golden bytes (tests/protocols/golden.json): decode(hex) == message, encode(message) == hex."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # Chromium takes seconds to start

GOLDEN = Path(__file__).resolve().parents[1] / "protocols" / "golden.json"

CHECK = """
async (cases) => {
  const m = await import("/msgpack.js");
  const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  const unhex = (h) => new Uint8Array((h.match(/../g) || []).map((x) => parseInt(x, 16)));
  const toJson = (v) => v instanceof Uint8Array ? { $bin: hex(v) }
    : Array.isArray(v) ? v.map(toJson)
    : v && typeof v === "object" ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, toJson(x)]))
    : v;
  const fromJson = (v) => v && typeof v === "object" && !Array.isArray(v) && "$bin" in v ? unhex(v.$bin)
    : Array.isArray(v) ? v.map(fromJson)
    : v && typeof v === "object" ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, fromJson(x)]))
    : v;
  const failures = [];
  for (const c of cases) {
    const decoded = JSON.stringify(toJson(m.decode(unhex(c.hex))));
    if (decoded !== JSON.stringify(c.message)) failures.push(`${c.name}: decode gave ${decoded}`);
    const encoded = hex(m.encode(fromJson(c.message)));
    if (encoded !== c.hex) failures.push(`${c.name}: encode gave ${encoded}`);
  }
  return { checked: cases.length, failures };
}
"""


def test_js_codec_matches_every_golden_message(page: Page, daemon_url: str) -> None:
    cases = json.loads(GOLDEN.read_text())["cases"]
    page.goto(f"{daemon_url}/")
    result = page.evaluate(CHECK, cases)
    assert result == {"checked": len(cases), "failures": []}
    assert len(cases) >= 20


def test_js_codec_rejects_truncated_and_trailing_bytes(page: Page, daemon_url: str) -> None:
    page.goto(f"{daemon_url}/")
    result = page.evaluate("""async () => {
      const m = await import("/msgpack.js");
      const errors = [];
      for (const bytes of [[0x82, 0xa1, 0x74], [0x01, 0x02], [0xc1]]) {
        try { m.decode(new Uint8Array(bytes)); errors.push("accepted"); } catch (e) { errors.push(e.constructor.name); }
      }
      return errors;
    }""")
    assert result == ["RangeError", "RangeError", "TypeError"]


def test_js_codec_forces_floats_and_uses_the_smallest_ints(page: Page, daemon_url: str) -> None:
    page.goto(f"{daemon_url}/")
    result = page.evaluate("""async () => {
      const m = await import("/msgpack.js");
      const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
      return [m.encode(5), m.encode(m.f64(5)), m.encode(-33), m.encode(65536), m.encode(0.5)].map(hex);
    }""")
    assert result == ["05", "cb4014000000000000", "d0df", "ce00010000", "cb3fe0000000000000"]
