"""A world session's lead (sessiond.session.lead): a chunk begins as late as the session's own
chunks measured it may (headroom x the largest need of the window + a pad), never earlier than
the configured lead allows, never later than a quarter of a chunk before it is due; a miss buys
half a chunk of extra lead, which halves back after a calm stretch."""

from __future__ import annotations

import time

import numpy as np
import pytest

from engine.api import ChunkFrames
from protocols.messages import Pause, Resume, Stats
from sessiond.session.connection import Connection
from sessiond.session.lead import WorldLead
from tests.sessiond._factory import make_env, make_session


def _fed(lead: WorldLead, needs: list[float], missed: bool = False) -> WorldLead:
    for need in needs:
        lead.observe(need, missed)
    return lead


def test_the_configured_lead_until_enough_chunks_were_measured() -> None:
    lead = _fed(WorldLead(ceiling_s=0.25, chunk_s=0.25), [0.1] * 7)
    assert lead.lead_s() == 0.25
    lead.observe(0.1, False)  # the eighth
    assert lead.lead_s() == pytest.approx(1.1 * 0.1 + 0.03)


def test_the_lead_is_the_largest_need_of_the_window_with_headroom_and_pad() -> None:
    lead = _fed(WorldLead(ceiling_s=0.5, chunk_s=0.25), [0.12, 0.15, 0.13, 0.14, 0.12, 0.11, 0.12, 0.13])
    assert lead.lead_s() == pytest.approx(1.1 * 0.15 + 0.03)  # 195 ms: a chunk of 250 ms begun 55 ms later
    assert lead.snapshot() == {"lead_ms": 195.0, "need_max_ms": 150.0, "misses": 0}


def test_the_lead_never_exceeds_the_configured_one_nor_admissions_cut() -> None:
    lead = _fed(WorldLead(ceiling_s=0.25, chunk_s=0.25), [0.4] * 8)
    assert lead.lead_s() == 0.25
    fast = _fed(WorldLead(ceiling_s=0.5, chunk_s=0.25), [0.2] * 8)
    assert fast.lead_s(cap_s=0.25) == 0.25
    assert fast.lead_s() == pytest.approx(0.25)  # 1.1 x 0.2 + 0.03


def test_the_lead_keeps_a_quarter_chunk_however_fast_the_chunks() -> None:
    lead = _fed(WorldLead(ceiling_s=0.5, chunk_s=0.25), [0.0] * 8)
    assert lead.lead_s() == 0.0625


def test_beside_other_sessions_the_lead_is_the_configured_one() -> None:
    lead = _fed(WorldLead(ceiling_s=0.5, chunk_s=0.25), [0.1] * 8)
    assert lead.lead_s(shared=True) == 0.5
    assert lead.lead_s(cap_s=0.25, shared=True) == 0.25
    assert lead.lead_s() == pytest.approx(0.14)  # alone again: the measured lead, the needs kept


def test_a_fixed_lead_ignores_the_measurements() -> None:
    lead = _fed(WorldLead(ceiling_s=0.5, chunk_s=0.25, adaptive=False), [0.05] * 20)
    assert lead.lead_s() == 0.5


def test_an_old_slow_chunk_leaves_the_window() -> None:
    lead = _fed(WorldLead(ceiling_s=0.5, chunk_s=0.25, window=16), [0.3] + [0.1] * 15)
    assert lead.lead_s() == pytest.approx(1.1 * 0.3 + 0.03)
    lead.observe(0.1, False)  # the 0.3 s need is now 17 chunks old
    assert lead.lead_s() == pytest.approx(1.1 * 0.1 + 0.03)


def test_a_miss_adds_half_a_chunk_that_halves_after_a_calm_stretch() -> None:
    lead = _fed(WorldLead(ceiling_s=1.0, chunk_s=0.25, calm_chunks=4), [0.1] * 8)
    lead.observe(0.1, True)
    assert lead.misses == 1
    assert lead.lead_s() == pytest.approx(0.14 + 0.125)
    _fed(lead, [0.1] * 3)
    assert lead.lead_s() == pytest.approx(0.14 + 0.125)  # 3 calm chunks: not yet
    lead.observe(0.1, False)
    assert lead.lead_s() == pytest.approx(0.14 + 0.0625)
    _fed(lead, [0.1] * 4)
    assert lead.lead_s() == pytest.approx(0.14 + 0.03125)
    lead.observe(0.1, True)  # a new miss starts the calm count again and adds another half chunk
    assert lead.lead_s() == pytest.approx(0.14 + 0.03125 + 0.125)


