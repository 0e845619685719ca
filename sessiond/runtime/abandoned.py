"""Sessions nobody is connected to, reclaimed when a newcomer would be refused for capacity.

A session keeps admission's share until it closes. A page that closes properly deletes its session
(`pagehide`), but a browser that crashes, sleeps or loses its network says nothing: its session idles
and lingers until `idle_close_s` (10 minutes by default) so that its owner can come back. On a machine
with room for one World session (the 2-core CPU box) the next visitor was refused all that while
("retry once one closes"). So when admission would refuse a create for capacity, sessions with no
owner, no connected co-player and no spectator that have been idle at least `reclaim_after_s` are
closed, the longest idle first (reason `abandoned`, logged and counted), and the create is decided
again after each. Nobody connected loses anything they see; a session under `reclaim_after_s` of
idleness, or with anyone attached, is never reclaimed.
"""

from __future__ import annotations

from collections.abc import Mapping

from sessiond.session.lifecycle import SessionState
from sessiond.session.session import Session

__all__ = ["RECLAIMING_REASONS", "abandoned"]

# refusals that closing an abandoned session can lift ("never" is given only with nothing open;
# "queued" waits on a list of its own; "uncalibrated" is the start-up profile still running)
RECLAIMING_REASONS = frozenset({"full", "load", "burst", "kv", "max_sessions"})


def abandoned(sessions: Mapping[str, Session], now: float, reclaim_after_s: float,
              exclude: str | None = None) -> list[Session]:
    """Sessions idle for at least `reclaim_after_s` (time.monotonic) with nobody attached, longest idle first."""
    out = [s for sid, s in sessions.items()
           if sid != exclude and s.state in (SessionState.IDLE, SessionState.OFFLOADED) and s.job is None
           and not s.steering and len(s.audience) == 0 and now - s.idle_since >= reclaim_after_s]
    return sorted(out, key=lambda s: s.idle_since)
