// World page: a world session over WebRTC, actions at a steady 30 Hz while input is live,
// live stats (fps, action-to-photon estimate, queue), interrupt / flush; a status line that
// says which step is under way, the controls, and errors in words with a Retry where it helps.
// Share (a watch link) and Invite player (a play link) for the owner. Opened with
// `?session=ID&token=T` (an invite's play_url) it joins that session as a co-player instead: no
// create; over WebRTC when the browser has it (the server's one encode for its WebRTC viewers,
// the `frames` messages carrying this player's own action_seq, a `welcome` first naming its seat),
// else the fMP4 WebSocket (the session's shared packing); its actions steer beside the owner's,
// the others' presence is shown.

import { f64 } from "./msgpack.js";
import { Controller } from "./input.js";
import { DEFAULT_MAX_PROMPT_CHARS, limitPrompt, promptMessage, renderExamples } from "./prompts.js";
import { connectWebRTC, connectWebSocket, createSession, deleteOnPageHide, idCounter, locateSession, probeSession, reconnectSession, waitReady } from "./session.js";
import { MsePlayer } from "./mse.js";
import { presenceText, shareButton } from "./share.js";
import { debugLog, describeError, hideError, PlaybackRate, reportFailure, StatusLine } from "./status.js";
import { PlayoutBound } from "./playout.js";
import { pictureNotice } from "./picture.js";
import { ptsFor } from "./timeline.js";

const ACTION_HZ = 30;
const STALL_MS = 2000; // no new frame on screen this long while playing: ask the server what is up
const $ = (id) => document.getElementById(id);
const log = debugLog($("log"));
const status = new StatusLine($("status"));

// What tests and curious humans can read: window.world.
const world = {
  session: null, framesDecoded: 0, framesDecodedBefore: 0, fps: 0, actionSent: -1, actionSeq: -1, frameIdx: -1, picture: null,
  frames: [], acks: [], errors: [], a2p: [], steps: status.history,
  jitterMs: null, // the jitter buffer's delay over the last stats interval (not the average since the start)
  leadMs: null, // how long before its frames play the server begins a chunk now (the `stats` message's lead_ms)
};
window.world = world;

const params = new URLSearchParams(location.search);
const JOIN = params.get("session") && params.get("token")
  ? { session_id: params.get("session"), token: params.get("token") } : null; // a co-player's invite
world.joining = JOIN !== null;
const PLAYERS = 4; // seats a world made here has (the owner and 3 invited players)
let wsLink = null; // a co-player's WebSocket ({ws, send})
let mse = null;

const sentAt = new Map(); // action seq -> performance.now() when sent
const framesByPts = new Map(); // pts mod 2^32 (RTP timestamp) -> frames message
let rtc = null;

function remember(map, key, value, limit) {
  map.set(key, value);
  if (map.size > limit) map.delete(map.keys().next().value);
}

function onMessage(message) {
  switch (message.t) {
    case "frames": {
      world.frames.push(message);
      if (world.frames.length > 256) world.frames.shift();
      for (let i = 0; i < message.n; i++) {
        const pts = ptsFor(message.idx + i, world.session.fps);
        remember(framesByPts, pts % 2 ** 32, { ...message, idx: message.idx + i, pts }, 512);
      }
      world.actionSeq = Math.max(world.actionSeq, message.action_seq);
      $("action-seq").textContent = String(world.actionSeq);
      break;
    }
    case "ack": {
      world.acks.push(message);
      log(`ack ${message.re}${message.pts !== undefined ? ` pts ${message.pts}` : ""}`);
      const done = requests.get(message.re);
      if (done) { requests.delete(message.re); note(done); }
      break;
    }
    case "welcome": { // a co-player's, first on its WebRTC control channel: its seat, the session's fps
      world.session = { ...world.session, ...message.session };
      continueSeat(message.session);
      if (world.onWelcome) world.onWelcome(message);
      break;
    }
    case "moved": world.moved = message; log(`moved to ${message.webrtc_url}`); follow(attempt); break;
    case "stats":
      if (message.queue !== undefined) $("queue").textContent = String(message.queue);
      if (message.lead_ms !== undefined && message.lead_ms !== null) {
        world.leadMs = message.lead_ms;
        $("lead").textContent = `${Math.round(message.lead_ms)} ms`;
      }
      break;
    case "presence": {
      world.presence = message;
      $("presence").textContent = presenceText(message, world.player === undefined ? 0 : world.player);
      $("presence").hidden = false;
      break;
    }
    case "init": if (mse) mse.init(message.codec, message.data); break;
    case "media": onMedia(message); break;
    case "picture": showPicture(message); break;
    case "error": {
      world.errors.push(message);
      log(`error ${message.code}: ${message.message}`);
      if (JOIN && message.fatal && message.code === "conflict") { takenOver(message); break; }
      const described = describeError(message);
      note(`${described.title}: ${described.detail}`, "warn");
      break;
    }
    default: log(message.t);
  }
}

