// fMP4 into Media Source Extensions: one SourceBuffer, appends queued while it is busy, the
// player kept near the live edge (faster playback when behind, a jump when far behind), old
// media evicted. `holdFor(seconds)`: the server's start-delay advice — playback of what comes
// next waits that long, and the buffer it builds is kept (no catching up into it).

const CATCH_UP_S = 0.5; // behind the live edge by more than this: play at 1.1x
const JUMP_S = 3.0; // behind by more than this: jump to near the edge
const KEEP_S = 30; // media kept behind the playhead

export class MsePlayer {
  // Players made and not yet closed, in this page (tests read it: a page has one live player).
  static live = 0;

  constructor(video) {
    this.video = video;
    this.source = new MediaSource();
    this.buffer = null;
    this.queue = [];
    this.started = false;
    this.closed = false;
    this.appended = 0;
    this.holdUntil = 0; // performance.now() ms before which playback waits (the start-delay advice)
    this.lead = 0; // seconds of buffer the advice asked for: not eaten by catching up
    this.onUpdateEnd = () => this.pump();
    this.opened = new Promise((resolve) => {
      this.onSourceOpen = resolve;
      this.source.addEventListener("sourceopen", resolve, { once: true });
    });
    this.url = URL.createObjectURL(this.source);
    video.src = this.url;
    this.timer = setInterval(() => this.followLiveEdge(), 250);
    MsePlayer.live += 1;
  }

  // No longer the video's player (a new connection brings a new one, or the page stops): it stops
  // following the live edge, drops what it had queued and its listeners, ends its MediaSource (its
  // SourceBuffer goes with it), detaches it from the video unless another player or stream took
  // the video already, and revokes its object URL, so nothing of it stays alive. Idempotent.
  close() {
    if (this.closed) return;
    this.closed = true;
    MsePlayer.live -= 1;
    clearInterval(this.timer);
    this.queue = [];
    this.source.removeEventListener("sourceopen", this.onSourceOpen);
    if (this.buffer) {
      this.buffer.removeEventListener("updateend", this.onUpdateEnd);
      try {
        if (this.buffer.updating) this.buffer.abort();
        if (this.source.readyState === "open") this.source.removeSourceBuffer(this.buffer);
      } catch { /* the source was already detached: nothing left to remove */ }
      this.buffer = null;
    }
    if (this.source.readyState === "open") {
      try { this.source.endOfStream(); } catch { /* ended meanwhile */ }
    }
    if (this.video.src === this.url) { // still ours: detach it (a new player or a stream sets its own)
      this.video.removeAttribute("src");
      if (!this.video.srcObject) this.video.load(); // (a WebRTC stream set since plays on untouched)
    }
    URL.revokeObjectURL(this.url);
  }

  static supports(codec) {
    return window.MediaSource && MediaSource.isTypeSupported(`video/mp4; codecs="${codec}"`);
  }

  async init(codec, data) {
    await this.opened;
    if (this.closed) return;
    this.buffer = this.source.addSourceBuffer(`video/mp4; codecs="${codec}"`);
    this.buffer.mode = "segments"; // media time = pts / 90 kHz, from each fragment's tfdt
    this.buffer.addEventListener("updateend", this.onUpdateEnd);
    this.append(data);
  }

  append(data) {
    if (this.closed) return;
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
