"""The fleet's session directory in Redis: which worker owns each session (bound once with SET NX
semantics, re-placed under an epoch fence) and each worker's capacity record (published every
second with a TTL, so a dead worker's record expires on its own).

Layout under a key prefix `p`:
  {p}:bind:{sid}         hash: worker, epoch, mode (the authoritative binding)
  {p}:owned:{worker}     set of the session ids bound to the worker (what failover re-places)
  {p}:cap:{worker}       JSON of the worker's WorkerCapacity, expiring after `ttl`
  {p}:workers            set of worker keys that ever published (dead ones are pruned on read)

Every binding change is one Lua script, so a stale worker (an older epoch) can never overwrite a
re-placement. Bindings are durable records: run Redis with append-only persistence.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Protocol

import redis.asyncio as redis_asyncio
from redis.exceptions import RedisError

from fleet.errors import DirectoryUnavailable, FencedOut
from fleet.messages import Binding, WorkerCapacity

__all__ = ["RedisDirectory", "SessionDirectory"]

# KEYS: bind, owned(worker)  ARGV: worker, mode  -> 1 bound at epoch 1, 0 the session already exists
_BIND = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'worker', ARGV[1], 'epoch', 1, 'mode', ARGV[2])
redis.call('SADD', KEYS[2], string.sub(KEYS[1], string.len(ARGV[3]) + 1))
return 1
"""
# KEYS: bind, owned(old), owned(new)  ARGV: expected epoch, new worker, bind prefix
# -> new epoch, or -(current epoch) when the expected epoch is stale, or 0 when unbound
_REBIND = """
local cur = redis.call('HGET', KEYS[1], 'epoch')
if not cur then return 0 end
if tonumber(cur) ~= tonumber(ARGV[1]) then return -tonumber(cur) end
local sid = string.sub(KEYS[1], string.len(ARGV[3]) + 1)
redis.call('SREM', KEYS[2], sid)
redis.call('SADD', KEYS[3], sid)
redis.call('HSET', KEYS[1], 'worker', ARGV[2])
return redis.call('HINCRBY', KEYS[1], 'epoch', 1)
"""
# KEYS: bind  ARGV: worker, epoch, field, value, ...  -> 1 written, 0 fenced out
_FENCED_SET = """
local b = redis.call('HMGET', KEYS[1], 'worker', 'epoch')
if b[1] ~= ARGV[1] or tonumber(b[2]) ~= tonumber(ARGV[2]) then return 0 end
for i = 3, #ARGV, 2 do redis.call('HSET', KEYS[1], 'x:' .. ARGV[i], ARGV[i + 1]) end
return 1
"""
# KEYS: bind, owned(worker)  ARGV: worker, epoch, bind prefix  -> 1 released, 0 fenced out
_RELEASE = """
local b = redis.call('HMGET', KEYS[1], 'worker', 'epoch')
if b[1] ~= ARGV[1] or tonumber(b[2]) ~= tonumber(ARGV[2]) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], string.sub(KEYS[1], string.len(ARGV[3]) + 1))
return 1
"""