// A co-player's fMP4 fragment: its action_seq is this player's own newest applied action, so the
// action-to-photon here is measured from sending to the fragment's arrival (MSE shows it next).
function onMedia(message) {
  if (mse) mse.append(message.data);
  lastFrameAt = performance.now();
  world.frames.push({ idx: message.idx, n: message.n, pts: message.pts, action_seq: message.action_seq, players: message.players });
  if (world.frames.length > 256) world.frames.shift();
  world.framesReceived = (world.framesReceived || 0) + message.n;
  world.frameIdx = message.idx + message.n - 1;
  $("frame-idx").textContent = String(world.frameIdx);
  if (message.action_seq > lastShownSeq && sentAt.has(message.action_seq)) {
    world.a2p.push(performance.now() - sentAt.get(message.action_seq));
    if (world.a2p.length > 64) world.a2p.shift();
    const sorted = [...world.a2p].sort((a, b) => a - b);
    $("a2p").textContent = `${sorted[Math.floor(sorted.length / 2)].toFixed(0)} ms`;
  }
  lastShownSeq = Math.max(lastShownSeq, message.action_seq);
  world.actionSeq = Math.max(world.actionSeq, message.action_seq);
  $("action-seq").textContent = String(world.actionSeq);
}

function showPicture(message) {
  world.picture = message;
  const notice = pictureNotice(message);
  $("picture").hidden = notice.hidden;
  $("picture").textContent = notice.text;
  log(`picture ${message.ok ? "recovered" : "degraded"}`);
}

let lastShownSeq = -1;
let lastFrameAt = performance.now();
function watchFrames(video) {
  if (!video.requestVideoFrameCallback) return;
  const onFrame = (now, meta) => {
    lastFrameAt = performance.now();
    if (status.step === "stalled") loading("playing", "Playing");
    const info = meta.rtpTimestamp !== undefined ? framesByPts.get(meta.rtpTimestamp) : undefined;
    if (info) {
      world.frameIdx = info.idx;
      $("frame-idx").textContent = String(info.idx);
      if (info.action_seq > lastShownSeq && sentAt.has(info.action_seq)) {
        world.a2p.push(meta.expectedDisplayTime - sentAt.get(info.action_seq));
        if (world.a2p.length > 64) world.a2p.shift();
        const sorted = [...world.a2p].sort((a, b) => a - b);
        $("a2p").textContent = `${sorted[Math.floor(sorted.length / 2)].toFixed(0)} ms`;
      }
      lastShownSeq = Math.max(lastShownSeq, info.action_seq);
    }
    video.requestVideoFrameCallback(onFrame);
  };
  video.requestVideoFrameCallback(onFrame);
}

// Below this share of the session's frame rate the playout bound stands aside (PlayoutBound: the
// buffer then holds the gaps between late frames, and a reconnect shows black until a key frame);
// at 12-14 of 16 frames/s, where a growing buffer was seen before the bound, it still acts.
const BOUND_STANDS_ASIDE_BELOW = 0.6;

