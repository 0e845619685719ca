"""`python -m transports.webrtc.play --webrtc-url URL --token T --fps F --until T_END`: one player
over its own WebRTC peer (aiortc, host candidates on loopback only) that sends an action every
`1/--action-hz` s on its `actions` channel until `--until` (a `time.monotonic()` instant: the same
clock in every process of the machine) and prints one JSON line: every action it sent
(`[seq, sent_at]`) and every video frame it decoded (`[decoded_at, idx, action_seq, players]`, from
the `frames` message that described its pts). `loadtest.coplay --transport webrtc` runs one per
player and measures each one's action-to-photon from these."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from aiortc import RTCConfiguration, RTCPeerConnection
from aiortc.mediastreams import MediaStreamError

from protocols.codec import decode, encode
from protocols.messages import Action, FramesInfo
from protocols.timeline import pts_for
from transports.webrtc._jitter import use_marker_jitter
from transports.webrtc._offer import offer_and_answer

__all__ = ["main", "play"]

_KEYS = (("w",), ("w", "a"), ("a",), ("s",), ("d",), ("w", "d"))


async def play(webrtc_url: str, token: str, fps: int, hz: float, until: float, player: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"sent": [], "frames": []}
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    use_marker_jitter(pc.addTransceiver("video", direction="recvonly"))
    control = pc.createDataChannel("control")
    actions = pc.createDataChannel("actions", ordered=False, maxRetransmits=0)
    meta: dict[int, tuple[int, int, list[int] | None]] = {}  # pts -> (idx, action_seq, players)
    tracks: asyncio.Queue[Any] = asyncio.Queue()
    pc.on("track", tracks.put_nowait)

    def on_message(data: bytes) -> None:
        msg = decode(data, expect="server")
        if isinstance(msg, FramesInfo):
            players = list(msg.players) if msg.players is not None else None
            for i in range(msg.n):
                meta[pts_for(msg.idx + i, fps)] = (msg.idx + i, msg.action_seq, players)

    control.on("message", on_message)
    try:
        refused = await offer_and_answer(pc, webrtc_url, token, 30.0)
        if refused is not None:
            out["error"] = refused
            return out
        track = await asyncio.wait_for(tracks.get(), 30)

        async def send() -> None:
            seq = 0
            while time.monotonic() < until:
                if actions.readyState == "open":
                    seq += 1
                    actions.send(encode(Action(seq=seq, ts=time.time() * 1000.0,
                                               keys=_KEYS[(seq + player) % len(_KEYS)])))
                    out["sent"].append([seq, time.monotonic()])
                await asyncio.sleep(1.0 / hz)

        async def read() -> None:
            while time.monotonic() < until:
                try:
                    frame = await asyncio.wait_for(track.recv(), max(0.01, until - time.monotonic()))
                except (TimeoutError, MediaStreamError):
                    return
                seen = meta.pop(frame.pts, None)
                if seen is not None:
                    out["frames"].append([time.monotonic(), *seen])

        await asyncio.gather(send(), read())
    except Exception as exc:  # reported in the line, never a traceback
        out["error"] = repr(exc)[:200]
    finally:
        await pc.close()
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m transports.webrtc.play", description=__doc__.split("\n\n")[0])
    ap.add_argument("--webrtc-url", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--fps", type=int, required=True, help="the session's fps (pts of each frame's idx)")
    ap.add_argument("--action-hz", type=float, default=10.0)
    ap.add_argument("--until", type=float, required=True, help="time.monotonic() at which to stop")
    ap.add_argument("--player", type=int, default=0, help="varies the keys sent")
    args = ap.parse_args(argv)
    print(json.dumps(asyncio.run(play(args.webrtc_url, args.token, args.fps, args.action_hz, args.until,
                                      args.player))), flush=True)


if __name__ == "__main__":
    main()