class SessionDirectory(Protocol):
    """What placement, gateways and workers need from the directory (Redis in a fleet; an in-memory
    stand-in inside the simulator). `ops` counts the store commands issued."""

    ops: Counter[str]

    async def bind(self, session_id: str, worker: str, mode: str) -> Binding | None: ...
    async def rebind(self, session_id: str, worker: str, expected_epoch: int) -> Binding: ...
    async def fenced_set(self, binding: Binding, fields: dict[str, str]) -> None: ...
    async def release(self, binding: Binding) -> None: ...
    async def lookup(self, session_id: str) -> Binding | None: ...
    async def owned_by(self, worker: str) -> list[str]: ...
    async def owners(self) -> list[str]: ...
    async def publish(self, capacity: WorkerCapacity) -> None: ...
    async def withdraw(self, worker: str) -> None: ...
    async def workers(self) -> list[WorkerCapacity]: ...


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisDirectory:
    """The directory on a Redis server (redis.asyncio)."""

    def __init__(self, url: str, *, prefix: str = "fleet", ttl_s: float = 3.0, timeout_s: float = 1.0) -> None:
        if ttl_s <= 0:
            raise ValueError(f"ttl_s must be > 0 (a capacity record must expire), got {ttl_s}")
        self.url = url
        self.ttl_s = ttl_s
        self.ops: Counter[str] = Counter()
        self._p = prefix
        self._r: Any = redis_asyncio.Redis.from_url(url, socket_timeout=timeout_s,
                                                    socket_connect_timeout=timeout_s)
        self._bind = self._r.register_script(_BIND)
        self._rebind = self._r.register_script(_REBIND)
        self._fenced_set = self._r.register_script(_FENCED_SET)
        self._release = self._r.register_script(_RELEASE)

    async def close(self) -> None:
        await self._r.aclose()

    def _bk(self, sid: str) -> str:
        return f"{self._p}:bind:{sid}"

    def _owned(self, worker: str) -> str:
        return f"{self._p}:owned:{worker}"

    async def _call(self, name: str, coro: Any, count: int = 1) -> Any:
        self.ops[name] += count
        try:
            return await coro
        except (RedisError, OSError) as exc:
            raise DirectoryUnavailable(f"the session directory at {self.url} failed on {name}: {exc}") from exc

    async def bind(self, session_id: str, worker: str, mode: str) -> Binding | None:
        """Bind a new session to `worker` at epoch 1; None when the session is already bound."""
        done = await self._call("bind", self._bind(keys=[self._bk(session_id), self._owned(worker)],
                                                   args=[worker, mode, f"{self._p}:bind:"]))
        return Binding(session_id, worker, 1, mode) if done == 1 else None

    async def rebind(self, session_id: str, worker: str, expected_epoch: int) -> Binding:
        """Move a session to `worker` if its binding is still at `expected_epoch`; the epoch goes up
        by one, which fences every later write of the previous owner."""
        current = await self.lookup(session_id)
        if current is None:
            raise FencedOut(session_id, worker, expected_epoch, None)
        keys = [self._bk(session_id), self._owned(current.worker), self._owned(worker)]
        epoch = int(await self._call("rebind", self._rebind(keys=keys, args=[expected_epoch, worker,
                                                                             f"{self._p}:bind:"])))
        if epoch <= 0:
            raise FencedOut(session_id, worker, expected_epoch, (current.worker, -epoch) if epoch else None)
        return Binding(session_id, worker, epoch, current.mode)

    async def fenced_set(self, binding: Binding, fields: dict[str, str]) -> None:
        """Write fields of the session's binding, only if `binding` is still the current one."""
        args: list[Any] = [binding.worker, binding.epoch]
        for k, v in fields.items():
            args += [k, v]
        if await self._call("fenced_set", self._fenced_set(keys=[self._bk(binding.session_id)], args=args)) != 1:
            raise FencedOut(binding.session_id, binding.worker, binding.epoch, await self._current(binding))

    async def release(self, binding: Binding) -> None:
        """Remove a closed session's binding, only if `binding` is still the current one."""
        keys = [self._bk(binding.session_id), self._owned(binding.worker)]
        done = await self._call("release", self._release(keys=keys, args=[binding.worker, binding.epoch,
                                                                          f"{self._p}:bind:"]))
        if done != 1:
            raise FencedOut(binding.session_id, binding.worker, binding.epoch, await self._current(binding))

    async def _current(self, binding: Binding) -> tuple[str, int] | None:
        now = await self.lookup(binding.session_id)
        return (now.worker, now.epoch) if now else None

    async def lookup(self, session_id: str) -> Binding | None:
        raw = await self._call("lookup", self._r.hgetall(self._bk(session_id)))
        if not raw:
            return None
        fields = {_text(k): _text(v) for k, v in raw.items()}
        extra = {k[2:]: v for k, v in fields.items() if k.startswith("x:")}
        return Binding(session_id, fields["worker"], int(fields["epoch"]), fields.get("mode", ""), extra)

    async def owned_by(self, worker: str) -> list[str]:
        members = await self._call("owned_by", self._r.smembers(self._owned(worker)))
        return sorted(_text(m) for m in members)

    async def owners(self) -> list[str]:
        """Every worker that owns at least one session (an empty owned set is no key), live or not."""
        keys = await self._call("owners", self._scan(f"{self._p}:owned:*"))
        cut = len(f"{self._p}:owned:")
        return sorted(k[cut:] for k in keys)

    async def _scan(self, pattern: str) -> list[str]:
        return [_text(k) async for k in self._r.scan_iter(match=pattern, count=1000)]

    async def publish(self, capacity: WorkerCapacity) -> None:
        """Publish a worker's capacity record; it expires `ttl_s` after the last publish."""
        pipe = self._r.pipeline(transaction=False)
        pipe.set(f"{self._p}:cap:{capacity.worker}", json.dumps(capacity.to_json()), px=int(self.ttl_s * 1000))
        pipe.sadd(f"{self._p}:workers", capacity.worker)
        await self._call("publish", pipe.execute(), count=2)

    async def withdraw(self, worker: str) -> None:
        """Remove a worker's capacity record now (it deregisters; its bindings stay for failover)."""
        pipe = self._r.pipeline(transaction=False)
        pipe.delete(f"{self._p}:cap:{worker}")
        pipe.srem(f"{self._p}:workers", worker)
        await self._call("withdraw", pipe.execute(), count=2)

    async def workers(self) -> list[WorkerCapacity]:
        """The live workers' capacity records; a worker whose record expired is pruned."""
        keys = sorted(_text(m) for m in await self._call("workers", self._r.smembers(f"{self._p}:workers")))
        if not keys:
            return []
        raws = await self._call("workers", self._r.mget([f"{self._p}:cap:{k}" for k in keys]))
        dead = [k for k, raw in zip(keys, raws, strict=True) if raw is None]
        if dead:
            await self._call("workers", self._r.srem(f"{self._p}:workers", *dead))
        return [WorkerCapacity.from_json(json.loads(raw)) for raw in raws if raw is not None]
