"""The web client's files, served from memory: `WebFiles(directory)`, an ASGI app for a `Mount`.

Starlette's StaticFiles stats and reads every file in a worker thread per request. The pages are a
few small files (about 110 KB in all), asked for all at once when a share link is opened; while 50
spectators connect beside them each hop waits its turn, and a cold spectator page's script ran only
0.53-0.65 s after its navigation began (0.18-0.31 s on an idle daemon). Here a file is read once
and kept with its ETag; a request costs one `stat` on the event loop (the file changed: it is read
again, so an edited page is served at once) and answers 304 to a matching `If-None-Match`.
`Cache-Control: no-cache`: browsers revalidate, so a new version reaches them on the next load.

Paths: `/` and `/dir/` serve `index.html`; nothing outside `directory` is served (a `..` or an
absolute path is 404), nor hidden files. GET and HEAD only (405 otherwise).
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from starlette.types import Receive, Scope, Send

__all__ = ["WebFiles"]

_TYPES = {".js": "text/javascript; charset=utf-8", ".html": "text/html; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".json": "application/json", ".md": "text/markdown; charset=utf-8",
          ".svg": "image/svg+xml", ".png": "image/png"}


@dataclass(frozen=True)
class _File:
    stamp: tuple[int, int]  # (mtime_ns, size) when read
    body: bytes
    etag: str
    media_type: str


class WebFiles:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory).resolve()
        self._files: dict[str, _File] = {}

    def _path(self, url_path: str) -> Path | None:
        parts = [p for p in url_path.split("/") if p]
        if any(p in ("..", ".") or p.startswith(".") or "\\" in p or "\0" in p for p in parts):
            return None
        path = self.directory.joinpath(*parts)
        if url_path.endswith("/") or not parts:
            path = path / "index.html"
        return path

    def _load(self, path: Path) -> _File | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):  # a directory, a device: not a file of the site
            return None
        key, stamp = str(path), (st.st_mtime_ns, st.st_size)
        cached = self._files.get(key)
        if cached is not None and cached.stamp == stamp:
            return cached
        try:
            body = path.read_bytes()
        except OSError:
            return None
        media_type = _TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        loaded = _File(stamp, body, '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"', media_type)
        self._files[key] = loaded
        return loaded

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        method = scope["method"]
        if method not in ("GET", "HEAD"):
            await _answer(send, 405, b"method not allowed", [(b"allow", b"GET, HEAD")])
            return
        route = scope["path"]  # under the mount: what follows its root path
        root = scope.get("root_path", "")
        if root and route.startswith(root):
            route = route[len(root):]
        path = self._path(route)
        found = self._load(path) if path is not None else None
        if found is None and path is not None and not route.endswith("/") and path.is_dir():
            found = self._load(path / "index.html")
        if found is None:
            await _answer(send, 404, b"not found", [])
            return
        headers = [(b"etag", found.etag.encode()), (b"cache-control", b"no-cache")]
        if _matches(scope, found.etag):
            await _answer(send, 304, b"", headers)
            return
        headers.append((b"content-type", found.media_type.encode()))
        await _answer(send, 200, b"" if method == "HEAD" else found.body, headers, length=len(found.body))


def _matches(scope: Scope, etag: str) -> bool:
    for name, value in scope.get("headers", []):
        if name == b"if-none-match":
            return etag in [v.strip() for v in value.decode("latin-1").split(",")] or value.strip() == b"*"
    return False


async def _answer(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]],
                  length: int | None = None) -> None:
    if status != 304:
        headers = [*headers, (b"content-length", str(len(body) if length is None else length).encode())]
        if status >= 400:
            headers.append((b"content-type", b"text/plain; charset=utf-8"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if status == 304 else body})
