"""Who may open a session, and as what: its owner (the token `POST /v1/sessions` returned),
spectators (viewer tokens of a share link) and co-players (player tokens of an invite).

A grant is issued by the owner, holds only the hash of its token, may expire and may be revoked;
grants live in the session's record, so they survive a restart and follow a session that moves.
`authorize` answers what a presented token may do, or says in words why it may do nothing
(wrong, expired, revoked). Framework-free: the HTTP and WebSocket routes call it through
`sessiond.runtime.directory`.
"""

from __future__ import annotations

import enum
import secrets
from dataclasses import asdict, dataclass
from typing import Any

from protocols.errors import ErrorCode, ProtocolError
from sessiond.auth import hash_token, new_token, token_matches

__all__ = ["MAX_LIVE_GRANTS", "Access", "Grant", "Role", "authorize", "issue", "live_grants", "require", "revoke"]

MAX_LIVE_GRANTS = 64  # live (unexpired, unrevoked) grants per session; each is a share link or an invite


class Role(enum.StrEnum):
    OWNER = "owner"  # created the session: everything
    VIEWER = "viewer"  # a spectator: receives the owner's frames, sends nothing that steers
    PLAYER = "player"  # a co-player: acts in a world session beside the owner


@dataclass
class Grant:
    grant_id: str  # "g_" + 12 hex: names the grant in revoke and in logs, never a secret
    role: str  # Role value: "viewer" | "player"
    token_hash: str
    created_at: float  # unix s
    expires_at: float | None  # unix s; None: lives as long as the session
    revoked_at: float | None = None
    label: str = ""  # the owner's note (e.g. "classroom"); a player's is shown to the others in `presence`
    player: int | None = None  # a player grant's seat (1..players-1; the owner is player 0)

    def live(self, now: float) -> bool:
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Grant:
        return cls(grant_id=str(data["grant_id"]), role=str(data["role"]), token_hash=str(data["token_hash"]),
                   created_at=float(data["created_at"]),
                   expires_at=None if data.get("expires_at") is None else float(data["expires_at"]),
                   revoked_at=None if data.get("revoked_at") is None else float(data["revoked_at"]),
                   label=str(data.get("label", "")),
                   player=None if data.get("player") is None else int(data["player"]))


@dataclass(frozen=True)
class Access:
    """What a presented token may do on one session."""

    role: Role
    grant_id: str | None = None  # None for the owner
    player: int | None = None  # co-play seat: 0 for the owner, a player grant's seat, None for a viewer

    @property
    def seat(self) -> int | None:
        """The player index this token plays as (the owner is player 0); None for a spectator."""
        return 0 if self.role == Role.OWNER else self.player
    @property
    def steers(self) -> bool:
        """May send actions (owner, players)."""
        return self.role != Role.VIEWER

    @property
    def owns(self) -> bool:
        return self.role == Role.OWNER


def live_grants(grants: list[Grant], now: float, role: Role | None = None) -> list[Grant]:
    return [g for g in grants if g.live(now) and (role is None or g.role == role.value)]


def issue(grants: list[Grant], role: Role, now: float, ttl_s: float | None, label: str = "",
          player: int | None = None) -> tuple[Grant, str]:
    """A new grant appended to `grants`, and its token (shown once; only its hash is kept).
    `player`: a player grant's seat (sessiond.session.coplay picks it)."""
    if role == Role.OWNER:
        raise ValueError("the owner's token comes from create, not from a grant")
    if ttl_s is not None and not ttl_s > 0:
        raise ProtocolError(ErrorCode.INVALID_FIELD, f"`ttl_s` must be positive seconds, got {ttl_s}", "ttl_s")
    if len(live_grants(grants, now)) >= MAX_LIVE_GRANTS:
        raise ProtocolError(ErrorCode.RATE_LIMITED, f"this session already has {MAX_LIVE_GRANTS} live share "
                            "links and invites; revoke one (DELETE .../viewers/{grant_id}) first")
    token = new_token()
    grant = Grant(grant_id="g_" + secrets.token_hex(6), role=role.value, token_hash=hash_token(token),
                  created_at=now, expires_at=None if ttl_s is None else now + ttl_s, label=label, player=player)
    grants.append(grant)
    return grant, token


def revoke(grants: list[Grant], grant_id: str, now: float) -> Grant:
    """Revoke one grant (a second revoke is a no-op); not_found when the session has no such grant."""
    for grant in grants:
        if grant.grant_id == grant_id:
            if grant.revoked_at is None:
                grant.revoked_at = now
            return grant
    raise ProtocolError(ErrorCode.NOT_FOUND, f"this session has no grant {grant_id[:40]!r}")


def authorize(owner_hash: str, grants: list[Grant], token: str | None, now: float) -> Access:
    """The access `token` gives, or unauthorized saying why (missing, wrong, expired, revoked)."""
    if token_matches(token, owner_hash):
        return Access(Role.OWNER)
    if token:
        for grant in grants:
            if token_matches(token, grant.token_hash):
                if grant.revoked_at is not None:
                    raise ProtocolError(ErrorCode.UNAUTHORIZED, f"this {grant.role} link was revoked by the "
                                        "session's owner; ask for a new one")
                if grant.expires_at is not None and now >= grant.expires_at:
                    raise ProtocolError(ErrorCode.UNAUTHORIZED, f"this {grant.role} link expired; ask the "
                                        "session's owner for a new one")
                return Access(Role(grant.role), grant.grant_id, grant.player)
    raise ProtocolError(ErrorCode.UNAUTHORIZED, "missing or wrong session token")


def require(access: Access, *, steer: bool = False, own: bool = False, what: str = "this") -> None:
    """forbidden (403) when `access` may not do `what`."""
    if own and not access.owns:
        raise ProtocolError(ErrorCode.FORBIDDEN, f"only the session's owner may do {what}; this token is a "
                            f"{access.role.value}'s")
    if steer and not access.steers:
        raise ProtocolError(ErrorCode.FORBIDDEN, f"a spectator may not send {what}: this token only watches")
