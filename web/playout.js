// The World page's bound on the browser's playout delay. Chromium's RTCRtpReceiver.jitterBufferTarget
// only sets a floor (the upper bound stays the browser's own), and after late frames and a burst
// its video jitter buffer grows and keeps the delay (seen on the 2-core box: 23 -> 691 ms within two
// minutes, action-to-photon p50 746 -> 1,470 ms). So the page reads the buffer's delay every stats
// interval; once it has stayed above `boundMs` for `overMs`, `tick` answers true and the page gives
// the video a fresh receiver (it reconnects its WebRTC peer: a new, empty jitter buffer), at most
// once per `minGapMs`. Not while frames come far slower than the session's rate (`slow`; the World
// page says below 0.6 of it): the buffer then holds the gaps between late frames, not a backlog a
// fresh receiver could drop, and each reconnect only shows black until the next key frame (seen on a
// 2-core AVX2 box under --policy kv at 6-8 of 16 frames/s: a reset every 10 s, a black picture
// between them, 2.2 frames/s decoded of the 6.6 sent).
export class PlayoutBound {
  constructor({ boundMs = 150, overMs = 2000, minGapMs = 10000 } = {}) {
    this.boundMs = boundMs;
    this.overMs = overMs;
    this.minGapMs = minGapMs;
    this.overSince = null;
    this.lastResetAt = null;
    this.resets = 0;
  }

  // `jitterMs`: the buffer's delay over the last interval (null: no frame came out of it); `slow`:
  // frames come far slower than real time, so the delay is not counted against the bound.
  tick(nowMs, jitterMs, slow = false) {
    if (slow || jitterMs === null || jitterMs <= this.boundMs) {
      this.overSince = null;
      return false;
    }
    if (this.overSince === null) this.overSince = nowMs;
    if (nowMs - this.overSince < this.overMs) return false;
    if (this.lastResetAt !== null && nowMs - this.lastResetAt < this.minGapMs) return false;
    this.lastResetAt = nowMs;
    this.overSince = null;
    this.resets += 1;
    return true;
  }
}
