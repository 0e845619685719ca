"""Share links and invites: who may open a session, and as what (sessiond.grants)."""

import pytest

from protocols.errors import ErrorCode, ProtocolError
from sessiond.auth import hash_token
from sessiond.grants import (
    MAX_LIVE_GRANTS,
    Access,
    Grant,
    Role,
    authorize,
    issue,
    live_grants,
    require,
    revoke,
)
from sessiond.store.base import SessionRecord

OWNER = "owner-token"


def _refusal(fn, *args, **kwargs) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        fn(*args, **kwargs)
    return info.value


def test_the_owner_token_owns_and_a_viewer_token_only_watches() -> None:
    grants: list[Grant] = []
    viewer, token = issue(grants, Role.VIEWER, now=100.0, ttl_s=60.0, label="class")
    assert authorize(hash_token(OWNER), grants, OWNER, 100.0) == Access(Role.OWNER)
    access = authorize(hash_token(OWNER), grants, token, 120.0)
    assert access == Access(Role.VIEWER, viewer.grant_id)
    assert (access.steers, access.owns) == (False, False)
    assert viewer.token_hash == hash_token(token) and token not in str(viewer.to_json())
    assert viewer.expires_at == 160.0 and viewer.grant_id.startswith("g_") and len(viewer.grant_id) == 14


def test_a_player_token_steers_but_does_not_own() -> None:
    grants: list[Grant] = []
    _, token = issue(grants, Role.PLAYER, now=0.0, ttl_s=None)
    access = authorize(hash_token(OWNER), grants, token, 1e9)  # no expiry
    assert (access.role, access.steers, access.owns) == (Role.PLAYER, True, False)
    err = _refusal(require, access, own=True, what="DELETE")
    assert err.code == ErrorCode.FORBIDDEN and "owner" in err.message


def test_expired_revoked_and_wrong_tokens_are_refused_saying_why() -> None:
    grants: list[Grant] = []
    g1, t1 = issue(grants, Role.VIEWER, now=0.0, ttl_s=10.0)
    g2, t2 = issue(grants, Role.VIEWER, now=0.0, ttl_s=10.0)
    assert "expired" in _refusal(authorize, hash_token(OWNER), grants, t1, 10.0).message
    assert revoke(grants, g2.grant_id, 5.0).revoked_at == 5.0
    assert revoke(grants, g2.grant_id, 6.0).revoked_at == 5.0  # a second revoke changes nothing
    assert "revoked" in _refusal(authorize, hash_token(OWNER), grants, t2, 5.0).message
    for token in (None, "", "nope"):
        err = _refusal(authorize, hash_token(OWNER), grants, token, 0.0)
        assert (err.code, err.message) == (ErrorCode.UNAUTHORIZED, "missing or wrong session token")
    assert _refusal(revoke, grants, "g_000000000000", 0.0).code == ErrorCode.NOT_FOUND
    assert live_grants(grants, 4.0) == [g1] and live_grants(grants, 4.0, Role.PLAYER) == []


def test_a_spectator_may_not_steer() -> None:
    err = _refusal(require, Access(Role.VIEWER, "g_1"), steer=True, what="actions")
    assert err.code == ErrorCode.FORBIDDEN and err.message.startswith("a spectator may not send actions")
    require(Access(Role.PLAYER, "g_2"), steer=True)  # no exception
    require(Access(Role.OWNER), own=True, steer=True)


def test_live_grants_are_bounded_and_ttl_must_be_positive() -> None:
    grants: list[Grant] = []
    for _ in range(MAX_LIVE_GRANTS):
        issue(grants, Role.VIEWER, now=0.0, ttl_s=5.0)
    assert _refusal(issue, grants, Role.VIEWER, 0.0, 5.0).code == ErrorCode.RATE_LIMITED
    issue(grants, Role.VIEWER, now=5.0, ttl_s=5.0)  # the first 64 expired at 5.0: room again
    err = _refusal(issue, [], Role.VIEWER, 0.0, 0.0)
    assert (err.code, err.field) == (ErrorCode.INVALID_FIELD, "ttl_s")


def test_grants_survive_the_record_round_trip() -> None:
    record = SessionRecord(session_id="s_1", mode="world", model="m", seed=1, prompt="", width=8, height=8,
                           fps=16, token_hash=hash_token(OWNER), created_at=0.0, last_active_at=0.0)
    grant, token = issue(record.grants, Role.VIEWER, now=0.0, ttl_s=30.0, label="x")
    revoke(record.grants, grant.grant_id, 1.0)
    back = SessionRecord.from_json(record.to_json())
    assert back.grants == record.grants and isinstance(back.grants[0], Grant)
    assert "revoked" in _refusal(authorize, back.token_hash, back.grants, token, 2.0).message
    assert SessionRecord.from_json({k: v for k, v in record.to_json().items() if k != "grants"}).grants == []
