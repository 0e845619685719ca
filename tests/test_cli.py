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

    assert set(SUBCOMMANDS) == {"serve", "bench", "api-key", "gateway", "fleet-up", "drain", "replay",
                                "replay-compare", "trace-gen", "trace-export"}
    for name in SUBCOMMANDS:
        done = subprocess.run(
            [sys.executable, "-m", "sessiond.cli", name, "--help"], capture_output=True, text=True, check=True
        )
        assert f"sessiond {name}" in done.stdout


@pytest.mark.slow
def test_the_single_daemon_never_loads_the_fleet_runtime() -> None:
    """`sessiond serve` without --fleet: the command line and the app load neither the Dynamo
    runtime nor the daemon's fleet adapter (the `fleet` extra is optional)."""
    code = ("import sys; from sessiond.cli import build_parser; build_parser().parse_args(['serve']); "
            "from sessiond.api.app import create_app; from sessiond.config import ServeConfig; create_app(ServeConfig()); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'dynamo' "
            "or m in ('sessiond.fleet_adapter.daemon', 'sessiond.fleet_adapter.serve', 'fleet.worker')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "[]"
