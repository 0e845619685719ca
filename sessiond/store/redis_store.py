"""The Redis store (redis.asyncio). Layout under a key prefix:
  {p}:sessions            set of session ids (the directory)
  {p}:session:{sid}       JSON of the SessionRecord
  {p}:snapshot:{sid}      continuation snapshot bytes (safetensors)
  {p}:position:{sid}      the timeline position (frames that may have left), one integer; written
                          only while {p}:session:{sid} exists (one script), so a write the client
                          gave up on that lands after the session's delete cannot bring it back
  {p}:events              stream of events, field `e` = JSON of the event
Connection failures raise StoreUnavailable; the daemon keeps running without the store."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import redis.asyncio as redis_asyncio
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sessiond.errors import StoreUnavailable
from sessiond.store.base import SessionRecord, StoredEvent

__all__ = ["RedisStore"]

_PAGE = 500

# KEYS[1] the position, KEYS[2] the session's record: set the position only while the record exists
_PUT_POSITION = """
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('SET', KEYS[1], ARGV[1])
  return 1
end
return 0
"""


class RedisStore:
    kind = "redis"

    def __init__(self, url: str, *, prefix: str = "sessiond", timeout_s: float = 1.0,
                 max_events: int = 1_000_000) -> None:
        self.url = url
        self._p = prefix
        self._max_events = max_events
        self._r: Any = redis_asyncio.Redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, retry_on_timeout=False,
        )
        self._put_position = self._r.register_script(_PUT_POSITION)

    async def _call(self, coro: Any) -> Any:
        try:
            return await coro
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            raise StoreUnavailable(f"redis at {self.url} unreachable: {exc}") from exc
        except RedisError as exc:
            raise StoreUnavailable(f"redis at {self.url} failed: {exc}") from exc

    async def ping(self) -> bool:
        try:
            return bool(await self._call(self._r.ping()))
        except StoreUnavailable:
            return False

    async def put_session(self, record: SessionRecord) -> None:
        pipe = self._r.pipeline(transaction=True)
        pipe.set(f"{self._p}:session:{record.session_id}", json.dumps(record.to_json()))
        pipe.sadd(f"{self._p}:sessions", record.session_id)
        await self._call(pipe.execute())

    async def get_session(self, session_id: str) -> SessionRecord | None:
        raw = await self._call(self._r.get(f"{self._p}:session:{session_id}"))
        return None if raw is None else SessionRecord.from_json(json.loads(raw))

    async def delete_session(self, session_id: str) -> None:
        pipe = self._r.pipeline(transaction=True)
        pipe.delete(f"{self._p}:session:{session_id}", f"{self._p}:snapshot:{session_id}",
                    f"{self._p}:position:{session_id}")
        pipe.srem(f"{self._p}:sessions", session_id)
        await self._call(pipe.execute())

    async def list_sessions(self) -> list[str]:
        members = await self._call(self._r.smembers(f"{self._p}:sessions"))
        return sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)

    async def put_position(self, session_id: str, frames: int) -> None:
        await self._call(self._put_position(keys=[f"{self._p}:position:{session_id}", f"{self._p}:session:{session_id}"],
                                            args=[int(frames)]))

    async def get_position(self, session_id: str) -> int | None:
        raw = await self._call(self._r.get(f"{self._p}:position:{session_id}"))
        return None if raw is None else int(raw)

    async def put_snapshot(self, session_id: str, data: bytes) -> None:
        await self._call(self._r.set(f"{self._p}:snapshot:{session_id}", bytes(data)))

    async def get_snapshot(self, session_id: str) -> bytes | None:
        raw = await self._call(self._r.get(f"{self._p}:snapshot:{session_id}"))
        return None if raw is None else bytes(raw)

    async def append_events(self, events: list[StoredEvent]) -> None:
        if not events:
            return
        pipe = self._r.pipeline(transaction=False)
        for event in events:
            pipe.xadd(f"{self._p}:events", {"e": json.dumps(event.to_json())},
                      maxlen=self._max_events, approximate=True)
        await self._call(pipe.execute())

    async def iter_events(self, session_id: str | None = None) -> AsyncIterator[StoredEvent]:
        start = "-"
        while True:
            page = await self._call(self._r.xrange(f"{self._p}:events", min=start, count=_PAGE))
            if not page:
                return
            for _entry_id, fields in page:
                event = StoredEvent.from_json(json.loads(fields[b"e"]))
                if session_id is None or event.session_id == session_id:
                    yield event
            last = page[-1][0].decode()
            start = "(" + last
            if len(page) < _PAGE:
                return

    async def close(self) -> None:
        try:
            await self._r.aclose()
        except (RedisError, OSError) as exc:
            raise StoreUnavailable(f"redis at {self.url}: close failed: {exc}") from exc
