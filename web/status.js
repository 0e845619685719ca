// What a person sees of a page's progress and failures: one status line that says which step
// is under way, errors in words with a Retry button where trying again can help, and the raw
// protocol lines kept in a collapsible debug log.

// The server's error codes in words; `retry`: whether trying again later can succeed.
const ERROR_TEXT = {
  capacity: { title: "The server is full right now", retry: true },
  store_unavailable: { title: "The server cannot reach its session store", retry: true },
  rate_limited: { title: "Too many requests in a short time", retry: true },
  network: { title: "Cannot reach the server", retry: true },
  connection: { title: "The connection to the server was lost", retry: true },
  not_ready: { title: "The server is still starting", retry: true },
  engine_fault: { title: "The model failed on this session", retry: true },
  internal: { title: "The server hit an internal error", retry: false },
  unauthorized: { title: "The session's token was refused", retry: false },
  not_found: { title: "The session no longer exists", retry: true },
  invalid_field: { title: "The server refused a value sent by this page", retry: false },
  bad_message: { title: "The server could not read a message from this page", retry: false },
  too_large: { title: "A message from this page was too large", retry: false },
  unsupported_version: { title: "This page speaks a protocol version the server does not", retry: false },
  unsupported_codec: { title: "This browser cannot play the server's video", retry: false },
  // this page's own code for a co-player's fatal `conflict`: its invite was opened on another page,
  // which plays the seat now (docs/protocol.md, "Co-play")
  taken_over: { title: "This seat is now played on another page", retry: true, retryLabel: "Play here",
    whenText: () => "Your invite link was opened again (another tab or device): that page steers now and this one stopped. Play here takes the seat back." },
};

// An error as the server (or this page) reports it: {code, message, retryAfterS?, status?}.
export class ServerError extends Error {
  constructor(code, message, { retryAfterS = null, status = null, field = null, reason = null } = {}) {
    super(message);
    this.code = code;
    this.reason = reason;  // a refusal's one word of why (the error body's `reason`), when it had one
    this.retryAfterS = retryAfterS;
    this.status = status;
    this.field = field;
  }
}

// From an HTTP error body {error: {code, message, field?, retry_after_s?, reason?}} and its response.
export function serverErrorFrom(response, body) {
  const e = (body && body.error) || {};
  let retry = typeof e.retry_after_s === "number" ? e.retry_after_s : null;
  const header = response.headers.get("retry-after");
  if (retry === null && header && !Number.isNaN(Number(header))) retry = Number(header);
  return new ServerError(e.code || `http_${response.status}`, e.message || response.statusText,
    { retryAfterS: retry, status: response.status, field: e.field || null,
      reason: typeof e.reason === "string" ? e.reason : null });
}

// {title, detail, canRetry, retryAfterS} for a person; unknown codes read as a server fault.
// A `capacity` refusal without Retry-After is final: the server can never serve this kind of
// session (it says what it needs and has), so there is no Retry button.
export function describeError(err) {
  const code = err && err.code ? err.code : "internal";
  const known = ERROR_TEXT[code] || { title: `The server refused the request (${code})`, retry: false };
  const retryAfterS = err && typeof err.retryAfterS === "number" ? err.retryAfterS : null;
  const detail = String((err && err.message) || "");
  if (code === "capacity" && err.reason === "not_ready") {  // the engine is still warming up
    return { code, title: ERROR_TEXT.not_ready.title, detail, canRetry: true, retryAfterS };
  }
  if (code === "capacity" && retryAfterS === null && err && err.status === 503) {
    return { code, title: "This server cannot serve this kind of session", detail, canRetry: false, retryAfterS,
      final: "Retrying will not help: this server is too slow for it within its objectives.", askCapacity: true };
  }
  if (code === "capacity" && err.reason === "full") {  // only another session closing makes room
    return { code, title: "The server is busy with other sessions", detail, canRetry: true, retryAfterS,
      whenText: (s) => (s > 0 ? `Another session has to close first: try again in ${s} s.`
        : "Another session has to close first: you can try again now.") };
  }
  if (code === "capacity" && err.reason === "burst") {  // sessions that may all be busy at once: a wait helps
    return { code, title: "Other sessions could need the engine at the same moment", detail, canRetry: true, retryAfterS,
      whenText: (s) => (s > 0 ? `That should ease within ${s} s: try again then.` : "You can try again now.") };
  }
  return { code, title: known.title, detail, canRetry: known.retry, retryAfterS, whenText: known.whenText,
    retryLabel: known.retryLabel };
}

