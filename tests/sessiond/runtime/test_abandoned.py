"""Which sessions count as abandoned: idle `reclaim_after_s` or longer with nobody attached, longest
idle first; never one its owner steers, one that is generating, or the newcomer itself."""

from __future__ import annotations

from sessiond.runtime.abandoned import RECLAIMING_REASONS, abandoned
from sessiond.session import connect
from sessiond.session.lifecycle import SessionState
from tests.sessiond._factory import make_env, make_session


def test_idle_unattached_sessions_longest_idle_first_and_nothing_else() -> None:
    env = make_env()
    old, recent, young, attached, active = (make_session(f"s_{n}", env=env) for n in range(5))
    for session in (old, recent, young, attached):
        session.set_state(SessionState.IDLE)
    connect(attached, "raw")
    active.set_state(SessionState.ACTIVE)
    now = 1000.0
    old.idle_since, recent.idle_since, young.idle_since = now - 300, now - 61, now - 59
    attached.idle_since = active.idle_since = now - 900
    sessions = {s.id: s for s in (young, recent, attached, active, old)}
    assert [s.id for s in abandoned(sessions, now, 60.0)] == ["s_0", "s_1"]
    assert [s.id for s in abandoned(sessions, now, 60.0, exclude="s_0")] == ["s_1"]
    old.set_state(SessionState.OFFLOADED)  # offloaded counts too, idle since it went idle (not since the offload)
    assert old.idle_since == now - 300
    assert [s.id for s in abandoned(sessions, now, 60.0)] == ["s_0", "s_1"]


def test_only_refusals_a_close_can_lift_reclaim() -> None:
    assert {"full", "load", "burst", "kv", "max_sessions"} == RECLAIMING_REASONS
