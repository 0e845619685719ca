"""The web client's files from memory (`httpapi.static.WebFiles`): the bytes of the file with its
type, `/` as index.html, an ETag answered 304, an edited file served at once, and nothing outside
the directory, hidden, or by another method."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from httpapi.static import WebFiles


@dataclass
class Reply:
    status_code: int
    headers: dict[str, str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode()


class Client:
    """Calls the ASGI app as a server would (one request, its start and body messages)."""

    def __init__(self, app: WebFiles) -> None:
        self.app = app

    def request(self, method: str, path: str, headers: dict[str, str] | None = None) -> Reply:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": method, "path": path, "root_path": "",
                 "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]}
        asyncio.run(self.app(scope, receive, send))
        start, body = sent
        return Reply(start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, body["body"])

    def get(self, path: str, headers: dict[str, str] | None = None) -> Reply:
        return self.request("GET", path, headers)

    def head(self, path: str) -> Reply:
        return self.request("HEAD", path)

    def post(self, path: str) -> Reply:
        return self.request("POST", path)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "index.html").write_text("<p>home</p>")
    (tmp_path / "app.js").write_text("export const x = 1;\n")
    (tmp_path / "style.css").write_text("body{}")
    (tmp_path / ".secret").write_text("no")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "index.html").write_text("<p>sub</p>")
    (tmp_path.parent / "outside.txt").write_text("outside")
    return tmp_path


@pytest.fixture
def client(site: Path) -> Client:
    return Client(WebFiles(site))


def test_files_come_with_their_bytes_type_and_etag(client: Client) -> None:
    got = client.get("/app.js")
    assert got.status_code == 200 and got.content == b"export const x = 1;\n"
    assert got.headers["content-type"] == "text/javascript; charset=utf-8"
    assert got.headers["cache-control"] == "no-cache" and got.headers["etag"].startswith('"')
    assert got.headers["content-length"] == "20"
    assert client.get("/style.css").headers["content-type"] == "text/css; charset=utf-8"
    home = client.get("/")
    assert (home.status_code, home.text, home.headers["content-type"]) == (200, "<p>home</p>",
                                                                           "text/html; charset=utf-8")
    assert client.get("/sub/").text == "<p>sub</p>" and client.get("/sub").text == "<p>sub</p>"
    head = client.head("/app.js")
    assert (head.status_code, head.content, head.headers["content-length"]) == (200, b"", "20")


def test_a_matching_etag_is_answered_304_and_an_edited_file_at_once(client: Client, site: Path) -> None:
    etag = client.get("/app.js").headers["etag"]
    again = client.get("/app.js", headers={"If-None-Match": etag})
    assert (again.status_code, again.content, again.headers["etag"]) == (304, b"", etag)
    (site / "app.js").write_text("export const x = 22;\n")
    os.utime(site / "app.js", ns=(1, 1))  # another mtime even within the clock's resolution
    edited = client.get("/app.js", headers={"If-None-Match": etag})
    assert (edited.status_code, edited.text) == (200, "export const x = 22;\n")
    assert edited.headers["etag"] != etag


@pytest.mark.parametrize("path", ["/../outside.txt", "/./../outside.txt", "/.secret", "/missing.js",
                                  "/sub/../../outside.txt", "/app.js/x"])
def test_nothing_outside_the_directory_hidden_or_missing_is_served(client: Client, path: str) -> None:
    got = client.get(path)
    assert got.status_code == 404 and got.text == "not found"


def test_only_get_and_head(client: Client) -> None:
    got = client.post("/app.js")
    assert (got.status_code, got.headers["allow"]) == (405, "GET, HEAD")
