"""Tokens, the playback clock, lifecycle log lines, the engine thread, action-space checks."""

from __future__ import annotations

import asyncio
import json
import logging
import threading

import pytest

from protocols.messages import Action
from sessiond.auth import hash_token, new_session_id, new_token, token_matches
from sessiond.engine_worker import EngineWorker, WorkerStopped
from sessiond.logs import JsonFormatter, RedactTokens
from sessiond.session.clock import PlaybackClock
from sessiond.session.handlers import check_action


def test_tokens_are_256_bit_random_and_only_their_hash_matches() -> None:
    token = new_token()
    assert len(token) == 43 and token != new_token()
    digest = hash_token(token)
    assert len(digest) == 64 and token not in digest
    assert token_matches(token, digest)
    assert not token_matches(token + "x", digest)
    assert not token_matches(None, digest) and not token_matches("", digest)
    assert new_session_id().startswith("s_")


def test_the_clock_says_how_far_ahead_of_playback_the_stream_is() -> None:
    clock = PlaybackClock(fps=16, now=10.0, total=0)
    assert clock.buffered(10.5, 16) == 8.0  # half a second played of one second generated
    assert clock.dry_at(16) == 11.0


def test_a_chunk_arriving_late_reanchors_the_clock_and_counts_a_miss() -> None:
    clock = PlaybackClock(fps=16, now=10.0, total=0)
    assert clock.arrive(now=10.2, before=8) is False  # frame 8 plays at 10.5
    assert clock.arrive(now=11.25, before=16) is True  # frame 16 was due at 11.0
    assert (clock.anchor_t, clock.anchor_i) == (11.25, 16)  # playback restarts from it, never skips ahead


def test_lifecycle_lines_are_json_and_never_carry_a_token() -> None:
    formatter = JsonFormatter()
    record = logging.LogRecord("sessiond.lifecycle", logging.INFO, __file__, 1, "attached %s", ("s_1",), None)
    record.session_id = "s_1"
    line = json.loads(formatter.format(record))
    assert (line["msg"], line["session_id"], line["level"]) == ("attached s_1", "s_1", "info")
    leaky = logging.LogRecord("uvicorn", logging.INFO, __file__, 1, "GET /v1/sessions/s_1/ws?media=raw&token=%s",
                              ("SECRET123",), None)
    RedactTokens().filter(leaky)
    assert leaky.getMessage() == "GET /v1/sessions/s_1/ws?media=raw&token=<redacted>"
    bearer = logging.LogRecord("x", logging.INFO, __file__, 1, "Authorization: Bearer SECRET123", None, None)
    RedactTokens().filter(bearer)
    assert "SECRET123" not in bearer.getMessage()


async def test_the_engine_thread_runs_calls_in_order_off_the_loop() -> None:
    seen: list[tuple[int, str]] = []
    worker = EngineWorker(max_queue=2)
    worker.start()
    loop_thread = threading.current_thread().name
    results = await asyncio.gather(*(worker.call(lambda i=i: seen.append((i, threading.current_thread().name))
                                                 or i) for i in range(5)))
    assert results == [0, 1, 2, 3, 4]
    assert all(name != loop_thread for _, name in seen)
    with pytest.raises(ZeroDivisionError):
        await worker.call(lambda: 1 / 0)
    await worker.stop()
    with pytest.raises(WorkerStopped):
        await worker.call(lambda: 1)
    assert [i for i, _ in seen] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(("action", "field"), [
    (Action(seq=0, ts=0.0, keys=("w", "q")), "keys"),
    (Action(seq=0, ts=0.0, keys=(), buttons=4), "buttons"),
    (Action(seq=0, ts=0.0, keys=(), axes=(0.0, 0.0, 0.0)), "axes"),
    (Action(seq=0, ts=0.0, keys=(), axes=(1.5,)), "axes"),
])
def test_an_action_outside_the_models_action_space_names_its_field(action: Action, field: str) -> None:
    space = {"keys": ["w", "a"], "mouse": True, "buttons": 2, "axes": 2}
    problem = check_action(space, action)
    assert problem is not None and problem[0] == field


def test_an_action_inside_the_action_space_passes() -> None:
    space = {"keys": ["w", "a"], "mouse": True, "buttons": 2, "axes": 2}
    assert check_action(space, Action(seq=0, ts=0.0, keys=("w",), mouse=(1.0, 2.0), buttons=3, axes=(1.0, -1.0))) is None
