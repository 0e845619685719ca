"""The in-browser benchmark (`python -m loadtest.browser_play`) plays the World page and prints what a
player gets; when the daemon refuses the world session it says so and exits 3, with no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadtest.browser_play import main

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_it_plays_the_world_page_and_writes_the_numbers(tmp_path: Path) -> None:
    out, shots = tmp_path / "play.json", tmp_path / "shots"
    assert main(["--seconds", "3", "--model", "tiny", "--json", str(out), "--screenshots", str(shots),
                 "--screenshot-every", "1", "--", "--policy", "kv"]) == 0
    report = json.loads(out.read_text())
    assert report["model"] == "tiny" and report["serve_args"] == ["--policy", "kv"]
    assert report["decoded_frames"] > 0 and report["errors"] == [] and report["resyncs"] >= 0
    assert report["seconds"] >= 3.0
    assert report["window_s"] == pytest.approx(report["seconds"] / 2, abs=0.1)  # a run under 2 min: its halves
    assert report["jitter_buffer_ms_max"] >= report["jitter_buffer_ms_p50"] >= 0
    assert report["jitter_buffer_ms_max"] in (report["jitter_buffer_ms_max_first"], report["jitter_buffer_ms_max_last"])
    assert report["screenshots"][:3] == ["play_000s.png", "play_001s.png", "play_002s.png"]
    assert sorted(p.name for p in shots.iterdir()) == report["screenshots"]
    assert all((shots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for name in report["screenshots"])


def test_screenshot_intervals_must_be_positive() -> None:
    assert main(["--seconds", "3", "--screenshot-every", "0"]) == 2


def test_a_refused_world_session_is_reported_in_words_and_exit_code_3(capsys: pytest.CaptureFixture[str]) -> None:
    # an action-to-photon objective of 10 ms is shorter than one chunk's media time, so no machine,
    # however fast, serves a world session within it (a margin-based refusal depends on the box's speed:
    # a fast CI machine once fitted a tiny world session into 1% of its engine time)
    assert main(["--seconds", "3", "--model", "tiny", "--", "--objective-world-a2p-p95-ms", "10"]) == 3
    err = capsys.readouterr().err
    assert "error: the World page did not play: capacity: this server cannot serve one world session" in err
    assert "-- --policy kv" in err