function pollStats() {
  const bound = new PlayoutBound();
  let last = null;
  let lastPc = null;
  let rate = null; // frames/s over the last seconds against the session's: "Playing" or how much slower
  setInterval(async () => {
    if (!rtc) return;
    const pc = rtc.pc;
    if (pc !== lastPc) { last = null; lastPc = pc; rate = null; }
    const report = await pc.getStats();
    if (!rtc || rtc.pc !== pc) return;  // replaced while its stats were read (a resync): not the one playing
    report.forEach((s) => {
      if (s.type !== "inbound-rtp" || s.kind !== "video") return;
      if (status.step !== "playing" || document.hidden || !world.session) {
        rate = null;
      } else {
        rate = rate || new PlaybackRate(world.session.fps);
        const text = rate.add(s.timestamp, s.framesDecoded || 0);
        if (text !== status.element.textContent) status.set("playing", text);
      }
      world.framesDecoded = s.framesDecoded || 0;
      if (last) world.fps = ((s.framesDecoded - last.framesDecoded) * 1000) / (s.timestamp - last.timestamp);
      const emitted = (s.jitterBufferEmittedCount || 0) - (last ? last.jitterBufferEmittedCount || 0 : 0);
      if (emitted > 0) {  // over this interval: a buffer that grew shows now, not diluted by the whole session
        world.jitterMs = (((s.jitterBufferDelay || 0) - (last ? last.jitterBufferDelay || 0 : 0)) / emitted) * 1000;
        $("jitter").textContent = `${world.jitterMs.toFixed(0)} ms`;
        const slow = rate !== null && rate.rate !== null && rate.rate < BOUND_STANDS_ASIDE_BELOW * world.session.fps;
        if (status.step === "playing" && bound.tick(s.timestamp, world.jitterMs, slow)) resync(world.jitterMs);
      }
      last = s;
      $("frames-decoded").textContent = String(world.framesDecoded);
      $("fps").textContent = world.fps.toFixed(1);
    });
  }, 500);
}

// The next action's seq. A co-player's page continues its seat's sequence: its welcome says where
// the seat stands (`last_seq`: a tab that played the seat before this one sent up to there), so its
// first action counts at once instead of being ignored as old.
let seq = 0;
function continueSeat(welcome) {
  if (typeof welcome.last_seq === "number") seq = Math.max(seq, welcome.last_seq + 1);
}

function startActions(controller) {
  setInterval(() => {
    const fields = controller.sample();
    const keysView = [...controller.held].map((k) => `<span class="on">${k}</span>`).join("");
    $("keys").innerHTML = keysView;
    if (!fields || (!rtc && !wsLink)) return;
    const ts = performance.now();
    const action = { t: "action", seq, ts: f64(ts), ...fields };
    if (rtc) rtc.send(action, rtc.actions.readyState === "open" ? rtc.actions : rtc.control);
    else wsLink.send(action);
    remember(sentAt, seq, ts, 512);
    world.actionSent = seq;
    $("action-sent").textContent = String(seq);
    seq += 1;
  }, 1000 / ACTION_HZ);
}

// Frames stopped while playing. The peer connection takes many seconds to notice a server that
// vanished (no TCP under WebRTC: it waits for ICE consent to fail), so ask the server at once: no
// answer -> reconnect (the session may be on a restarted server, or moved); the session gone ->
// say so; the server answers -> it is slow, say that and keep waiting.
function watchStalls() {
  let probing = false;
  setInterval(async () => {
    if (document.hidden) { lastFrameAt = performance.now(); return; } // a background tab shows no frames
    if (probing || !world.session || performance.now() - lastFrameAt < STALL_MS) return;
    if (status.step !== "playing" && status.step !== "stalled") return;
    probing = true;
    const mine = attempt;
    try {
      const probe = await probeSession(world.session);
      if (mine !== attempt || (status.step !== "playing" && status.step !== "stalled")) return;
      if (probe.state === "unreachable") {
        log("no frames and no answer from the server: reconnecting");
        follow(mine);
      } else if (probe.state === "gone") {
        fail(probe.error);
      } else {
        loading("stalled", "Waiting for frames: the server is slow right now…");
        $("loading").hidden = true; // the last frame stays visible under the status line
      }
    } finally {
      probing = false;
    }
  }, 500);
}

// A friendly line under the video (the raw message stays in the debug log).
let noteTimer = null;
function note(text, kind = "info") {
  $("note").textContent = text;
  $("note").className = `note ${kind}`;
  clearTimeout(noteTimer);
  noteTimer = setTimeout(() => { $("note").textContent = ""; }, 6000);
}

