"""Co-play's merge policy (docs/protocol.md, "Co-play"): keys and buttons OR-ed, axes summed and
clamped to [-1, 1], mouse summed; each player's seq its own; a player that leaves lets go of what
it held; each frame tells each player its own newest applied action."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from engine.api import ActionSpace, ChunkFrames, FrameAction
from protocols.messages import Action, Direct, Error, Frame, Interrupt, Ping, Pong, Presence
from sessiond.session.coplay import CoPlay, merge, seen_by
from sessiond.session.inbound import handle_player
from tests.sessiond._factory import make_session
from transports.interface import OutChunk
from transports.raw import RawPacker

_SPACE = ActionSpace(keys=("w", "a", "s", "d"), mouse=True, buttons=2, axes=2)


def _a(seq: int, keys: tuple[str, ...] = (), **fields: Any) -> Action:
    return Action(seq=seq, ts=0.0, keys=keys, **fields)


def _coplay(seats: int = 4) -> CoPlay:
    return CoPlay(_SPACE, seats, max_actions_per_s=240)


def test_merge_ors_keys_and_buttons_sums_mouse_and_clamps_summed_axes() -> None:
    merged = merge([
        FrameAction(keys=("w",), mouse=(1.0, 2.0), buttons=1, axes=(0.75,)),
        FrameAction(keys=("a", "w"), mouse=(-3.0, 0.5), buttons=2, axes=(0.5, -0.25)),
        FrameAction(keys=("d",), mouse=(0.25, 0.0), buttons=1, axes=(-0.5, -0.5)),
    ])
    assert merged == FrameAction(keys=("w", "a", "d"), mouse=(-1.75, 2.5), buttons=3, axes=(0.75, -0.75))
    assert merge([FrameAction(axes=(0.75, -1.0)), FrameAction(axes=(0.5, -0.5))]).axes == (1.0, -1.0)
    assert merge([FrameAction()]) == FrameAction()


def test_with_nobody_seated_the_owners_sample_is_the_chunks_own() -> None:
    owner = FrameAction(keys=("s",), mouse=(2.0, 0.0))
    assert _coplay().sample(owner, 7) == (owner, None)


def test_each_players_state_is_merged_with_the_owners_and_seqs_are_per_player() -> None:
    cp = _coplay(seats=4)
    cp.join(1, "g_one", "ana")
    cp.join(2, "g_two", "bo")
    assert cp.accept(1, _a(5, ("a",), mouse=(1.0, 1.0), axes=(0.5,)), now=0.0) == "ok"
    assert cp.accept(2, _a(1, ("d",), buttons=2, axes=(0.75,)), now=0.0) == "ok"  # its own seq: 1 after 5 is fine
    assert cp.accept(1, _a(3, ("w",)), now=0.0) == "stale"  # player 1's own order
    assert cp.accept(3, _a(9, ("w",)), now=0.0) == "stale"  # no seat 3 joined
    merged, seqs = cp.sample(FrameAction(keys=("w",), mouse=(0.5, 0.0), buttons=1), 12)
    assert merged == FrameAction(keys=("w", "a", "d"), mouse=(1.5, 1.0), buttons=3, axes=(1.0,))
    assert seqs == (12, 5, 1, -1)
    merged, seqs = cp.sample(FrameAction(), 12)  # mouse consumed; held state stays
    assert merged == FrameAction(keys=("a", "d"), mouse=(0.0, 0.0), buttons=2, axes=(1.0,))
    assert seqs == (12, 5, 1, -1)


def test_a_player_that_leaves_lets_go_at_the_next_chunk() -> None:
    cp = _coplay(seats=3)
    cp.join(1, "g_one")
    cp.join(1, "g_one")  # a reconnect overlapping the old connection
    cp.accept(1, _a(4, ("a",), buttons=1, mouse=(3.0, 0.0), axes=(-0.5,)), now=0.0)
    assert cp.leave(1) is False  # one connection left: still held
    assert cp.sample(FrameAction(), -1)[0].keys == ("a",)
    assert cp.leave(1) is True
    merged, seqs = cp.sample(FrameAction(keys=("w",)), 2)
    assert merged == FrameAction(keys=("w",))
    assert seqs == (2, 4, -1)  # its last applied seq is still what it last sent
    assert cp.accept(1, _a(5, ("d",)), now=0.0) == "stale"  # not connected: nothing it sends counts
    cp.join(1, "g_one")
    assert cp.accept(1, _a(3, ("d",)), now=0.0) == "stale"  # back: its seq order continues
    assert cp.accept(1, _a(6, ("d",)), now=0.0) == "ok"


def test_a_new_connection_of_a_seat_lets_go_of_what_the_older_one_held() -> None:
    cp = _coplay(seats=3)
    cp.join(1, "g_one")
    cp.accept(1, _a(40, ("a",), buttons=1, mouse=(3.0, 0.0), axes=(-0.5,)), now=0.0)
    cp.join(1, "g_one")  # the seat taken over (another tab): the older connection is ending
    merged, seqs = cp.sample(FrameAction(keys=("w",)), 2)
    assert merged == FrameAction(keys=("w",))
    assert seqs == (2, 40, -1)  # the seat's seq stands where it was: the new connection continues above it
    assert cp.leave(1) is False  # the older connection's own leave: the seat is still played
    assert cp.accept(1, _a(40, ("d",)), now=0.0) == "stale"
    assert cp.accept(1, _a(41, ("d",)), now=0.0) == "ok"
    assert cp.sample(FrameAction(), 2)[0].keys == ("d",)


def test_presence_lists_every_seat_in_player_order() -> None:
    cp = _coplay(seats=4)
    cp.join(2, "g_two", "bo")
    cp.join(1, "g_one", "ana")
    cp.leave(2)
    assert cp.presence(True, 3) == Presence(players=(
        {"player": 0, "label": "owner", "connected": True},
        {"player": 1, "label": "ana", "connected": True},
        {"player": 2, "label": "bo", "connected": False}), spectators=3)
    assert cp.free_player([1, 3]) == 2
    assert cp.free_player([1, 2, 3]) is None
    with pytest.raises(ValueError):
        cp.seat(4, "g_x")


def test_seen_by_gives_each_player_its_own_action_seq() -> None:
    s = make_session(players=3)
    s.join_player(1, "g_one")
    assert s.act_as(1, _a(8, ("a",))) is None
    s.act(_a(30, ("w",)))
    job = s.begin_job(now=0.0, deadline=1.0)
    assert (job.action, job.action_seq, job.players) == (FrameAction(keys=("w", "a")), 30, (30, 8, -1))
    s.on_frames(job, ChunkFrames(0, np.zeros((2, 4, 4, 3), np.uint8)))
    chunk = s.out.take()
    assert isinstance(chunk, OutChunk)
    assert [(f.idx, f.action_seq, f.players) for f in chunk.frames] == [(0, 30, (30, 8, -1)), (1, 30, (30, 8, -1))]
    mine = seen_by(chunk, 1)
    assert [(f.idx, f.pts, f.action_seq) for f in mine.frames] == [(0, 0, 8), (1, 5625, 8)]
    frames = RawPacker().pack(chunk)
    assert isinstance(frames[0], Frame)
    assert (frames[0].action_seq, frames[0].players) == (30, (30, 8, -1))
    assert seen_by(frames[0], 2).action_seq == -1
    assert seen_by(frames[0], 0).action_seq == 30


def test_a_co_player_joining_sees_no_action_of_its_own_in_frames_made_before_it_sat() -> None:
    """Chunks generated while nobody else was seated carry no `players`: a co-player who joins
    receives them with action_seq -1 (none of its actions applied), never the owner's seq, which
    its page would take as its own newest applied action."""
    s = make_session(players=3)
    s.act(_a(913, ("w",)))
    job = s.begin_job(now=0.0, deadline=1.0)
    assert job.players is None
    s.on_frames(job, ChunkFrames(0, np.zeros((2, 4, 4, 3), np.uint8)))
    chunk = s.out.take()
    assert isinstance(chunk, OutChunk)
    assert [f.action_seq for f in seen_by(chunk, 1).frames] == [-1, -1]
    assert [f.action_seq for f in seen_by(chunk, 0).frames] == [913, 913]
    frame = RawPacker().pack(chunk)[0]
    assert isinstance(frame, Frame)
    assert (seen_by(frame, 2).action_seq, seen_by(frame, 0).action_seq) == (-1, 913)


def test_a_session_played_alone_keeps_its_one_player_frames() -> None:
    s = make_session()
    s.actions.accept(_a(3, ("w",)), now=0.0)
    job = s.begin_job(now=0.0, deadline=1.0)
    assert (job.action, job.players) == (FrameAction(keys=("w",)), None)
    s.on_frames(job, ChunkFrames(0, np.zeros((1, 4, 4, 3), np.uint8)))
    chunk = s.out.take()
    assert isinstance(chunk, OutChunk)
    frame = RawPacker().pack(chunk)[0]
    assert (frame.action_seq, frame.players) == (3, None)


def test_a_players_messages_steer_only_its_own_seat() -> None:
    s = make_session(players=3)
    replies: list[Any] = []
    s.join_player(1, "g_one", "ana")
    handle_player(s, 1, _a(1, ("d",)), replies.append)
    handle_player(s, 1, _a(2, ("x",)), replies.append)  # not in the action space
    handle_player(s, 1, Direct(id=4, prompt="a harbour"), replies.append)
    handle_player(s, 1, Interrupt(id=5), replies.append)
    handle_player(s, 1, Ping(id=6, ts=1.5), replies.append)
    assert [type(r) for r in replies] == [Error, Error, Error, Pong]
    assert [(r.code, r.re) for r in replies[:3]] == [("invalid_field", None), ("forbidden", 4), ("forbidden", 5)]
    assert replies[3] == Pong(re=6, ts=1.5)
    job = s.begin_job(now=0.0, deadline=1.0)
    assert (job.action.keys, job.players) == (("d",), (-1, 1, -1))
    s.leave_player(1)
    job = s.begin_job(now=0.0, deadline=1.0)
    assert (job.action.keys, job.players) == ((), (-1, 1, -1))


def test_presence_reaches_every_watching_connection_on_change() -> None:
    s = make_session(players=2)
    heard: list[Presence] = []
    s.watch_presence("spectator-1", heard.append)
    s.join_player(1, "g_one", "ana")
    s.set_spectators(2)
    s.leave_player(1)
    assert [([p["connected"] for p in m.players], m.spectators) for m in heard] == [
        ([False], 0), ([False, True], 0), ([False, True], 2), ([False, False], 2)]


def test_retarget_rewraps_a_shared_frame_with_the_players_own_seq_only() -> None:
    from protocols.codec import decode, encode
    from protocols.messages import Media
    from sessiond.session.players import retarget
    from transports.fanout import Packed

    frame = Frame(pts=5625, idx=1, w=1, h=1, fmt="rgb24", data=b"\x01\x02\x03", segment=0, action_seq=30,
                  players=(30, 8, -1))
    shared = Packed(encode(frame), 1, 1, True)
    mine, seq = retarget(shared, 1)
    assert seq == 8
    assert decode(mine.data, expect="server") == Frame(pts=5625, idx=1, w=1, h=1, fmt="rgb24", data=b"\x01\x02\x03",
                                                       segment=0, action_seq=8, players=(30, 8, -1))
    assert (mine.idx, mine.frames, mine.key) == (1, 1, True)
    assert retarget(shared, 0) == (shared, 30)  # the owner's own seq: the shared bytes as they are
    media = Media(pts=0, dur=5625, idx=0, n=1, segment=0, action_seq=30, data=b"moof", players=(30, 8, 4))
    out, seq = retarget(Packed(encode(media), 0, 1, True), 2)
    back = decode(out.data, expect="server")
    assert isinstance(back, Media)
    assert (seq, back.action_seq) == (4, 4)
    alone = Packed(encode(dataclasses.replace(frame, players=None)), 1, 1, True)
    assert retarget(alone, 0) == (alone, None)  # made before anyone else sat: the owner's, as it is
    mine, seq = retarget(alone, 1)  # ...and a co-player who joins gets it with none of its own applied
    assert seq == -1
    assert decode(mine.data, expect="server") == dataclasses.replace(frame, players=None, action_seq=-1)
    message = Packed(encode(Ping(id=1, ts=0.0)), -1, 0, True)
    assert retarget(message, 1) == (message, None)


def test_an_invite_takes_the_lowest_seat_no_live_invite_holds() -> None:
    from protocols.errors import ProtocolError
    from sessiond.grants import Role, issue, revoke
    from sessiond.runtime.directory import _free_seat

    s = make_session(players=4)
    record = s.record
    issue(record.grants, Role.VIEWER, 0.0, None)  # a share link holds no seat
    first, _ = issue(record.grants, Role.PLAYER, 0.0, None, player=_free_seat(record, 0.0))
    issue(record.grants, Role.PLAYER, 0.0, 5.0, player=_free_seat(record, 0.0))
    issue(record.grants, Role.PLAYER, 0.0, None, player=_free_seat(record, 0.0))
    assert [g.player for g in record.grants] == [None, 1, 2, 3]
    with pytest.raises(ProtocolError) as full:
        _free_seat(record, 1.0)
    assert full.value.code.value == "conflict"
    assert "all 3 player seats" in full.value.message
    assert _free_seat(record, 5.0) == 2  # seat 2's invite expired
    revoke(record.grants, first.grant_id, 6.0)
    assert _free_seat(record, 6.0) == 1
    with pytest.raises(ProtocolError) as alone:
        _free_seat(make_session().record, 0.0)
    assert alone.value.code.value == "conflict"
