"""With Redis, a restarted daemon finds its sessions: pts continues, director continuity holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis.asyncio

from protocols.client import SessionClient
from protocols.messages import Frame, SegmentEnd
from tests.conftest import RedisServer, daemon_process, find_free_port, off_loop
from tests.e2e._util import assert_timeline, collect


def _ends(msgs: list[object]) -> list[SegmentEnd]:
    return [m for m in msgs if isinstance(m, SegmentEnd)]


@pytest.mark.slow
async def test_a_restarted_daemon_resumes_sessions_from_redis(redis_server: RedisServer, tmp_path: Path) -> None:
    port = find_free_port()
    log = tmp_path / "daemon.log"
    serve = ("--redis-url", redis_server.url, "--log-json")
    async with SessionClient(timeout_s=30.0) as client:
        async with off_loop(daemon_process(*serve, port=port, log=log)) as (url, _):
            await client.create(url, "director", prompt="a lighthouse", seed=11)
            await client.connect()
            await client.direct("waves hit the lighthouse", seconds=1)
            first = await collect(client, lambda m: len(_ends(m)) == 1, 60)
            await client.disconnect()
        sid = client.session.session_id
        store = redis.asyncio.Redis.from_url(redis_server.url)
        assert await store.sismember("sessiond:sessions", sid)
        assert len(await store.get(f"sessiond:snapshot:{sid}") or b"") > 0  # continuation latents kept
        assert b"token" not in (await store.get(f"sessiond:session:{sid}") or b"").replace(b"token_hash", b"")
        await store.aclose()

        async with off_loop(daemon_process(*serve, port=port, log=log)) as (url, _):
            status = await client.status()  # found in the store by the new process
            assert (status.frames_sent, status.segment) == (16, 1)
            await client.connect()
            await client.direct("the storm calms", seconds=1)
            second = await collect(client, lambda m: len(_ends(m)) == 1, 60)
            await client.close_session()
    frames = [m for m in first + second if isinstance(m, Frame)]
    assert_timeline(frames, 16)  # pts continue across the restart
    resumed = [f for f in frames if f.segment == 2]
    assert resumed[0].idx == 16 and resumed[0].disc
    assert len(resumed) == 16  # 1 s at 16 fps
    # structured logs: one JSON object per line, a line per lifecycle event, never the token
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    events = [(x.get("event"), x.get("session_id")) for x in lines if x.get("logger") == "sessiond.session.lifecycle"]
    for event in ("created", "attached", "detached", "resumed", "closed"):
        assert (event, sid) in events
    # continuity: the new process reopened the session from its continuation snapshot
    assert [x.get("snapshot") for x in lines if x.get("event") == "resumed"] == [True]
    assert client.session.token not in log.read_text()
