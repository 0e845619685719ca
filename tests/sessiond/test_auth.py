"""Session ids and tokens: 256-bit random tokens, only their hash is stored."""

from __future__ import annotations

from sessiond.auth import hash_token, new_session_id, new_token, token_matches


def test_tokens_are_256_bit_random_and_only_their_hash_matches() -> None:
    token = new_token()
    assert len(token) == 43 and token != new_token()
    digest = hash_token(token)
    assert len(digest) == 64 and token not in digest
    assert token_matches(token, digest)
    assert not token_matches(token + "x", digest)
    assert not token_matches(None, digest) and not token_matches("", digest)
    assert new_session_id().startswith("s_")
