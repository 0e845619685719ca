"""Session protocol v1 (docs/protocol.md): messages, codec, validation, HTTP bodies, client.

The asyncio client lives in `protocols.client` and is imported from there (it pulls in httpx
and websockets, which the codec does not need).
"""

from .codec import decode, encode
from .errors import ErrorCode, ProtocolError
from .timeline import pts_for

__all__ = ["ErrorCode", "ProtocolError", "decode", "encode", "pts_for"]
