"""Execution strategies through a real daemon: the decoder on a second CPU "device" (its own worker
thread) serves a world session over a raw WebSocket with the frames of the default strategy; two
replicas serve two sessions, one each; a strategy over the machine is refused before anything
starts (the port stays free)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from protocols.client import SessionClient
from protocols.messages import Frame, Received
from tests.conftest import ROOT, find_free_port, off_loop, running_daemon
from tests.e2e._raw import RawConn
from tests.e2e._util import collect_for, collect_frames, session_client
from tests.e2e.test_interrupts import check_no_stale

pytestmark = pytest.mark.slow  # each test starts daemons that build their own engines (~2 s each)

STRATEGIES = ROOT / "strategies"
FRAMES = 26  # the tiny model's first chunks: more than three of them


async def _raw_world_frames(url: str, seed: int, n: int) -> list[Frame]:
    """A world session's first n frames over a bare WebSocket (each acknowledged as it arrives)."""
    client = SessionClient(timeout_s=20.0)
    created = await client.create(url, "world", prompt="a lighthouse on a cliff", seed=seed)
    conn = await RawConn.open(created.ws_url, created.token)
    frames: list[Frame] = []
    try:
        while len(frames) < n:
            frame = await conn.next_of(Frame, timeout_s=30.0)
            frames.append(frame)
            await conn.send(Received(frame.idx))
    finally:
        await conn.close()
        await client.close_session()
        await client.aclose()
    return frames


async def test_a_decoder_on_a_second_cpu_device_serves_the_default_strategys_frames() -> None:
    async with off_loop(running_daemon(fresh_engine=True, policy="kv")) as default:
        want = await _raw_world_frames(default.url, 11, FRAMES)
    strategy = str(STRATEGIES / "decoder-device.toml")
    async with off_loop(running_daemon(fresh_engine=True, policy="kv", strategy=strategy)) as placed:
        async with httpx.AsyncClient() as http:
            capacity = (await http.get(f"{placed.url}/v1/capacity")).json()
        got = await _raw_world_frames(placed.url, 11, FRAMES)
    assert capacity["strategy"]["name"] == "decoder-device"
    assert capacity["strategy"]["path"] == strategy
    assert capacity["strategy"]["stages"]["decoder"] == {"process": "engine", "device": "cpu:1",
                                                        "stream": "default", "threads": 1}
    assert capacity["strategy"]["decoder"] == "its own worker thread on cpu:1"
    assert [(f.idx, f.pts, f.w, f.h) for f in got] == [(f.idx, f.pts, f.w, f.h) for f in want]
    assert [f.data for f in got] == [f.data for f in want]  # identical pixels, frame by frame


@pytest.mark.parametrize("after_frames", [3, 9])
async def test_interrupts_with_the_decoder_on_a_second_device_leave_no_stale_frame(after_frames: int) -> None:
    strategy = str(STRATEGIES / "decoder-device.toml")  # the default policy: its profile runs the placed decoder
    async with (off_loop(running_daemon(fresh_engine=True, strategy=strategy)) as running,
                session_client(running.url, "world", prompt="a harbour", seed=5) as client):
        seen: list[object] = list(await collect_frames(client, after_frames))
        await client.interrupt()
        seen += await collect_for(client, 1.5)
        frames, acks = check_no_stale(seen, client.session.fps)
    assert acks == 1 and frames > after_frames
    assert any(isinstance(m, Frame) and m.disc for m in seen)


async def test_two_replicas_serve_two_sessions_one_each() -> None:
    strategy = str(STRATEGIES / "two-replicas.toml")  # under the default policy: its cost model profiles them
    async with off_loop(running_daemon(fresh_engine=True, strategy=strategy)) as running:
        host = running.daemon.host
        async with session_client(running.url, "world", seed=1) as a, session_client(running.url, "world", seed=2) as b:
            frames_a = await collect_frames(a, 9)
            frames_b = await collect_frames(b, 9)
            replicas = {host.replica_of(a.session.session_id), host.replica_of(b.session.session_id)}
            async with httpx.AsyncClient() as http:
                capacity = (await http.get(f"{running.url}/v1/capacity")).json()
    assert replicas == {0, 1}
    assert capacity["strategy"]["engine"]["replicas"] == 2
    assert capacity["strategy"]["engine"]["sessions_per_replica"] == [1, 1]
    assert capacity["strategy"]["cost_model_profiled_with_it"] is True
    assert capacity["kv"]["slabs_total"] == 2 * host.hosts[0]._require().kv_stats().slabs_total
    assert [f.idx for f in frames_a[:9]] == list(range(9)) and [f.idx for f in frames_b[:9]] == list(range(9))


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@pytest.mark.parametrize(("text", "message"), [
    ('[engine]\nreplicas = 2\nmemory_fractions = [0.6, 0.6]\n',
     "sessiond serve: strategy.engine.memory_fractions: the replicas' shares add up to 1.2 of one device; at most 1"),
    ('[engine]\nreplicas = 2\nmemory_fractions = [0.999, 0.001]\n',
     "sessiond serve: strategy.engine.memory_fractions[1]: 0.001 of the KV budget 4194304 is 4194 bytes and holds "
     "no session; one needs {session}"),
    ('[stages.decoder]\ndevice = "cuda:7"\n',
     'sessiond serve: strategy.stages.decoder.device: "cuda:7" but this machine has 0 GPUs'),
])
def test_a_strategy_the_machine_cannot_hold_is_refused_before_anything_starts(tmp_path: Path, text: str,
                                                                               message: str) -> None:
    from engine.catalog import core_catalog
    from engine.kv import SlabGeometry
    from engine.weights import DTYPES

    tiny = core_catalog().config("tiny")
    session = SlabGeometry(tiny.num_layers, tiny.tokens_per_chunk, tiny.num_heads, tiny.head_dim,
                           DTYPES["float32"]).slab_bytes * tiny.context_chunks
    path = tmp_path / "over.toml"
    path.write_text(text)
    port = find_free_port()
    done = subprocess.run([sys.executable, "-m", "sessiond.cli", "serve", "--model", "tiny", "--device", "cpu",
                           "--port", str(port), "--kv-budget-bytes", str(4 << 20), "--strategy", str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stdout.strip().splitlines()[-1] == message.format(session=session)
    assert "engine ready" not in done.stdout + done.stderr
    assert _port_free(port)
