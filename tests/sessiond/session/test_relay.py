"""Who keeps a world generating (docs/protocol.md, "Co-play"): the owner or any connected co-player,
never spectators alone; with the owner away the relay takes the output in its place, so the
co-players get every frame, in order, with idx and pts as the owner would have."""

from __future__ import annotations

import asyncio
import time

import numpy as np

from engine.api import ChunkFrames
from protocols.messages import Action, Pause
from sessiond.session.connection import Connection
from sessiond.session.lifecycle import SessionState
from tests.sessiond._factory import make_session
from transports.interface import OutFrame


async def _settled() -> None:
    for _ in range(5):  # the relay task runs its steps
        await asyncio.sleep(0)


async def test_a_co_player_alone_steers_and_the_relay_reports_every_frame_sent() -> None:
    s = make_session(players=3)
    sent: list[OutFrame] = []
    s.audience.frame = sent.append  # type: ignore[method-assign,assignment]  # what the audience is fed
    assert (s.steering, s.relaying, s.demand(time.monotonic())) == (False, False, None)
    s.join_player(1, "g_one")
    assert (s.steering, s.relaying, s.state) == (True, True, SessionState.ACTIVE)
    assert s.demand(time.monotonic()) is not None
    assert s.act_as(1, Action(seq=4, ts=0.0, keys=("a",))) is None
    job = s.begin_job(time.monotonic(), time.monotonic() + 1.0)
    assert (job.action.keys, job.players) == (("a",), (-1, 4, -1))
    s.on_frames(job, ChunkFrames(0, np.zeros((3, 4, 4, 3), np.uint8)))
    s.on_job_done(job)
    await _settled()
    assert [(f.idx, f.pts, f.players) for f in sent] == [(0, 0, (-1, 4, -1)), (1, 5625, (-1, 4, -1)),
                                                          (2, 11250, (-1, 4, -1))]
    assert s.out.sent == 3

    # the owner comes back: it takes the output over, the relay ends; it leaves again: the relay is back
    owner = Connection("raw")
    s.attach(owner)
    await _settled()
    assert (s.relaying, s._relay is not None and s._relay.done()) == (False, True)
    s.act(Action(seq=9, ts=0.0, keys=("w",)))
    s.detach(owner)
    await _settled()
    assert (s.relaying, s.state, s.actions.sample().keys) == (True, SessionState.ACTIVE, ())  # the owner's "w" let go
    job = s.begin_job(time.monotonic(), time.monotonic() + 1.0)
    assert (job.action.keys, job.players) == (("a",), (9, 4, -1))

    # the last co-player leaves: nobody steers, the session idles and generates nothing
    s.leave_player(1)
    await _settled()
    assert (s.steering, s.relaying, s.state, s.demand(time.monotonic())) == (False, False, SessionState.IDLE, None)
    assert s._relay is not None and s._relay.done()


async def test_spectators_alone_never_steer_and_a_paused_world_stays_paused_for_its_players() -> None:
    s = make_session(players=2)
    s.set_spectators(3)
    assert (s.steering, s.demand(time.monotonic())) == (False, None)
    s.settle()
    assert s.state == SessionState.IDLE
    owner = Connection("raw")
    s.attach(owner)
    s.pause(Pause(id=1))
    s.detach(owner)
    s.join_player(1, "g_one")  # only the owner resumes
    await _settled()
    assert (s.steering, s.paused, s.state, s.demand(time.monotonic())) == (True, True, SessionState.IDLE, None)
    s.leave_player(1)
    await _settled()
