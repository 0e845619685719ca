"""A stand-in daemon for fleet tests: implements FleetDaemon with in-memory sessions and a fixed
number of slots (headroom = free slots / slots), so placement and failover can be checked without
an engine. Run as a worker: python -m tests.fleet._standin KEY SLOTS REDIS_URL [RACK]"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import sys
import time
from typing import Any

from fleet.daemon_port import DaemonCapacity
from fleet.runtime import RuntimeConfig
from fleet.worker import WorkerConfig, serve_worker
from protocols.errors import ErrorCode, ProtocolError, Refused
from protocols.http import CreateSessionRequest, CreateSessionResponse, SessionStatus


def _token_of(session_id: str) -> str:
    """The stand-in's tokens follow from the session id, so a worker that resumes a session knows
    it (a real daemon reads the token's hash from the shared durable record)."""
    return hashlib.sha256(f"standin:{session_id}".encode()).hexdigest()[:16]


class StandinDaemon:
    def __init__(self, key: str, slots: int, retry_after_s: float = 3.0) -> None:
        self.key = key
        self.slots = slots
        self.retry_after_s = retry_after_s
        self.sessions: dict[str, tuple[str, str]] = {}  # sid -> (mode, token)
        self.draining = False

    def _public(self, sid: str, mode: str, base_url: str) -> dict[str, Any]:
        ws = "ws" + base_url[4:]
        return {"session_id": sid, "mode": mode, "model": "standin", "width": 64, "height": 64, "fps": 8,
                "action_space": {}, "ws_url": f"{ws}/v1/sessions/{sid}/ws",
                "webrtc_url": f"{base_url}/v1/sessions/{sid}/webrtc"}

    def _admit(self) -> None:
        if self.draining:
            raise Refused(ErrorCode.CAPACITY, f"{self.key} is draining", 1.0)
        if len(self.sessions) >= self.slots:
            raise Refused(ErrorCode.CAPACITY, f"{self.key} is full ({self.slots} sessions)", self.retry_after_s)

    async def create(self, request: CreateSessionRequest, base_url: str) -> CreateSessionResponse:
        self._admit()
        sid = f"s-{secrets.token_hex(6)}"
        token = _token_of(sid)
        self.sessions[sid] = (request.mode, token)
        return CreateSessionResponse.from_json({**self._public(sid, request.mode, base_url), "token": token})

    async def resume(self, session_id: str, base_url: str) -> dict[str, Any]:
        self._admit()
        self.sessions[session_id] = ("world", _token_of(session_id))
        return self._public(session_id, "world", base_url)

    def _owned(self, session_id: str, token: str | None) -> str:
        if session_id not in self.sessions:
            raise ProtocolError(ErrorCode.NOT_FOUND, f"no session {session_id} on {self.key}")
        if self.sessions[session_id][1] != token:
            raise ProtocolError(ErrorCode.UNAUTHORIZED, "the token does not match")
        return self.sessions[session_id][0]

    async def status(self, session_id: str, token: str | None) -> dict[str, Any]:
        mode = self._owned(session_id, token)
        now = time.time()
        return SessionStatus(session_id, mode, "idle", 0, 0, 0, now, now).to_json()

    async def close(self, session_id: str, token: str | None) -> None:
        self._owned(session_id, token)
        del self.sessions[session_id]

    async def release(self, session_id: str, moved_to: dict[str, Any] | None = None) -> None:
        self.sessions.pop(session_id, None)

    def capacity(self) -> DaemonCapacity:
        free = (self.slots - len(self.sessions)) / self.slots
        return DaemonCapacity(headroom={"world": free, "director": free},
                              cost={"world": 1 / self.slots, "director": 1 / self.slots},
                              kv_free_sessions=self.slots - len(self.sessions), sessions=len(self.sessions),
                              draining=self.draining)

    async def drain(self) -> list[str]:
        self.draining = True
        return sorted(self.sessions)


def main(argv: list[str]) -> None:
    key, slots, redis_url = argv[0], int(argv[1]), argv[2]
    config = WorkerConfig(key=key, base_url=f"http://{key.replace('/', '-').replace(':', '')}.test",
                          redis_url=redis_url, runtime=RuntimeConfig.from_env(os.environ),
                          rack=argv[3] if len(argv) > 3 else "")
    asyncio.run(serve_worker(StandinDaemon(key, slots), config))


if __name__ == "__main__":
    main(sys.argv[1:])
