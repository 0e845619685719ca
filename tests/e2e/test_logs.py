"""Tokens never reach a log line: not the server's request lines (URLs with ?token=), not the
daemon's own lines, whoever configured the log handlers."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest
import websockets

from protocols.codec import decode, encode
from protocols.messages import PROTOCOL_VERSION, Direct, Hello, SegmentEnd
from sessiond.api.server import uvicorn_config
from sessiond.config import ServeConfig
from tests.conftest import daemon_process, off_loop


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def test_the_servers_request_lines_are_redacted_before_any_handler_sees_them() -> None:
    uvicorn_config(object(), ServeConfig())  # what serve (and every embedding) builds the server with
    server_logger = logging.getLogger("uvicorn.error")
    handler = _Lines()  # a host application's handler: no filter of ours on it
    server_logger.addHandler(handler)
    level = server_logger.level
    server_logger.setLevel(logging.INFO)
    try:
        server_logger.info('%s - "WebSocket %s" [accepted]', "127.0.0.1:5000",
                           "/v1/sessions/s_1/ws?media=fmp4&token=sekrit-Token_123")
    finally:
        server_logger.removeHandler(handler)
        server_logger.setLevel(level)
    assert handler.lines == ['127.0.0.1:5000 - "WebSocket /v1/sessions/s_1/ws?media=fmp4&token=<redacted>" [accepted]']


@pytest.mark.slow
async def test_a_served_sessions_whole_log_output_never_contains_its_token(tmp_path: Path) -> None:
    log = tmp_path / "daemon.log"
    async with off_loop(daemon_process(log=log)) as (url, _), httpx.AsyncClient(base_url=url) as http:
        created = (await http.post("/v1/sessions", json={"mode": "director"})).json()
        token = created["token"]
        async with websockets.connect(f"{created['ws_url']}?media=fmp4&token={token}", max_size=None) as ws:
            await ws.send(encode(Hello(v=PROTOCOL_VERSION, client="log-test")))
            await ws.send(encode(Direct(id=1, prompt="a lantern", seconds=0.5)))
            while not isinstance(decode(await ws.recv(), expect="server"), SegmentEnd):
                pass
        assert (await http.get(f"/v1/sessions/{created['session_id']}?token={token}")).status_code == 200
        assert (await http.delete(f"/v1/sessions/{created['session_id']}",
                                  headers={"Authorization": f"Bearer {token}"})).status_code == 204
    text = log.read_text()
    assert token not in text
    assert "ws?media=fmp4&token=<redacted>" in text  # the request line is there, without its token
