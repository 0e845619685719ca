"""The HTTP API of docs/protocol.md against a live daemon."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading

import httpx
import pytest

from protocols.client import SessionClient
from protocols.http import CreateSessionResponse
from sessiond.store import MemoryStore
from tests.conftest import off_loop, running_daemon, tiny_engine
from tests.e2e._util import collect_frames, session_client


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_create_returns_201_with_the_session_and_its_urls(daemon) -> None:
    r = httpx.post(f"{daemon.url}/v1/sessions", json={"mode": "director", "prompt": "a lake", "seed": 3})
    assert r.status_code == 201
    body = r.json()
    sid = body["session_id"]
    assert set(body) == {"session_id", "token", "mode", "model", "width", "height", "fps", "action_space",
                         "ws_url", "webrtc_url"}
    assert (body["mode"], body["model"], body["width"], body["height"], body["fps"]) == ("director", "tiny", 32, 32, 16)
    assert body["ws_url"] == f"ws://127.0.0.1:{daemon.url.rsplit(':', 1)[1]}/v1/sessions/{sid}/ws"
    assert body["webrtc_url"] == f"{daemon.url}/v1/sessions/{sid}/webrtc"
    assert len(body["token"]) >= 43  # 256 random bits, url-safe base64
    assert body["action_space"]["keys"][:4] == ["w", "a", "s", "d"]
    other = httpx.post(f"{daemon.url}/v1/sessions", json={"mode": "world"}).json()
    assert other["token"] != body["token"]
    for b in (body, other):
        assert httpx.delete(f"{daemon.url}/v1/sessions/{b['session_id']}", headers=_auth(b["token"])).status_code == 204


def test_status_then_delete_then_404(daemon) -> None:
    body = httpx.post(f"{daemon.url}/v1/sessions", json={"mode": "world"}).json()
    url = f"{daemon.url}/v1/sessions/{body['session_id']}"
    status = httpx.get(url, headers=_auth(body["token"]))
    assert status.status_code == 200
    s = status.json()
    assert (s["session_id"], s["mode"], s["state"], s["frames_sent"], s["pts"], s["segment"]) == (
        body["session_id"], "world", "idle", 0, 0, 0)
    assert s["created_at"] <= s["last_active_at"]
    assert httpx.get(f"{url}?token={body['token']}").status_code == 200  # ?token= works too
    assert httpx.delete(url, headers=_auth(body["token"])).status_code == 204
    gone = httpx.get(url, headers=_auth(body["token"]))
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found"
    assert httpx.delete(url, headers=_auth(body["token"])).status_code == 404


async def test_a_delete_while_a_position_write_is_in_flight_leaves_no_position_behind(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async with off_loop(running_daemon(policy="kv")) as d, httpx.AsyncClient(base_url=d.url) as http:
        store = d.daemon.store
        assert isinstance(store, MemoryStore)
        write = store.put_position
        held, release = threading.Event(), threading.Event()

        async def held_write(session_id: str, frames: int) -> None:
            if not held.is_set():  # the first position write waits until the test lets it land
                held.set()
                await asyncio.to_thread(release.wait, 20)
            await write(session_id, frames)

        monkeypatch.setattr(store, "put_position", held_write)
        client = SessionClient(timeout_s=20.0)
        try:
            await client.create(d.url, "world")
            await client.connect()
            assert await asyncio.to_thread(held.wait, 20)
            sid, token = client.session.session_id, client.session.token
            deleting = asyncio.ensure_future(http.delete(f"/v1/sessions/{sid}", headers=_auth(token)))
            await asyncio.sleep(0.3)
            assert not deleting.done()  # the close waits for the write in flight
            release.set()
            assert (await asyncio.wait_for(deleting, 20)).status_code == 204
            assert await store.get_position(sid) is None and await store.get_session(sid) is None
        finally:
            release.set()
            await client.aclose()


def test_a_wrong_or_missing_token_is_401_and_reveals_nothing(daemon) -> None:
    body = httpx.post(f"{daemon.url}/v1/sessions", json={"mode": "world"}).json()
    url = f"{daemon.url}/v1/sessions/{body['session_id']}"
    for headers in ({"Authorization": "Bearer nope"}, {}, {"Authorization": "Basic abc"}):
        r = httpx.get(url, headers=headers)
        assert r.status_code == 401
        assert r.json() == {"error": {"code": "unauthorized", "message": "missing or wrong session token"}}
        assert httpx.delete(url, headers=headers).status_code == 401
    assert httpx.get(url, headers=_auth(body["token"])).status_code == 200  # still there
    httpx.delete(url, headers=_auth(body["token"]))


@pytest.mark.parametrize(("raw", "code", "field"), [
    pytest.param(b"{not json", "bad_message", None, id="not-json"),
    pytest.param(b"[1, 2]", "bad_message", None, id="not-an-object"),
    pytest.param(b'{"prompt": "x"}', "invalid_field", "mode", id="no-mode"),
    pytest.param(b'{"mode": "cinema"}', "invalid_field", "mode", id="unknown-mode"),
    pytest.param(b'{"mode": "world", "seed": "7"}', "invalid_field", "seed", id="seed-a-string"),
    pytest.param(b'{"mode": "world", "width": 640}', "invalid_field", "width", id="width-not-the-models"),
    pytest.param(b'{"mode": "world", "model": "wan-1.3b"}', "invalid_field", "model", id="model-not-served"),
    pytest.param(b'{"mode": "world", "fps": 0}', "invalid_field", "fps", id="fps-zero"),
])
def test_a_bad_create_body_is_400_naming_the_field(daemon, raw: bytes, code: str, field: str | None) -> None:
    r = httpx.post(f"{daemon.url}/v1/sessions", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert (err["code"], err.get("field")) == (code, field)


async def test_health_readiness_metrics_capacity_and_the_web_client(daemon) -> None:
    async with session_client(daemon.url, "world") as client:
        await client.send_action(["w"])
        await collect_frames(client, 24)
    async with httpx.AsyncClient(base_url=daemon.url) as http:
        assert (await http.get("/healthz")).json() == {"status": "ok"}
        assert (await http.get("/readyz")).json() == {"status": "ready", "model": "tiny"}
        metrics = await http.get("/metrics")
        cap = (await http.get("/v1/capacity")).json()
        page = await http.get("/")
    assert metrics.status_code == 200
    for name in ("sessiond_sessions{state=\"idle\"}", "sessiond_frames_generated_total", "sessiond_frames_sent_total",
                 "sessiond_step_seconds_bucket", "sessiond_chunk_seconds_bucket", "sessiond_output_queue_frames",
                 "sessiond_action_to_photon_seconds_bucket", "sessiond_kv_slabs", "sessiond_engine_queue_depth"):
        assert name in metrics.text, name
    sent = next(line for line in metrics.text.splitlines() if line.startswith("sessiond_frames_sent_total"))
    assert float(sent.split()[1]) >= 24
    assert cap["ready"] is True and cap["model"] == "tiny" and cap["model_fallback"] is None
    assert cap["engine"]["frames_per_chunk"] == 8 and cap["admission"]["policy"] == "duty"  # the default
    # the tiny model runs in fp32, where "auto" has SDPA alone to measure: SDPA, nothing timed
    assert (cap["engine"]["attention"], cap["engine"]["attention_timings_ms"]) == ("sdpa", {})
    assert cap["store"] == {"kind": "memory", "healthy": True}
    assert cap["prompt_examples"] == []  # the tiny model names none (and the create response leaves them out)
    assert page.status_code == 200 and "<html" in page.text.lower()


class _SlowWarmEngine:
    """The real tiny engine whose warmup waits for the test (a fake only in its warmup timing)."""

    def __init__(self, engine: object, release: threading.Event) -> None:
        self._engine = engine
        self._release = release
        self.ready = False

    def warmup(self) -> None:
        self._release.wait(30)
        self.ready = True

    def __getattr__(self, name: str) -> object:
        return getattr(self._engine, name)


def test_readyz_is_503_and_create_refused_until_the_engine_is_warm() -> None:
    release = threading.Event()
    engine = _SlowWarmEngine(tiny_engine(), release)
    with running_daemon(engine, wait=False) as d:
        r = httpx.get(f"{d.url}/readyz")
        assert r.status_code == 503 and r.json()["status"] == "not_ready"
        create = httpx.post(f"{d.url}/v1/sessions", json={"mode": "world"})
        assert create.status_code == 503
        assert (create.json()["error"]["code"], create.json()["error"]["reason"]) == ("capacity", "not_ready")
        assert create.headers["retry-after"] == "1"
        release.set()
        d.wait_ready()
        assert httpx.post(f"{d.url}/v1/sessions", json={"mode": "world"}).status_code == 201


class _ExamplesEngine:
    """The real tiny engine, naming two example prompts in its info (as the demo model names its themes)."""

    def __init__(self, engine: object) -> None:
        self._engine = engine
        self.info = dataclasses.replace(engine.info, prompt_examples=("a snowy day", "desert dunes"))  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._engine, name)


async def test_the_models_example_prompts_are_in_create_welcome_and_capacity() -> None:
    async with off_loop(running_daemon(_ExamplesEngine(tiny_engine()))) as d, httpx.AsyncClient() as http:
        body = (await http.post(f"{d.url}/v1/sessions", json={"mode": "director"})).json()
        assert body["prompt_examples"] == ["a snowy day", "desert dunes"]
        async with SessionClient() as client:
            client.attach(d.url, CreateSessionResponse.from_json(body))
            session = dict((await client.connect()).session)
            await client.disconnect()
        assert session["prompt_examples"] == ["a snowy day", "desert dunes"]
        # the create response minus the token, and (an extension) the connection's role
        assert session == {k: v for k, v in body.items() if k != "token"} | {"role": "owner"}
        assert (await http.get(f"{d.url}/v1/capacity")).json()["prompt_examples"] == ["a snowy day", "desert dunes"]
        await http.delete(f"{d.url}/v1/sessions/{body['session_id']}", headers=_auth(body["token"]))


class _LeadEngine:
    """The real tiny engine, advising one chunk of world lead in its info (as the demo model does)."""

    def __init__(self, engine: object) -> None:
        self._engine = engine
        self.info = dataclasses.replace(engine.info, lead_chunks=1.0)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._engine, name)


@pytest.mark.parametrize(("flag", "expected"), [(None, 1.0), (3.0, 3.0)])
async def test_world_lead_is_the_models_advice_unless_the_flag_sets_it(flag: float | None, expected: float) -> None:
    async with off_loop(running_daemon(_LeadEngine(tiny_engine()), lead_chunks=flag)) as d, httpx.AsyncClient() as http:
        assert (await http.get(f"{d.url}/v1/capacity")).json()["engine"]["lead_chunks"] == expected
        body = (await http.post(f"{d.url}/v1/sessions", json={"mode": "world"})).json()
        assert d.daemon.sessions[body["session_id"]].env.lead_chunks == expected
        await http.delete(f"{d.url}/v1/sessions/{body['session_id']}", headers=_auth(body["token"]))


async def test_no_log_line_carries_a_token(daemon, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    async with httpx.AsyncClient() as http:
        body = (await http.post(f"{daemon.url}/v1/sessions", json={"mode": "world"})).json()
    async with SessionClient() as client:
        client.attach(daemon.url, CreateSessionResponse.from_json(body))
        await client.connect()
        await client.send_action(["w"])
        await client.disconnect()
        await client.close_session()
    ours = ("sessiond", "transports", "engine", "uvicorn", "protocols")
    lines = [r.getMessage() + repr(r.__dict__) for r in caplog.records if r.name.startswith(ours)]
    assert any(body["session_id"] in line for line in lines)  # lifecycle lines were logged
    assert not any(body["token"] in line for line in lines)


def test_webrtc_signalling_checks_token_session_and_offer(daemon) -> None:
    body = httpx.post(f"{daemon.url}/v1/sessions", json={"mode": "world"}).json()
    url = f"{daemon.url}/v1/sessions/{body['session_id']}/webrtc"
    offer = {"sdp": "v=0\r\nthis is not an offer\r\n", "type": "offer"}
    assert httpx.post(url, json=offer, headers={"Authorization": "Bearer nope"}).status_code == 401
    missing = url.replace(body["session_id"], "s_0000000000000000")
    assert httpx.post(missing, json=offer, headers=_auth(body["token"])).status_code == 404
    bad = httpx.post(url, json=offer, headers=_auth(body["token"]), timeout=20)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_field"
    no_body = httpx.post(url, json={"type": "offer"}, headers=_auth(body["token"]))
    assert no_body.status_code == 400 and no_body.json()["error"]["field"] == "sdp"
    status = httpx.get(f"{daemon.url}/v1/sessions/{body['session_id']}", headers=_auth(body["token"]))
    assert status.json()["state"] == "idle"  # a refused offer leaves the session as it was
    httpx.delete(f"{daemon.url}/v1/sessions/{body['session_id']}", headers=_auth(body["token"]))


async def test_a_gateway_origin_may_post_a_webrtc_offer_when_allowed_and_no_other() -> None:
    preflight = {"Origin": "http://gw:8000", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization,content-type"}
    async with off_loop(running_daemon(tiny_engine(), cors_origins=("http://gw:8000",))) as d, \
            httpx.AsyncClient() as http:
        ok = await http.options(f"{d.url}/v1/sessions/s_x/webrtc", headers=preflight)
        assert ok.status_code == 200
        assert ok.headers["access-control-allow-origin"] == "http://gw:8000"
        assert "authorization" in ok.headers["access-control-allow-headers"].lower()
        other = await http.options(f"{d.url}/v1/sessions/s_x/webrtc", headers={**preflight, "Origin": "http://evil:1"})
        assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    async with off_loop(running_daemon(tiny_engine())) as d, httpx.AsyncClient() as http:  # default: none
        plain = await http.options(f"{d.url}/v1/sessions/s_x/webrtc", headers=preflight)
        assert "access-control-allow-origin" not in plain.headers
