"""The CLI a newcomer meets."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_serve_help_names_every_option() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "sessiond.cli", "serve", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for flag in ("--host", "--port", "--model", "--device", "--redis-url", "--config"):
        assert flag in out


@pytest.mark.slow
def test_every_subcommand_answers_help() -> None:
    from sessiond.cli import SUBCOMMANDS

    assert set(SUBCOMMANDS) == {"serve", "bench", "replay", "replay-compare", "trace-gen", "trace-export"}
    for name in SUBCOMMANDS:
        done = subprocess.run(
            [sys.executable, "-m", "sessiond.cli", name, "--help"], capture_output=True, text=True, check=True
        )
        assert f"sessiond {name}" in done.stdout