def test_a_chunk_and_lead_must_be_positive() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        WorldLead(ceiling_s=0.0, chunk_s=0.25)


def _play(session, monkeypatch, chunks: int, gen_s: float, first_t: float = 100.0) -> list[float]:
    """Run `chunks` world chunks as the scheduler would (each begun at its start-by, its frames
    `gen_s` later); returns each chunk's lead (deadline - start-by)."""
    t = first_t
    monkeypatch.setattr(time, "monotonic", lambda: t)
    leads = []
    for i in range(chunks):
        want = session.demand(t)
        assert want is not None
        deadline, start_by = want
        leads.append(round(deadline - start_by, 6))
        t = max(t, start_by)
        job = session.begin_job(t, deadline, start_by)
        t += gen_s
        session.on_frames(job, ChunkFrames(i, np.zeros((8, 4, 4, 3), np.uint8)))
        session.on_job_done(job)
        while session.out.take() is not None:
            pass
    return leads


def test_a_session_begins_its_chunks_as_late_as_they_measured(monkeypatch) -> None:
    # 8-frame chunks at 16 frames/s (0.5 s), a configured lead of 2 chunks (1 s); chunks take 0.2 s
    session = make_session(env=make_env(lead_chunks=2.0))
    session.attach(Connection("raw"))
    leads = _play(session, monkeypatch, chunks=14, gen_s=0.2)
    # the first chunk is the session's start (not measured) and 8 more are measured at the full lead
    assert leads[:9] == [1.0] * 9
    assert leads[9:] == [pytest.approx(1.1 * 0.2 + 0.03)] * 5  # 250 ms: the 1 s lead is gone
    assert session.lead.misses == 0
    stats = session.stats(1e9)
    assert isinstance(stats, Stats) and stats.lead_ms == 250.0


def test_a_session_with_a_fixed_lead_keeps_it(monkeypatch) -> None:
    session = make_session(env=make_env(lead_chunks=2.0, adaptive_lead=False))
    session.attach(Connection("raw"))
    assert _play(session, monkeypatch, chunks=12, gen_s=0.2) == [1.0] * 12


def test_a_session_beside_another_begins_its_chunks_at_the_configured_lead(monkeypatch) -> None:
    open_now = [1]
    session = make_session(env=make_env(lead_chunks=2.0, open_sessions=lambda: open_now[0]))
    session.attach(Connection("raw"))
    assert _play(session, monkeypatch, chunks=11, gen_s=0.2)[-1] == pytest.approx(0.25)
    open_now[0] = 2  # a director opens beside it: its next chunk begins a whole configured lead ahead
    assert _play(session, monkeypatch, chunks=2, gen_s=0.2, first_t=200.0) == [1.0, 1.0]
    open_now[0] = 1
    assert _play(session, monkeypatch, chunks=1, gen_s=0.2, first_t=300.0) == [pytest.approx(0.25)]


def test_the_chunk_after_a_pause_is_not_taken_for_a_slow_one(monkeypatch) -> None:
    session = make_session(env=make_env(lead_chunks=2.0))
    session.attach(Connection("raw"))
    _play(session, monkeypatch, chunks=10, gen_s=0.2)
    # the viewer's buffer ran dry during a pause of 30 s: the clock re-anchors, and that chunk,
    # due at once, arrives a whole lead after its start-by: no measure of the engine
    monkeypatch.setattr(time, "monotonic", lambda: 200.0)
    session.pause(Pause(id=1))
    monkeypatch.setattr(time, "monotonic", lambda: 230.0)
    session.resume(Resume(id=2))
    leads = _play(session, monkeypatch, chunks=3, gen_s=0.2, first_t=230.0)
    assert leads == [pytest.approx(0.25)] * 3
    assert session.lead.snapshot()["need_max_ms"] == 200.0
