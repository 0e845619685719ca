"""The Chromium co-play benchmark's report and its argument checks (the run itself needs the browser
and a daemon: `python -m loadtest.coplay_chromium`, docs/performance.md)."""

from __future__ import annotations

import pytest

from loadtest.coplay_chromium import main, markdown


def test_the_report_has_a_row_per_player_and_names_the_worst_p50() -> None:
    report = {"players": 2, "seconds": 60.2, "worst_a2p_ms_p50": 316.2, "rows": [
        {"player": 0, "transport": "webrtc", "a2p_ms_p50": 310.04, "a2p_ms_p95": 451.2, "a2p_samples": 130,
         "decoded_fps": 16.0969, "errors": []},
        {"player": 1, "transport": "webrtc", "a2p_ms_p50": 316.2, "a2p_ms_p95": None, "a2p_samples": 1,
         "decoded_fps": 15.95, "errors": ["connection: lost"]},
    ]}
    lines = markdown(report, "python -m loadtest.coplay_chromium --players 2").splitlines()
    assert lines[0] == "# Co-play in Chromium: 2 players of one world"
    assert "| 0 (owner) | webrtc | 310.0 | 451.2 | 130 | 16.10 | 0 |" in lines
    assert "| 1 | webrtc | 316.2 | – | 1 | 15.95 | 1 |" in lines
    assert lines[-1] == "Worst player's p50: 316.2 ms (issue 31: <= 350 ms)."


@pytest.mark.parametrize("argv", [["--players", "5"], ["--players", "1"], ["--seconds", "0"]])
def test_bad_arguments_exit_2_before_anything_starts(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "--players must be 2..4" in capsys.readouterr().err
