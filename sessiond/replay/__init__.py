"""`sessiond replay`: drive a trace against a daemon and report what each user saw."""

from sessiond.replay.meter import SessionMeter, SessionResult
from sessiond.replay.report import build_report, format_table
from sessiond.replay.runner import ReplayOutcome, run_replay

__all__ = ["ReplayOutcome", "SessionMeter", "SessionResult", "build_report", "format_table", "run_replay"]
