"""The one inbound reader of every transport (WebSocket and WebRTC data channels alike).

`InboundReader.read` takes one client message's bytes and says what to do with them: hand the
decoded message to the session, or send back a coded `error` (fatal: then close). It decodes
with the connection's limits (message size, prompt length), keeps the first `hello` of the
connection (required first on a WebSocket, optional on WebRTC; a later one goes to the session,
which answers `conflict`), applies the request rate and the abuse rule below, and counts every
error it makes in `on_error` (the daemon's protocol-error metric). `ping` is answered by the
session on every transport.

Requests other than `action` and `received` beyond `max_requests_per_s` per connection get a
non-fatal `rate_limited` and are dropped. More than `abuse_errors_per_10s` errors (bad messages,
dropped requests) within ten seconds make the connection abusive: it gets a fatal `rate_limited`
and is closed. Actions are not limited here: every action goes to the session, whose action
timeline merges them and applies the one action rate policy.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack

from protocols.codec import decode
from protocols.errors import ErrorCode, ProtocolError
from protocols.messages import Action, ClientMessage, Error, Hello, Received

__all__ = ["InboundGuard", "InboundLimits", "InboundReader", "Verdict"]

_ABUSE_WINDOW_S = 10.0


@dataclass(frozen=True)
class InboundLimits:
    max_requests_per_s: int = 50
    abuse_errors_per_10s: int = 50
    max_message_bytes: int = 65536
    max_prompt_chars: int = 2000

    def __post_init__(self) -> None:
        if self.max_message_bytes < 256:
            raise ValueError(f"max_message_bytes {self.max_message_bytes}: must be at least 256")
        if self.max_prompt_chars < 1:
            raise ValueError(f"max_prompt_chars {self.max_prompt_chars}: must be at least 1")
        if self.max_requests_per_s < 1:
            raise ValueError(f"max_requests_per_s {self.max_requests_per_s}: must be at least 1")
        if self.abuse_errors_per_10s < 1:
            raise ValueError(f"abuse_errors_per_10s {self.abuse_errors_per_10s}: must be at least 1")


class InboundGuard:
    """One connection's counters under `InboundLimits`."""

    def __init__(self, limits: InboundLimits, now: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._now = now
        self._requests: deque[float] = deque()
        self._errors: deque[float] = deque()

    def over_rate(self, message: Any) -> bool:
        """True when `message` is a request beyond the per-second limit (to be refused)."""
        if isinstance(message, Action | Received):
            return False
        now = self._now()
        while self._requests and now - self._requests[0] >= 1.0:
            self._requests.popleft()
        if len(self._requests) >= self.limits.max_requests_per_s:
            return True
        self._requests.append(now)
        return False

    def error(self) -> bool:
        """Count one error; True when the connection is now abusive (to be closed)."""
        now = self._now()
        self._errors.append(now)
        while self._errors and now - self._errors[0] > _ABUSE_WINDOW_S:
            self._errors.popleft()
        return len(self._errors) > self.limits.abuse_errors_per_10s


@dataclass(frozen=True)
class Verdict:
    """What became of one client message: a message for the session, an error to send back
    (fatal: the connection closes after it), or neither (the connection's hello, taken here)."""

    message: ClientMessage | None = None
    error: Error | None = None
    hello: Hello | None = None


class InboundReader:
    """One connection's reader of client messages under `InboundLimits`."""

    def __init__(self, limits: InboundLimits, *, hello_required: bool,
                 on_error: Callable[[str], None] | None = None, now: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.hello_required = hello_required
        self.hello_seen = False
        self._on_error = on_error
        self._guard = InboundGuard(limits, now)

    def read(self, data: Any, *, actions_only: bool = False) -> Verdict:
        """`data`: one message as it came off the wire (bytes; a str is a text frame)."""
        try:
            if isinstance(data, str):
                raise ProtocolError(ErrorCode.BAD_MESSAGE, "text frames are not messages; send msgpack in binary "
                                    "frames")
            message = decode(data, max_bytes=self.limits.max_message_bytes, expect="client",
                             max_prompt_chars=self.limits.max_prompt_chars)
        except ProtocolError as exc:
            if exc.code == ErrorCode.UNSUPPORTED_VERSION and not self.hello_seen:
                return Verdict(error=self.fatal(exc.code, exc.message))
            return self._refuse(exc.code, exc.message, _request_id(data))
        if actions_only and not isinstance(message, Action):
            return self._refuse(ErrorCode.UNKNOWN_TYPE, f"the actions channel carries only action, got {message.T!r}")
        if isinstance(message, Hello) and not self.hello_seen:
            self.hello_seen = True
            return Verdict(hello=message)
        if self.hello_required and not self.hello_seen:
            return self._refuse(ErrorCode.INVALID_FIELD, f"the first message must be hello, got {message.T}")
        if self._guard.over_rate(message):
            return self._refuse(ErrorCode.RATE_LIMITED, f"more than {self.limits.max_requests_per_s} requests per "
                                "second; this one was dropped", getattr(message, "id", None))
        return Verdict(message=message)

    def fatal(self, code: ErrorCode, message: str) -> Error:
        """A fatal error (the connection closes after it), counted."""
        self._count(code)
        return Error(code=code.value, message=message, fatal=True)

    def _refuse(self, code: ErrorCode, message: str, re: int | None = None) -> Verdict:
        abusive = self._guard.error()
        self._count(code)
        if abusive:
            return Verdict(error=self.fatal(ErrorCode.RATE_LIMITED, "too many bad messages; fix the client and "
                                            "reconnect"))
        return Verdict(error=Error(code=code.value, message=message, fatal=False, re=re))

    def _count(self, code: ErrorCode) -> None:
        if self._on_error is not None:
            self._on_error(code.value)


def _request_id(data: Any) -> int | None:
    """Best effort: the `id` of a request that failed validation, so its error can carry `re`."""
    if not isinstance(data, bytes | bytearray | memoryview) or len(data) > 65536:
        return None
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=False, max_bin_len=65536, max_str_len=65536,
                              max_array_len=4096, max_map_len=4096, max_ext_len=0)
    except (ValueError, msgpack.UnpackException):
        return None
    value = obj.get("id") if isinstance(obj, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