const PAGES = { world: ["World", "world.html"], director: ["Director", "director.html"] };

// What a person can do after a final refusal of a `mode` session, from GET /v1/capacity (`capacity`,
// null when it could not be read): {text, href?}. The start's verdict (`admission.serves`, or the
// top-level `serves`) says whether the other mode is served on this machine at all; where neither is,
// only whoever runs the server can change it (`--policy kv` serves without the promise of real time).
export function finalAdvice(mode, capacity) {
  const other = mode === "world" ? "director" : "world";
  const serves = capacity && ((capacity.admission && capacity.admission.serves) || capacity.serves);
  if (!serves || typeof serves[other] !== "number") {
    return { text: "Another kind of session may fit: see the home page, or try a faster server." };
  }
  const [name, href] = PAGES[other] || [other, "/"];
  if (serves[other] > 0) {
    const many = serves[other] === 1 ? "one session" : `up to ${serves[other]} sessions at once`;
    return { text: `This server serves ${name} sessions here (${many}): open the ${name} page.`, href };
  }
  return { text: "This server serves no session of either kind on this machine. Whoever runs it can restart it "
    + "with --policy kv to look anyway (no promise of real time), or run it on a faster machine." };
}

// Adds finalAdvice's line to an error box once /v1/capacity answers (nothing when it does not).
async function appendAdvice(box, mode) {
  let capacity = null;
  try {
    const response = await fetch("v1/capacity", { cache: "no-store" });
    if (response.ok) capacity = await response.json();
  } catch (_) { /* the advice falls back to words without the verdict */ }
  if (box.hidden) return;  // dismissed (a retry) before the answer came
  const advice = finalAdvice(mode, capacity);
  const line = document.createElement("p");
  line.className = "advice";
  line.textContent = advice.text + (advice.href ? " " : "");
  if (advice.href) {
    const link = document.createElement("a");
    link.href = advice.href;
    link.textContent = `Go to ${PAGES[mode === "world" ? "director" : "world"][0]}`;
    line.append(link);
  }
  box.append(line);
}

// The status line: `set(step, text)`; each change is remembered in `history` (tests read it), the
// last HISTORY_LIMIT of them (a long session's slow-playback readings would grow it without end).
const HISTORY_LIMIT = 200;
export class StatusLine {
  constructor(element) {
    this.element = element;
    this.history = [];
    this.step = null;
  }

  set(step, text) {
    this.step = step;
    this.element.textContent = text;
    this.element.dataset.step = step;
    const last = this.history[this.history.length - 1];
    if (!last || last[0] !== step || last[1] !== text) this.history.push([step, text]);
    if (this.history.length > HISTORY_LIMIT) this.history.splice(0, this.history.length - HISTORY_LIMIT);
  }
}

// Renders a described error into `box`: title, the server's own words, a countdown when the
// server said when to retry, and a Retry button only where retrying can help.
export function showError(box, described, onRetry) {
  box.hidden = false;
  box.replaceChildren();
  const title = document.createElement("strong");
  title.textContent = described.title;
  const detail = document.createElement("p");
  detail.className = "detail";
  detail.textContent = described.detail;
  box.append(title, detail);
  let timer = null;
  if (described.canRetry && onRetry) {
    const when = document.createElement("p");
    when.className = "when";
    const button = document.createElement("button");
    button.id = `${box.id}-retry`;
    button.className = "retry";
    button.textContent = described.retryLabel || "Retry";
    button.onclick = () => { clearInterval(timer); hideError(box); onRetry(); };
    let left = described.retryAfterS !== null ? Math.ceil(described.retryAfterS) : 0;
    const tick = () => {
      when.textContent = described.whenText ? described.whenText(left)
        : left > 0 ? `Try again in ${left} s.` : "You can try again now.";
      left -= 1;
      if (left < 0) clearInterval(timer);
    };
    tick();
    if (left >= 0) timer = setInterval(tick, 1000);
    box.append(when, button);
  } else {
    const when = document.createElement("p");
    when.className = "when";
    when.textContent = described.final || "Trying again will not help; change what was sent or ask the server's operator.";
    box.append(when);
    if (described.askCapacity && described.mode) box.advice = appendAdvice(box, described.mode);
  }
  box.stopCountdown = () => clearInterval(timer);
}