const requests = new Map(); // request id -> what to say when its ack arrives
const nextId = idCounter();
function request(message, doneText) {
  if (!rtc) { note(`No session yet: ${status.element.textContent}`, "warn"); return; }
  requests.set(message.id, doneText);
  rtc.send(message);
}

// The controls hint, from what the session's action space lets this page send.
const KEY_HINTS = [
  [["w", "a", "s", "d"], "W A S D", "move"],
  [["arrowup", "arrowleft", "arrowdown", "arrowright"], "← ↑ → ↓", "move"],
  [["shift"], "Shift", "run"],
  [["space"], "Space", "brake"],
];
function renderHint(space) {
  const keys = new Set((space && space.keys) || []);
  const parts = [];
  const move = KEY_HINTS.filter(([names, , what]) => what === "move" && names.every((k) => keys.has(k)));
  if (move.length) parts.push(`<kbd>${move.map(([, label]) => label).join("</kbd> or <kbd>")}</kbd> move`);
  for (const [names, label, what] of KEY_HINTS) {
    if (what !== "move" && names.every((k) => keys.has(k))) parts.push(`hold <kbd>${label}</kbd> to ${what}`);
  }
  if (space && space.mouse) parts.push("click the video, then move the mouse to pan (<kbd>Esc</kbd> lets go)");
  if (space && (space.axes || space.buttons)) {
    const pad = [];
    if (space.axes >= 2) pad.push("left stick moves");
    if (space.buttons) pad.push(`buttons 1–${space.buttons} are sent`);
    parts.push(`a gamepad works too (${pad.join(", ") || "its axes are sent"})`);
  }
  parts.push("keys act while the page has focus, not while you type in the prompt box");
  $("hint").innerHTML = `<strong>Controls</strong> ${parts.join(" · ")}`;
  $("hint").hidden = false;
}

function loading(step, text) {
  status.set(step, text);
  $("loading-text").textContent = text;
  $("loading").hidden = step === "playing";
}

// "Waiting for the first frame…", then "Playing" once one is on screen (if attempt `mine` still holds).
function awaitFirstFrame(mine) {
  loading("first-frame", "Waiting for the first frame…");
  const then = () => { if (mine === attempt && status.step === "first-frame") loading("playing", "Playing"); };
  const video = $("video");
  if (video.requestVideoFrameCallback) video.requestVideoFrameCallback(() => then());
  else video.addEventListener("playing", then, { once: true });
}

function fail(err) {
  if (rtc) { rtc.pc.close(); rtc = null; }
  if (wsLink) { wsLink.ws.close(); wsLink = null; }
  reportFailure(err, { status, errors: world.errors, log, box: $("error"), overlay: $("loading"), onRetry: start,
    mode: "world" });
}

// This seat was taken over: its invite link was opened again (a reloaded tab, another tab, another
// device) and the newest connection plays it (docs/protocol.md, "Co-play"). The server ends this
// connection with a fatal `conflict`: this page stops at once and says so, and does NOT reconnect
// (that would take the seat back, and the two pages would take it from each other for ever).
// "Play here" takes it back on purpose.
function takenOver(message) {
  attempt += 1; // the closing transport is no lost connection to follow
  world.takenOver = message;
  fail({ code: "taken_over", message: message.message });
}

let attempt = 0;
async function start() {
  const mine = ++attempt;
  hideError($("error"));
  if (JOIN) { join(mine); return; }
  try {
    loading("server", "Waiting for the server to be ready…");
    await waitReady((reason) => loading("server", `Warming up the model (${reason})…`));
    loading("admission", "Creating your session…");
    world.session = await createSession({ mode: "world", players: PLAYERS });
    $("session-id").textContent = world.session.session_id;
    onSession(world.session);
    loading("connecting", "Connecting (WebRTC)…");
    await attach(mine);
    awaitFirstFrame(mine);
  } catch (err) {
    if (mine === attempt) fail(err);
  }
}

// A co-player joins the session of its invite (no create): over WebRTC when the browser can, its
// seat and the session's action space from the `welcome` on its control channel.
async function joinWebRTC(mine, located) {
  world.session = located;
  const welcomed = new Promise((resolve, reject) => {
    world.onWelcome = resolve;
    setTimeout(() => reject(new Error("no welcome on the control channel within 10 s")), 10_000);
  });
  welcomed.catch(() => {}); // awaited below; a failed attach must not leave it unhandled
  await attach(mine);
  const welcome = (await welcomed).session;
  world.onWelcome = null;
  world.transport = "webrtc";
  return welcome;
}

