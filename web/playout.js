// The World page's bound on the browser's playout delay. Chromium's RTCRtpReceiver.jitterBufferTarget
// only sets a floor (the upper bound stays the browser's own), and after late frames and a burst
// its video jitter buffer grows and keeps the delay (seen on the 2-core box: 23 -> 691 ms within two
// minutes, action-to-photon p50 746 -> 1,470 ms). So the page reads the buffer's delay every stats
// interval; once it has stayed above `boundMs` for `overMs`, `tick` answers true and the page gives
// the video a fresh receiver (it reconnects its WebRTC peer: a new, empty jitter buffer), at most
// once per `minGapMs`.
export class PlayoutBound {
  constructor({ boundMs = 150, overMs = 2000, minGapMs = 10000 } = {}) {
    this.boundMs = boundMs;
    this.overMs = overMs;
    this.minGapMs = minGapMs;
    this.overSince = null;
    this.lastResetAt = null;
    this.resets = 0;
  }

  // `jitterMs`: the buffer's delay over the last interval (null: no frame came out of it).
  tick(nowMs, jitterMs) {
    if (jitterMs === null || jitterMs <= this.boundMs) {
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
