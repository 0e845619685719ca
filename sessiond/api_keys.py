"""Optional API keys for session creation (`sessiond serve --api-keys FILE`; off by default).

The file holds one JSON object per line: {"name": "alice", "sha256": "<64 hex>", "max_sessions": 2}.
Only the SHA-256 of a key is stored. A key is 256 random bits (`new_key`), so a plain SHA-256 is
enough: a slow password hash guards low-entropy secrets against guessing, and nobody can guess
2^256; the file can be read without revealing a usable key. `sessiond api-key add` appends a
line and prints the key once.

`POST /v1/sessions` then needs `X-API-Key: <key>` (a header of its own: `Authorization: Bearer`
carries session tokens). The presented key's hash is compared with every stored hash in
constant time, all of them every time, so timing says neither whether nor where it matched.
Each key may hold `max_sessions` sessions at once; over that, `rate_limited` (429)."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from protocols.errors import ErrorCode, ProtocolError
from sessiond.errors import ServeConfigError

__all__ = ["ApiKey", "ApiKeys", "add_key", "hash_key", "new_key"]

KEY_PREFIX = "sk_"
KEY_BYTES = 32


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(KEY_BYTES)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class ApiKey:
    name: str
    sha256: str
    max_sessions: int

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "sha256": self.sha256, "max_sessions": self.max_sessions}


def _parse(line: str, where: str) -> ApiKey:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ServeConfigError("api_keys", f"{where} is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ServeConfigError("api_keys", f"{where} must be a JSON object")
    name, digest, most = data.get("name"), data.get("sha256"), data.get("max_sessions")
    if not isinstance(name, str) or not name:
        raise ServeConfigError("api_keys", f"{where}: `name` must be a non-empty string")
    if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ServeConfigError("api_keys", f"{where}: `sha256` must be 64 lowercase hex digits (the key's hash, "
                               "never the key; `sessiond api-key add` writes it)")
    if not isinstance(most, int) or isinstance(most, bool) or most < 1:
        raise ServeConfigError("api_keys", f"{where}: `max_sessions` must be a positive integer")
    return ApiKey(name, digest, most)


def read_keys(path: str | Path) -> list[ApiKey]:
    """The keys of `path` (a missing file has none); raises ServeConfigError naming the bad line."""
    file = Path(path)
    try:
        text = file.read_text() if file.exists() else ""
    except OSError as exc:
        raise ServeConfigError("api_keys", f"cannot read {file}: {exc.strerror}") from exc
    keys = [_parse(line, f"{file} line {n}") for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    names = [k.name for k in keys]
    for name in names:
        if names.count(name) > 1:
            raise ServeConfigError("api_keys", f"{file}: the name {name!r} is used twice; names must be unique")
    return keys


def add_key(path: str | Path, name: str, max_sessions: int) -> str:
    """Append a new key to `path` (created with mode 0600 if absent); returns the key itself,
    which is stored nowhere."""
    keys = read_keys(path)
    if any(k.name == name for k in keys):
        raise ServeConfigError("api_keys", f"{path} already has a key named {name!r}; pick another name")
    if max_sessions < 1:
        raise ServeConfigError("api_keys", f"max_sessions must be a positive integer, got {max_sessions}")
    key = new_key()
    file = Path(path)
    if not file.exists():
        file.touch(mode=0o600)
    with file.open("a") as out:
        out.write(json.dumps(ApiKey(name, hash_key(key), max_sessions).to_json()) + "\n")
    return key


class ApiKeys:
    """The keys and the sessions each holds now."""

    def __init__(self, keys: list[ApiKey]) -> None:
        self.keys = tuple(keys)
        self._holding: dict[str, set[str]] = {k.name: set() for k in keys}  # key name -> its live sessions
        self._owner: dict[str, str] = {}  # session id -> key name

    @classmethod
    def load(cls, path: str) -> ApiKeys:
        return cls(read_keys(path))

    def check(self, presented: str | None) -> ApiKey:
        """The key `presented` is; 401 `unauthorized` when it is missing or matches none."""
        if not presented:
            raise ProtocolError(ErrorCode.UNAUTHORIZED, "this server needs an API key to create sessions: send it "
                                "in the X-API-Key header (ask the operator for one)")
        digest = hash_key(presented)
        found: ApiKey | None = None
        for key in self.keys:  # every key, every time: no early exit
            if hmac.compare_digest(digest, key.sha256):
                found = key
        if found is None:
            raise ProtocolError(ErrorCode.UNAUTHORIZED, "the X-API-Key is not a key of this server; check it")
        return found

    def claim(self, key: ApiKey, session_id: str, *, force: bool = False) -> None:
        """Count `session_id` against `key`; 429 `rate_limited` when the key holds its most already
        (`force`: a resumed session is counted whatever the count)."""
        holding = self._holding.setdefault(key.name, set())
        if not force and len(holding) >= key.max_sessions:
            raise ProtocolError(ErrorCode.RATE_LIMITED, f"API key {key.name!r} already holds {len(holding)} of its "
                                f"{key.max_sessions} sessions; close one (DELETE) before creating another")
        holding.add(session_id)
        self._owner[session_id] = key.name

    def by_name(self, name: str) -> ApiKey | None:
        return next((k for k in self.keys if k.name == name), None)

    def release(self, session_id: str) -> None:
        name = self._owner.pop(session_id, None)
        if name is not None:
            self._holding.get(name, set()).discard(session_id)

    def holding(self, name: str) -> int:
        return len(self._holding.get(name, ()))