// ... else over the fMP4 WebSocket (the session's shared packing), as before WebRTC served co-players.
// After `moved` (its server drains) or a lost server it joins again where the session is now (`follow`).
const FOLLOW_CLOSES = new Set([1001, 1006, 1012, 4503]); // going away, dropped, restarting, not held here
async function joinWebSocket(mine, located) {
  world.session = located;
  if (mse) mse.close();
  mse = new MsePlayer($("video"));
  const link = await connectWebSocket(world.session, "fmp4", onMessage);
  continueSeat(link.welcome.session);
  wsLink = link;
  world.transport = "websocket";
  link.ws.addEventListener("close", (e) => {
    if (mine !== attempt || wsLink !== link) return; // replaced (followed `moved`), or a Retry began
    wsLink = null;
    if (FOLLOW_CLOSES.has(e.code)) { follow(mine); return; }
    fail({ code: e.code === 4401 ? "unauthorized" : "connection",
      message: `the connection to the world closed (${e.code}) ${e.reason}` });
  });
  return link.welcome.session;
}

async function join(mine) {
  try {
    // where its media is now (through a gateway: the worker that holds it; a daemon: this origin)
    const located = await locateSession({ ...JOIN }, null);
    let welcome = null;
    if (window.RTCPeerConnection) {
      loading("connecting", "Joining the world (WebRTC)…");
      try {
        welcome = await joinWebRTC(mine, located);
      } catch (err) {
        if (err.code === "unauthorized" || err.code === "not_found") throw err; // the invite, not the transport
        log(`WebRTC join failed (${err.message}); joining over the WebSocket`);
        if (rtc) { rtc.pc.close(); rtc = null; }
        world.pc = null;
      }
    }
    if (!welcome) {
      loading("connecting", "Joining the world (WebSocket)…");
      welcome = await joinWebSocket(mine, located);
    }
    world.player = welcome.player;
    world.role = welcome.role;
    world.takenOver = null;
    world.session = { ...located, ...welcome, token: JOIN.token };
    $("session-id").textContent = world.session.session_id;
    $("role").textContent = `You are player ${welcome.player}: your keys steer this world with the others'.`;
    $("role").hidden = false;
    onSession(world.session);
    awaitFirstFrame(mine);
  } catch (err) {
    if (mine === attempt) fail(err);
  }
}

// The session's WebRTC peer. When the server says `moved` or the peer drops, the session is
// looked for where it went (another server of a fleet) and the page connects there: the owner and
// a co-player alike (with its invite token; a co-player over the WebSocket joins there again).
async function attach(mine) {
  world.moved = null;
  const video = $("video");
  rtc = await connectWebRTC(world.session, {
    onTrack: (stream) => { video.srcObject = stream; video.play().catch(() => {}); },
    onMessage,
  });
  world.pc = rtc.pc;
  world.transport = "webrtc";
  const pc = rtc.pc;
  pc.addEventListener("connectionstatechange", () => {
    log(`connection ${pc.connectionState}`);
    if (mine === attempt && pc === world.pc && (pc.connectionState === "failed" || pc.connectionState === "disconnected"
        || pc.connectionState === "closed")) {
      follow(mine);
    }
  });
}

let following = false;
async function follow(mine) {
  if (following || mine !== attempt) return;
  following = true;
  const moved = world.moved;
  if (rtc) { rtc.pc.close(); rtc = null; }
  const overWebSocket = world.transport === "websocket"; // a co-player without WebRTC
  if (wsLink) { const old = wsLink; wsLink = null; old.ws.close(); }
  loading("reconnecting", moved ? "The session moved: reconnecting…" : "Lost the connection: reconnecting…");
  try {
    [world.session] = await reconnectSession(world.session, moved, async (found) => {
      world.session = found;
      if (!overWebSocket) { await attach(mine); return; }
      world.moved = null;
      await joinWebSocket(mine, found);
    }, { onWait: (err) => {
      if (mine !== attempt) throw err;
      log(`reconnect: ${err.code}: ${err.message}`);
      loading("reconnecting", `Reconnecting (${describeError(err).title.toLowerCase()})…`);
    } });
    world.reconnects = (world.reconnects || 0) + 1;
    log(`reconnected to ${world.session.webrtc_url}`);
    lastFrameAt = performance.now();
    awaitFirstFrame(mine);
  } catch (err) {
    if (mine === attempt) fail(err);
  } finally {
    following = false;
  }
}

