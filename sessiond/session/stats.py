"""The periodic `stats` message of a session: frames sent per second, frames queued, the last
chunk's generation time and its real-time factor."""

from __future__ import annotations

from protocols.messages import Stats

__all__ = ["StatsMeter"]


class StatsMeter:
    def __init__(self, chunk_media_s: float, now: float, sent: int) -> None:
        self.chunk_media_s = chunk_media_s  # seconds of media in one chunk
        self.last_chunk_s: float | None = None  # engine wall time of the last chunk (begin to done)
        self._at = now
        self._sent = sent

    def report(self, now: float, sent: int, queued: int, every_s: float = 1.0) -> Stats | None:
        """The message, at most once per `every_s` (None in between)."""
        elapsed = now - self._at
        if elapsed < every_s:
            return None
        fps = (sent - self._sent) / elapsed
        self._at, self._sent = now, sent
        gen = self.last_chunk_s
        return Stats(fps=round(fps, 2), queue=queued, gen_ms=None if gen is None else round(gen * 1000, 1),
                     rtf=None if gen is None else round(gen / self.chunk_media_s, 3))
