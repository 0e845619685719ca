"""media=fmp4 through the live daemon: an init segment first, then media fragments that cover
the session timeline frame for frame."""

from __future__ import annotations

from protocols.client import SessionClient
from protocols.messages import Init, Media, SegmentEnd
from protocols.timeline import pts_for
from tests.e2e._util import collect


async def test_a_director_segment_streams_as_init_then_fragments_on_the_timeline(daemon) -> None:
    client = SessionClient(timeout_s=20.0)
    await client.create(daemon.url, "director")
    await client.connect(media="fmp4")
    try:
        await client.direct("a quiet street", seconds=1)
        msgs = await collect(client, lambda m: any(isinstance(x, SegmentEnd) for x in m))
        inits = [m for m in msgs if isinstance(m, Init)]
        media = [m for m in msgs if isinstance(m, Media)]
        assert len(inits) == 1 and inits[0].codec.startswith("avc1.") and msgs.index(inits[0]) < msgs.index(media[0])
        covered = [i for m in media for i in range(m.idx, m.idx + m.n)]
        assert covered == list(range(16))  # 1 s at 16 fps, none missing, none twice
        assert all(m.pts == pts_for(m.idx, 16) and m.dur == pts_for(m.idx + m.n, 16) - m.pts for m in media)
        end = next(m for m in msgs if isinstance(m, SegmentEnd))
        assert (end.frames, end.status) == (16, "done")
    finally:
        await client.close_session()
        await client.aclose()
