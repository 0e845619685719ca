"""`python -m transports.bench [--json out.json]`: what each transport costs per session.

For 640x352 and 832x480 at 16 fps: CPU ms per frame (fMP4: pack = RGB->YUV + x264 + moof/mdat;
WebRTC: the shared encode + RTP packetizing), the sessions one core sustains at that rate,
and the latency each adds from frame-ready to bytes-on-socket (fMP4: a loopback TCP write
after packing in an executor; WebRTC: the paced stream to RTP payloads), p50/p95.
Targets: fMP4 <= 8 ms, WebRTC <= 12 ms per 832x480 frame; p95 <= 1 frame period.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from dataclasses import asdict, dataclass

from transports._bench_cases import Case, cpu_fmp4, cpu_webrtc, latency_fmp4, latency_webrtc, scene

__all__ = ["Row", "main", "measure"]

TARGET_MS = {"fmp4": 8.0, "webrtc": 12.0}


@dataclass(frozen=True)
class Row:
    transport: str
    size: str
    fps: int
    cpu_ms_per_frame: float
    sessions_per_core: int
    latency_p50_ms: float
    latency_p95_ms: float
    frame_period_ms: float
    meets_targets: bool


def measure(case: Case, cpu_frames: int, latency_frames: int) -> list[Row]:
    frames = scene(case, max(cpu_frames, latency_frames))
    rows = []
    for name, cpu, latency in (("fmp4", cpu_fmp4, latency_fmp4), ("webrtc", cpu_webrtc, latency_webrtc)):
        ms = cpu(case, frames[:cpu_frames])
        p50, p95 = latency(case, frames[:latency_frames])
        period = 1000 / case.fps
        rows.append(Row(
            transport=name, size=f"{case.width}x{case.height}", fps=case.fps, cpu_ms_per_frame=round(ms, 2),
            sessions_per_core=int(1000 // (ms * case.fps)), latency_p50_ms=round(p50 * 1000, 1),
            latency_p95_ms=round(p95 * 1000, 1), frame_period_ms=round(period, 1),
            meets_targets=ms <= TARGET_MS[name] and p95 * 1000 <= period,
        ))
    return rows


def _table(rows: list[Row]) -> str:
    head = f"{'transport':<9} {'size':<8} {'fps':>3} {'cpu ms/frame':>12} {'sessions/core':>13} " \
           f"{'lat p50 ms':>10} {'lat p95 ms':>10} {'targets':>7}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r.transport:<9} {r.size:<8} {r.fps:>3} {r.cpu_ms_per_frame:>12.2f} "
                     f"{r.sessions_per_core:>13} {r.latency_p50_ms:>10.1f} {r.latency_p95_ms:>10.1f} "
                     f"{'ok' if r.meets_targets else 'MISSED':>7}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transports.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON here")
    parser.add_argument("--frames", type=int, default=96, help="frames per CPU measurement (default 96)")
    parser.add_argument("--latency-frames", type=int, default=64, help="frames per latency run (default 64)")
    parser.add_argument("--fps", type=int, default=16, help="frame rate (default 16)")
    args = parser.parse_args(argv)
    if args.frames < 8 or args.latency_frames < 16 or not 1 <= args.fps <= 120:
        parser.error("--frames must be >= 8, --latency-frames >= 16, --fps within 1..120")
    rows = []
    for width, height in ((640, 352), (832, 480)):
        rows += measure(Case(width, height, args.fps), args.frames, args.latency_frames)
    print(_table(rows))
    print(f"({platform.processor() or platform.machine()}, one encoder thread, python {sys.version.split()[0]})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in rows], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