// A fresh receiver for the video (PlayoutBound): the peer is replaced, the session goes on (the
// server drops what the old peer had not sent and starts the new one at a key frame).
async function resync(bufferedMs) {
  if (following || !rtc) return;
  following = true;
  const mine = attempt;
  world.resyncs = (world.resyncs || 0) + 1;
  log(`resync: the jitter buffer held ${bufferedMs.toFixed(0)} ms`);
  note(`The browser had buffered ${bufferedMs.toFixed(0)} ms of video: reconnected the video to play with less delay.`);
  try {
    const old = rtc;
    rtc = null;
    world.pc = null;  // its closing is not a lost connection
    // framesDecoded counts the playing receiver's frames; what the replaced ones decoded stays counted here
    world.framesDecodedBefore += world.framesDecoded;
    world.framesDecoded = 0;
    old.pc.close();
    await attach(mine);
    lastFrameAt = performance.now();
  } catch (err) {
    log(`resync failed: ${err.message}`);
    following = false;
    follow(mine);
    return;
  }
  following = false;
}
world.resync = () => resync(world.jitterMs || 0);  // tests force one

let sessionShown = false;
function onSession(session) {
  if (sessionShown) return;
  sessionShown = true;
  renderHint(session.action_space);
  const say = promptMessage($("prompt-msg"));
  const update = limitPrompt($("prompt"), $("count"), DEFAULT_MAX_PROMPT_CHARS,
    (max) => say(`Prompts are limited to ${max} characters; the rest was cut.`));
  const direct = (prompt) => {
    if (!prompt) { say("Type a prompt first (or pick an example)."); return; }
    say("");
    request({ t: "direct", id: nextId(), prompt }, `The world now follows “${prompt}”.`);
  };
  renderExamples($("examples"), session.prompt_examples, (example) => { $("prompt").value = example; update(); direct(example); });
  $("prompt").addEventListener("keydown", (e) => { if (e.key === "Enter") direct(e.target.value.trim()); });
  if (session.action_space && session.action_space.mouse) $("video").onclick = () => $("video").requestPointerLock();
  startActions(new Controller(session.action_space, window));
  if (JOIN && !rtc) { pollPlayback(); return; } // a co-player's MSE video: no WebRTC stats, no stall probe
  watchFrames($("video"));
  watchStalls();
  pollStats();
}

// A co-player's video (MSE): frames decoded and their rate from the video element itself.
function pollPlayback() {
  let last = null;
  setInterval(() => {
    const video = $("video");
    const quality = video.getVideoPlaybackQuality ? video.getVideoPlaybackQuality() : null;
    if (!quality) return;
    const now = performance.now();
    world.framesDecoded = quality.totalVideoFrames;
    if (last) world.fps = ((quality.totalVideoFrames - last.frames) * 1000) / (now - last.at);
    last = { frames: quality.totalVideoFrames, at: now };
    $("frames-decoded").textContent = String(world.framesDecoded);
    $("fps").textContent = world.fps.toFixed(1);
    if (world.framesDecoded > 0 && status.step === "first-frame") loading("playing", "Playing");
  }, 500);
}

$("interrupt").onclick = () => request({ t: "interrupt", id: nextId() }, "Interrupted: the world goes on from the frame on screen.");
$("flush").onclick = () => request({ t: "flush", id: nextId() }, "Flushed: frames not yet shown were dropped.");
if (JOIN) {
  $("share-row").hidden = true; // a co-player shares nothing and directs nothing: the owner does
  $("owner-row").hidden = true;
  $("prompt-area").hidden = true;
} else {
  shareButton($("share"), $("share-box"), "viewers", () => world.session, world);
  shareButton($("invite"), $("share-box"), "players", () => world.session, world);
}
deleteOnPageHide(() => (JOIN ? null : world.session)); // a co-player's page never deletes the owner's session
start();