// A failure that stops the page: remembered in `errors`, logged, named on the status line and
// shown in `box` (with Retry -> onRetry where that can help); `overlay` (the loading veil) hides.
// `mode` (world, director): the kind of session the page asked for, so that a final refusal also
// says what else this server serves (finalAdvice).
export function reportFailure(err, { status, errors, log, box, overlay, onRetry, mode = null }) {
  const described = { ...describeError(err), mode };
  errors.push({ code: described.code, message: described.detail });
  log(`error ${described.code}: ${described.detail}`);
  status.set("error", described.title);
  overlay.hidden = true;
  showError(box, described, onRetry);
}

export function hideError(box) {
  if (box.stopCountdown) box.stopCountdown();
  box.hidden = true;
  box.replaceChildren();
}

// A debug log (newest first) into `element`, timestamped to the millisecond.
export function debugLog(element) {
  return (text) => {
    element.textContent = `${new Date().toISOString().slice(11, 23)} ${text}\n` + element.textContent.slice(0, 8000);
  };
}

// Frames on screen per second over the last `windowMs`, against the session's frame rate: says
// when playback runs slower than real time (the server cannot keep up, or this machine cannot
// decode fast enough), so "Playing" is not claimed over a picture moving at 13 of 16 frames/s.
// `add(nowMs, framesDecoded)` returns the status text: "Playing", or the slow-down in numbers.
export class PlaybackRate {
  constructor(fps, { windowMs = 5000, slow = 0.9, recovered = 0.95 } = {}) {
    this.fps = fps;
    this.windowMs = windowMs;
    this.slowBelow = slow * fps;
    this.recoveredAt = recovered * fps;
    this.samples = [];
    this.isSlow = false;
    this.rate = null;
  }

  add(nowMs, framesDecoded) {
    this.samples.push([nowMs, framesDecoded]);
    while (this.samples.length > 2 && nowMs - this.samples[1][0] >= this.windowMs) this.samples.shift();
    const [t0, f0] = this.samples[0];
    if (nowMs - t0 < this.windowMs * 0.8) return this.text(); // not a whole window yet
    this.rate = ((framesDecoded - f0) * 1000) / (nowMs - t0);
    if (this.rate < this.slowBelow) this.isSlow = true;
    else if (this.rate >= this.recoveredAt) this.isSlow = false;
    return this.text();
  }

  reset() {
    this.samples = [];
    this.isSlow = false;
    this.rate = null;
  }

  text() {
    if (!this.isSlow) return "Playing";
    return `Playing at ${this.rate.toFixed(1)} of ${this.fps} frames/s: slower than real time`;
  }
}

// A started segment whose playhead stands still at the edge of what has arrived: a stall (the
// server's start-delay advice exists to prevent them). `tick(nowMs, currentTime, active)` with
// `active` false while nothing should be moving (before a segment plays, during the advised hold,
// after the segment's end, a hidden tab); returns "stalled" once the time stood still `stillMs`
// while active, "resumed" when it moves again after a stall, else null. `stalls` counts them.
export class StallWatch {
  constructor({ stillMs = 750 } = {}) {
    this.stillMs = stillMs;
    this.lastTime = null;
    this.stillSince = null;
    this.stalled = false;
    this.stalls = 0;
  }

  tick(nowMs, currentTime, active) {
    const moved = currentTime !== this.lastTime;
    this.lastTime = currentTime;
    if (moved || !active) {
      this.stillSince = null;
      if (this.stalled && moved) { this.stalled = false; return "resumed"; }
      if (!active) this.stalled = false;
      return null;
    }
    if (this.stillSince === null) this.stillSince = nowMs;
    if (!this.stalled && nowMs - this.stillSince >= this.stillMs) {
      this.stalled = true;
      this.stalls += 1;
      return "stalled";
    }
    return null;
  }
}
