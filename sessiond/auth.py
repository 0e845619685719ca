"""Session tokens: random 256-bit, only a SHA-256 hash is kept, compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import secrets

__all__ = ["hash_token", "new_session_id", "new_token", "token_matches"]

TOKEN_BYTES = 32


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def new_session_id() -> str:
    return "s_" + secrets.token_hex(8)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def token_matches(token: str | None, token_hash: str) -> bool:
    """Constant-time comparison of the hash of `token` with the stored hash."""
    if not token:
        return False
    return hmac.compare_digest(hash_token(token), token_hash)
