"""The public route table: every route a client of docs/protocol.md may call, with its name, and
`mount`, which builds a server's Starlette routes from its handlers by name (a server leaves out
only what it names in `omit`, e.g. a gateway that does not relay media)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.routing import BaseRoute, Route, WebSocketRoute

__all__ = ["MEDIA", "ROUTES", "RouteSpec", "mount"]


@dataclass(frozen=True)
class RouteSpec:
    name: str
    path: str
    methods: tuple[str, ...]  # () for a WebSocket route

    @property
    def websocket(self) -> bool:
        return not self.methods


ROUTES: tuple[RouteSpec, ...] = (
    RouteSpec("create", "/v1/sessions", ("POST",)),
    RouteSpec("status", "/v1/sessions/{sid}", ("GET",)),
    RouteSpec("delete", "/v1/sessions/{sid}", ("DELETE",)),
    RouteSpec("webrtc", "/v1/sessions/{sid}/webrtc", ("POST",)),
    RouteSpec("players", "/v1/sessions/{sid}/players", ("POST",)),  # extension: co-play invites
    RouteSpec("players_revoke", "/v1/sessions/{sid}/players/{grant_id}", ("DELETE",)),
    RouteSpec("ws", "/v1/sessions/{sid}/ws", ()),
    RouteSpec("viewers_create", "/v1/sessions/{sid}/viewers", ("POST",)),
    RouteSpec("viewers_list", "/v1/sessions/{sid}/viewers", ("GET",)),
    RouteSpec("viewers_revoke", "/v1/sessions/{sid}/viewers/{grant_id}", ("DELETE",)),
    RouteSpec("capacity", "/v1/capacity", ("GET",)),
    RouteSpec("healthz", "/healthz", ("GET",)),
    RouteSpec("readyz", "/readyz", ("GET",)),
)
MEDIA = frozenset({"webrtc", "ws"})  # the routes that carry a session's media (or its signalling)


def mount(handlers: Mapping[str, Callable[..., Any]], *, omit: Collection[str] = ()) -> list[BaseRoute]:
    """Starlette routes for every public route not in `omit`, in the table's order. A handler
    for a name the table lacks, or a route left without a handler, is a ValueError naming it."""
    names = {spec.name for spec in ROUTES}
    unknown = sorted((set(handlers) | set(omit)) - names)
    if unknown:
        raise ValueError(f"no public route is named {unknown}; the names are {sorted(names)}")
    wanted = [spec for spec in ROUTES if spec.name not in omit]
    missing = [spec.name for spec in wanted if spec.name not in handlers]
    if missing:
        raise ValueError(f"public routes {missing} have no handler; pass one or name them in omit")
    routes: list[BaseRoute] = []
    for spec in wanted:
        if spec.websocket:
            routes.append(WebSocketRoute(spec.path, handlers[spec.name], name=spec.name))
        else:
            routes.append(Route(spec.path, handlers[spec.name], methods=list(spec.methods), name=spec.name))
    return routes
