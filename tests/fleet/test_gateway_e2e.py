"""Three workers (stand-in daemons) + two gateways + a real redis-server + Dynamo file discovery,
all on loopback: creates spread over the workers until every one refuses (503, Retry-After), any
gateway finds any session, a killed gateway leaves the other serving, and a SIGTERMed worker moves
its sessions to the others under the epoch fence before it exits."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from typing import Any

import httpx
import pytest

from fleet.directory import RedisDirectory
from fleet.messages import Binding
from tests.conftest import RedisServer, find_free_port

from .conftest import Processes, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.redis]


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _workers(url: str) -> list[dict[str, Any]]:
    return list(httpx.get(f"{url}/v1/capacity", timeout=5).json()["workers"])


def _bindings(redis_url: str, sids: list[str]) -> dict[str, Binding | None]:
    async def go() -> dict[str, Binding | None]:
        d = RedisDirectory(redis_url)
        try:
            return {sid: await d.lookup(sid) for sid in sids}
        finally:
            await d.close()
    return asyncio.run(go())


def test_two_gateways_three_workers(processes: Processes, redis_server: RedisServer,
                                    discovery_env: dict[str, str]) -> None:
    keys = ["h1/cuda:0", "h1/cuda:1", "h2/cuda:0"]
    workers = [processes.start("-m", "tests.fleet._standin", key, "2", redis_server.url) for key in keys]
    gateways = []
    for _ in range(2):
        port = find_free_port()
        proc = processes.start("-m", "fleet.gateway_cli", "--redis", redis_server.url, "--port", str(port),
                               "--discovery-dir", discovery_env["DYN_FILE_KV"], "--rpc-host", "127.0.0.1")
        gateways.append((proc, f"http://127.0.0.1:{port}"))
    urls = [url for _, url in gateways]
    for url in urls:
        wait_for(lambda url=url: _ready(url) and len(_workers(url)) == 3, 60, f"gateway {url} seeing 3 workers")

    # six creates over both gateways fill the three workers two by two
    created = []
    for i in range(6):
        r = httpx.post(f"{urls[i % 2]}/v1/sessions", json={"mode": "world"}, timeout=10)
        assert r.status_code == 201, r.text
        created.append(r.json())
    hosts = Counter(c["ws_url"].split("/")[2] for c in created)
    assert hosts == {"h1-cuda0.test": 2, "h1-cuda1.test": 2, "h2-cuda0.test": 2}
    assert all(c["ws_url"].startswith("ws://") and c["webrtc_url"].startswith("http://") for c in created)

    full = httpx.post(f"{urls[0]}/v1/sessions", json={"mode": "director"}, timeout=10)
    assert full.status_code == 503
    assert full.headers["Retry-After"] == "3"
    assert full.json()["error"]["code"] == "capacity"
    assert full.json()["error"]["retry_after_s"] == 3.0
    bad = httpx.post(f"{urls[1]}/v1/sessions", json={"mode": "chess"}, timeout=10)
    assert (bad.status_code, bad.json()["error"]["field"]) == (400, "mode")

    # either gateway finds any session on its worker; the token is checked there
    first = created[0]
    auth = {"authorization": f"Bearer {first['token']}"}
    for url in urls:
        got = httpx.get(f"{url}/v1/sessions/{first['session_id']}", headers=auth, timeout=10)
        assert got.status_code == 200 and got.json()["session_id"] == first["session_id"]
    wrong = httpx.get(f"{urls[1]}/v1/sessions/{first['session_id']}", headers={"authorization": "Bearer nope"},
                      timeout=10)
    assert wrong.status_code == 401
    assert httpx.get(f"{urls[0]}/v1/sessions/s-unknown", timeout=10).status_code == 404

    # a gateway dies: the other serves, deletes free slots on the workers
    gateways[0][0].kill()
    gateways[0][0].wait(10)
    for c in created[:2]:
        gone = httpx.delete(f"{urls[1]}/v1/sessions/{c['session_id']}",
                            headers={"authorization": f"Bearer {c['token']}"}, timeout=10)
        assert gone.status_code == 204
        assert httpx.get(f"{urls[1]}/v1/sessions/{c['session_id']}", timeout=10).status_code == 404

    # a worker told to stop moves its sessions to workers with room, then leaves
    doomed = keys[2]
    on_doomed = [c for c in created if c["ws_url"].split("/")[2] == "h2-cuda0.test"]
    assert len(on_doomed) == 2
    wait_for(lambda: sum(w["sessions"] for w in _workers(urls[1])) == 4, 10, "records after the deletes")
    workers[2].send_signal(signal.SIGTERM)
    assert workers[2].wait(30) == 0
    moved = _bindings(redis_server.url, [c["session_id"] for c in on_doomed])
    for sid, binding in moved.items():
        assert binding is not None and binding.worker in keys[:2] and binding.epoch == 2, (sid, binding)
    assert [w["worker"] for w in _workers(urls[1])] == keys[:2]
    for c in on_doomed:
        got = httpx.get(f"{urls[1]}/v1/sessions/{c['session_id']}",
                        headers={"authorization": f"Bearer {c['token']}"}, timeout=10)
        assert got.status_code == 200, got.text
    assert doomed not in {b.worker for b in moved.values() if b}
