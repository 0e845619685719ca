"""With Redis, a restarted daemon finds its sessions: pts continues, director continuity holds."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import redis

from protocols.client import SessionClient
from protocols.messages import Frame, SegmentEnd
from tests.conftest import RedisServer, daemon_process, find_free_port
from tests.e2e._util import assert_timeline, collect


def _ends(msgs: list[object]) -> list[SegmentEnd]:
    return [m for m in msgs if isinstance(m, SegmentEnd)]


def test_a_restarted_daemon_resumes_sessions_from_redis(redis_server: RedisServer, tmp_path: Path) -> None:
    port = find_free_port()
    log = tmp_path / "daemon.log"
    client = SessionClient(timeout_s=30.0)
    loop = asyncio.new_event_loop()
    try:
        with daemon_process("--redis-url", redis_server.url, "--log-json", port=port, log=log) as (url, _):
            async def first_life() -> list[object]:
                await client.create(url, "director", prompt="a lighthouse", seed=11)
                await client.connect()
                await client.direct("waves hit the lighthouse", seconds=1)
                msgs = await collect(client, lambda m: len(_ends(m)) == 1, 60)
                await client.disconnect()
                return msgs

            first = loop.run_until_complete(first_life())
        sid = client.session.session_id
        store = redis.Redis.from_url(redis_server.url)
        assert store.sismember("sessiond:sessions", sid)
        assert len(store.get(f"sessiond:snapshot:{sid}") or b"") > 0  # continuation latents kept
        assert b"token" not in (store.get(f"sessiond:session:{sid}") or b"").replace(b"token_hash", b"")
        store.close()

        with daemon_process("--redis-url", redis_server.url, "--log-json", port=port, log=log) as (url, _):
            async def second_life() -> list[object]:
                status = await client.status()  # found in the store by the new process
                assert (status.frames_sent, status.segment) == (16, 1)
                await client.connect()
                await client.direct("the storm calms", seconds=1)
                msgs = await collect(client, lambda m: len(_ends(m)) == 1, 60)
                await client.close_session()
                return msgs

            second = loop.run_until_complete(second_life())
        frames = [m for m in first + second if isinstance(m, Frame)]
        assert_timeline(frames, 16)  # pts continue across the restart
        resumed = [f for f in frames if f.segment == 2]
        assert resumed[0].idx == 16 and resumed[0].disc
        assert len(resumed) == 16  # 1 s at 16 fps
        # structured logs: one JSON object per line, a line per lifecycle event, never the token
        lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
        events = [(x.get("event"), x.get("session_id")) for x in lines if x.get("logger") == "sessiond.lifecycle"]
        for event in ("created", "attached", "detached", "resumed", "closed"):
            assert (event, sid) in events
        # continuity: the new process reopened the session from its continuation snapshot
        assert [x.get("snapshot") for x in lines if x.get("event") == "resumed"] == [True]
        assert client.session.token not in log.read_text()
    finally:
        loop.run_until_complete(client.aclose())
        loop.close()
