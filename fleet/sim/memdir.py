"""An in-memory session directory with the Redis directory's semantics (SET NX binding, epoch
fence, TTL'd capacity records), for the simulator only. Time comes from a clock the simulator
drives; `ops` counts what the Redis directory would have issued, command for command."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from fleet.errors import FencedOut
from fleet.messages import Binding, WorkerCapacity

__all__ = ["MemoryDirectory"]


class MemoryDirectory:
    def __init__(self, clock: Callable[[], float], ttl_s: float = 3.0) -> None:
        self.ops: Counter[str] = Counter()
        self.ttl_s = ttl_s
        self._clock = clock
        self._bindings: dict[str, Binding] = {}
        self._owned: dict[str, set[str]] = {}
        self._caps: dict[str, tuple[float, WorkerCapacity]] = {}

    async def bind(self, session_id: str, worker: str, mode: str) -> Binding | None:
        self.ops["bind"] += 1
        if session_id in self._bindings:
            return None
        binding = Binding(session_id, worker, 1, mode)
        self._bindings[session_id] = binding
        self._owned.setdefault(worker, set()).add(session_id)
        return binding

    async def rebind(self, session_id: str, worker: str, expected_epoch: int) -> Binding:
        self.ops["lookup"] += 1
        self.ops["rebind"] += 1
        current = self._bindings.get(session_id)
        if current is None or current.epoch != expected_epoch:
            raise FencedOut(session_id, worker, expected_epoch,
                            (current.worker, current.epoch) if current else None)
        self._owned.get(current.worker, set()).discard(session_id)
        self._owned.setdefault(worker, set()).add(session_id)
        moved = Binding(session_id, worker, current.epoch + 1, current.mode, dict(current.extra))
        self._bindings[session_id] = moved
        return moved

    def _check(self, binding: Binding) -> Binding:
        current = self._bindings.get(binding.session_id)
        if current is None or (current.worker, current.epoch) != (binding.worker, binding.epoch):
            self.ops["lookup"] += 1
            raise FencedOut(binding.session_id, binding.worker, binding.epoch,
                            (current.worker, current.epoch) if current else None)
        return current

    async def fenced_set(self, binding: Binding, fields: dict[str, str]) -> None:
        self.ops["fenced_set"] += 1
        current = self._check(binding)
        self._bindings[binding.session_id] = Binding(current.session_id, current.worker, current.epoch,
                                                     current.mode, {**current.extra, **fields})

    async def release(self, binding: Binding) -> None:
        self.ops["release"] += 1
        self._check(binding)
        del self._bindings[binding.session_id]
        self._owned.get(binding.worker, set()).discard(binding.session_id)

    async def lookup(self, session_id: str) -> Binding | None:
        self.ops["lookup"] += 1
        return self._bindings.get(session_id)

    async def owned_by(self, worker: str) -> list[str]:
        self.ops["owned_by"] += 1
        return sorted(self._owned.get(worker, ()))

    async def owners(self) -> list[str]:
        self.ops["owners"] += 1
        return sorted(w for w, sids in self._owned.items() if sids)

    async def publish(self, capacity: WorkerCapacity) -> None:
        self.ops["publish"] += 2
        self._caps[capacity.worker] = (self._clock() + self.ttl_s, capacity)

    async def withdraw(self, worker: str) -> None:
        self.ops["withdraw"] += 2
        self._caps.pop(worker, None)

    async def workers(self) -> list[WorkerCapacity]:
        now = self._clock()
        dead = [k for k, (expires, _) in self._caps.items() if expires <= now]
        self.ops["workers"] += 2 + (1 if dead else 0)
        for k in dead:
            del self._caps[k]
        return [cap for _, (_, cap) in sorted(self._caps.items())]
