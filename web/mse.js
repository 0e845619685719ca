// fMP4 into Media Source Extensions: one SourceBuffer, appends queued while it is busy, the
// player kept near the live edge (faster playback when behind, a jump when far behind), old
// media evicted. `holdFor(seconds)`: the server's start-delay advice — playback of what comes
// next waits that long, and the buffer it builds is kept (no catching up into it).

const CATCH_UP_S = 0.5; // behind the live edge by more than this: play at 1.1x
const JUMP_S = 3.0; // behind by more than this: jump to near the edge
const KEEP_S = 30; // media kept behind the playhead

export class MsePlayer {
  constructor(video) {
    this.video = video;
    this.source = new MediaSource();
    this.buffer = null;
    this.queue = [];
    this.started = false;
    this.appended = 0;
    this.holdUntil = 0; // performance.now() ms before which playback waits (the start-delay advice)
    this.lead = 0; // seconds of buffer the advice asked for: not eaten by catching up
    this.opened = new Promise((resolve) => this.source.addEventListener("sourceopen", resolve, { once: true }));
    video.src = URL.createObjectURL(this.source);
    this.timer = setInterval(() => this.followLiveEdge(), 250);
  }

  // No longer the video's player (a new connection brings a new one): it stops following.
  close() {
    clearInterval(this.timer);
  }

  static supports(codec) {
    return window.MediaSource && MediaSource.isTypeSupported(`video/mp4; codecs="${codec}"`);
  }

  async init(codec, data) {
    await this.opened;
    this.buffer = this.source.addSourceBuffer(`video/mp4; codecs="${codec}"`);
    this.buffer.mode = "segments"; // media time = pts / 90 kHz, from each fragment's tfdt
    this.buffer.addEventListener("updateend", () => this.pump());
    this.append(data);
  }

  append(data) {
    this.queue.push(data);
    this.pump();
  }

  pump() {
    if (!this.buffer || this.buffer.updating || !this.queue.length) return;
    const ranges = this.buffer.buffered;
    if (ranges.length && this.video.currentTime - ranges.start(0) > KEEP_S * 2) {
      this.buffer.remove(ranges.start(0), this.video.currentTime - KEEP_S);
      return;
    }
    this.buffer.appendBuffer(this.queue.shift());
    this.appended += 1;
  }

  holdFor(seconds) {
    this.holdUntil = performance.now() + seconds * 1000;
    this.lead = seconds;
    this.video.pause();
  }

  holding() {
    return performance.now() < this.holdUntil;
  }

  liveEdge() {
    const ranges = this.buffer ? this.buffer.buffered : null;
    return ranges && ranges.length ? ranges.end(ranges.length - 1) : null;
  }

  followLiveEdge() {
    const edge = this.liveEdge();
    if (edge === null) return;
    const ranges = this.buffer.buffered;
    const v = this.video;
    if (this.holding()) {
      if (!v.paused) v.pause();
      this.behind = edge - v.currentTime;
      return;
    }
    if (!this.started || v.currentTime < ranges.start(0)) {
      // join (or rejoin after eviction) at the newest buffered range's start
      v.currentTime = ranges.start(ranges.length - 1);
      this.started = true;
      v.play().catch(() => {});
    }
    const behind = edge - v.currentTime;
    if (behind > JUMP_S + this.lead) v.currentTime = edge - CATCH_UP_S / 2 - this.lead;
    v.playbackRate = behind > CATCH_UP_S + this.lead ? 1.1 : 1.0;
    if (v.paused && behind > 0.1) v.play().catch(() => {});
    this.behind = behind;
  }
}
