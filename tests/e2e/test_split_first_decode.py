"""A model whose first chunk decodes in two parts (first frame alone, as wan-1.3b does) served by
the daemon: one timeline from pts 0, and interrupts at any point leave no stale frame."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from engine.config import tiny_config
from engine.decoders.wan_vae import WanVAEConfig
from protocols.messages import Frame
from tests.conftest import running_daemon
from tests.e2e._util import assert_timeline, collect_for, collect_frames, session_client
from tests.e2e.test_interrupts import check_no_stale

pytestmark = pytest.mark.slow  # each test streams a split first chunk through a daemon (~1.6 s)

MODEL = "tiny+wan-vae-split-e2e"


@pytest.fixture(scope="module")
def split_daemon() -> Iterator[Any]:
    from engine.engine import Engine

    config = tiny_config().with_overrides(name=MODEL, decoder_kind="wan_vae", first_decode_split=1,
                                          extra={"wan_vae": WanVAEConfig.tiny()})
    engine = Engine.create(model=config, device="cpu", kv_budget_bytes=4 << 20)
    engine.warmup()
    with running_daemon(engine) as running:
        yield running


async def test_the_split_first_chunk_starts_one_unbroken_timeline_at_pts_zero(split_daemon: Any) -> None:
    async with session_client(split_daemon.url, "world", prompt="a harbour", seed=3) as client:
        frames = await collect_frames(client, 21)  # chunk 0: 1 + 4 frames; then 8 per chunk
        assert_timeline(frames, client.session.fps)
        assert frames[0].pts == 0
        assert all(not f.disc for f in frames)


@pytest.mark.parametrize("after_frames", [1, 5, 9])
async def test_interrupts_around_the_split_first_chunk_leave_no_stale_frame(split_daemon: Any, after_frames: int) -> None:
    async with session_client(split_daemon.url, "world", prompt="a harbour", seed=5) as client:
        seen: list[object] = list(await collect_frames(client, after_frames))
        await client.interrupt()
        seen += await collect_for(client, 1.5)
        frames, acks = check_no_stale(seen, client.session.fps)
        assert acks == 1 and frames > after_frames
        assert any(isinstance(m, Frame) and m.disc for m in seen)
