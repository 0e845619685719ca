"""`python -m transports.webrtc.watch --webrtc-url URL --token T --seconds S [--warm-s W]`: one
WebRTC viewer (aiortc, host candidates on loopback only) that watches a session for a while and
prints one JSON line: its decoded frames, frames/s over the last S seconds, its first frame's
latency after its offer began and the marks on the way there (`marks_s`, seconds after the
offer began: `offer` made, `answer` back, ICE/DTLS `connected`, the `track`, the first `frame`).
`loadtest.spectators` runs it as a WebRTC spectator process."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from aiortc import RTCConfiguration, RTCPeerConnection
from aiortc.mediastreams import MediaStreamError

from transports.webrtc._jitter import use_marker_jitter
from transports.webrtc._offer import http_client, offer_and_answer

__all__ = ["main", "watch"]


async def watch(webrtc_url: str, token: str, start: float, stop: float) -> dict[str, Any]:
    """Watch from now until `stop` (monotonic); frames from `start` on are counted for frames/s."""
    out: dict[str, Any] = {"media": "webrtc"}
    http = http_client(webrtc_url, 20.0)
    began = time.monotonic()
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    use_marker_jitter(pc.addTransceiver("video", direction="recvonly"))
    pc.createDataChannel("control")
    tracks: asyncio.Queue[Any] = asyncio.Queue()
    marks: dict[str, float] = {}
    out["marks_s"] = marks

    def mark(name: str, at: float | None = None) -> None:
        marks.setdefault(name, round((time.monotonic() if at is None else at) - began, 4))

    @pc.on("track")
    def on_track(track: Any) -> None:
        mark("track")
        tracks.put_nowait(track)

    @pc.on("connectionstatechange")
    def on_state() -> None:
        if pc.connectionState == "connected":
            mark("connected")

    frames = counted = 0
    try:
        refused = await offer_and_answer(pc, webrtc_url, token, 20.0, http=http, mark=mark)
        if refused is not None:
            out["error"] = refused
            return out
        track = await asyncio.wait_for(tracks.get(), max(0.1, stop - time.monotonic()))
        while time.monotonic() < stop:
            try:
                await asyncio.wait_for(track.recv(), max(0.01, stop - time.monotonic()))
            except (TimeoutError, MediaStreamError):
                break
            if "first_frame_s" not in out:  # one clock reading for both: the mark is the latency rounded
                arrived = time.monotonic()
                out["first_frame_s"] = arrived - began
                mark("frame", arrived)
            frames += 1
            if time.monotonic() >= start:
                counted += 1
    except Exception as exc:  # reported in the line, never a traceback
        out["error"] = repr(exc)[:200]
    finally:
        await pc.close()
        await http.aclose()
    out.update(frames=frames, bytes=0, fps=counted / max(1e-6, stop - start))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m transports.webrtc.watch", description=__doc__.split("\n\n")[0])
    ap.add_argument("--webrtc-url", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds counted for frames/s")
    ap.add_argument("--warm-s", type=float, default=0.0, help="seconds watched before counting")
    args = ap.parse_args(argv)

    async def run() -> dict[str, Any]:
        now = time.monotonic()
        cpu0 = time.process_time()
        report = await watch(args.webrtc_url, args.token, now + args.warm_s, now + args.warm_s + args.seconds)
        return {"spectators": [report], "cpu_s": time.process_time() - cpu0}

    print(json.dumps(asyncio.run(run())), flush=True)


if __name__ == "__main__":
    main()
