"""The public HTTP surface of docs/protocol.md, once for every server that offers it: the route
table (`ROUTES`, mounted by `mount`), the error body and its response (`error_response`), the
session token (`bearer_token`), the JSON body (`read_json`) and the refusal of a WebSocket
(`refuse_socket`). The single daemon and the fleet gateway both mount it with their own
handlers; `tests/httpapi` checks that they serve the same routes and the same error bodies.

Imports protocols (and Starlette); sessiond and fleet import it."""

from __future__ import annotations

from httpapi.routes import MEDIA, ROUTES, RouteSpec, mount
from httpapi.wire import MAX_BODY, bearer_token, error_response, read_json, refuse_socket

__all__ = ["MAX_BODY", "MEDIA", "ROUTES", "RouteSpec", "bearer_token", "error_response", "mount", "read_json",
           "refuse_socket"]
