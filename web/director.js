// Director page: a director session over the fMP4 WebSocket; prompt -> `direct`, a segment
// timeline from segment_start / segment_end, interrupt, `received` acks. The served model's
// example prompts as chips (the first pre-filled), the prompt limited to the server's length,
// a status line per step, a cue when a segment has played out, errors in words.

import { MsePlayer } from "./mse.js";
import { DEFAULT_MAX_PROMPT_CHARS, limitPrompt, promptMessage, renderExamples, servedExamples } from "./prompts.js";
import { connectWebSocket, createSession, deleteOnPageHide, idCounter, reconnectSession, waitReady } from "./session.js";
import { debugLog, describeError, hideError, reportFailure, StallWatch, StatusLine } from "./status.js";
import { PTS_HZ } from "./timeline.js";
import { presenceText, shareButton } from "./share.js";

const $ = (id) => document.getElementById(id);
const log = debugLog($("log"));
const status = new StatusLine($("status"));
const say = promptMessage($("prompt-msg"));
const CUE_SLACK_S = 0.25; // the segment counts as played out this close to its end

// What tests and curious humans can read: window.director.
const director = {
  trace: [], session: null, codec: null, segments: [], fragments: 0, lastIdx: -1, errors: [], acks: [], player: null,
  steps: status.history, maxPromptChars: DEFAULT_MAX_PROMPT_CHARS, connected: false, stalls: 0,
  examples: [],
};
window.director = director;

function renderTimeline() {
  $("timeline").innerHTML = "";
  for (const s of director.segments.slice(-12)) {
    const div = document.createElement("div");
    div.className = s.status || "running";
    div.title = s.prompt || "";
    div.textContent = `#${s.segment} ${s.status || "running"}${s.frames !== undefined ? ` · ${s.frames}f` : ""}`;
    $("timeline").appendChild(div);
  }
}

function loading(step, text) {
  status.set(step, text);
  $("loading-text").textContent = text;
  $("loading").hidden = !["server", "admission", "connecting"].includes(step);
}

// The segment that has ended on the wire but may still be playing: its cue shows once the
// playhead reaches its end.
let ending = null;
function showCue() {
  if (!ending) return;
  const s = ending;
  ending = null;
  const text = s.status === "done" ? `Segment #${s.segment} done — direct again`
    : s.status === "interrupted" ? `Segment #${s.segment} interrupted — direct again`
      : `Segment #${s.segment} failed on the server — direct again`;
  $("cue").textContent = text;
  $("cue").hidden = false;
  status.set("done", text);
}

function onMessage(message, send) {
  director.trace.push([Math.round(performance.now()), message.t, message.idx, message.n]);
  if (director.trace.length > 200) director.trace.shift();
  switch (message.t) {
    case "presence": {
      director.presence = message;
      $("presence").textContent = presenceText(message);
      $("presence").hidden = false;
      break;
    }
    case "init":
      director.codec = message.codec;
      $("codec").textContent = message.codec;
      if (!MsePlayer.supports(message.codec)) {
        fail({ code: "unsupported_codec", message: `this browser cannot play ${message.codec} with Media Source Extensions` });
        return;
      }
      director.player.init(message.codec, message.data);
      break;
    case "media":
      director.player.append(message.data);
      director.fragments += 1;
      director.lastIdx = message.idx + message.n - 1;
      send({ t: "received", idx: director.lastIdx });
      $("fragments").textContent = String(director.fragments);
      if (status.step === "generating") status.set("playing", `Playing segment #${message.segment}`);
      break;
    case "segment_start": {
      const pending = director.pending.get(message.re);
      // the server's advice: start playing this segment after this long, so that it never stalls
      const startAfterMs = typeof message.start_after_ms === "number" ? message.start_after_ms : 0;
      if (startAfterMs > 0) director.player.holdFor(startAfterMs / 1000);
      director.segments.push({ segment: message.segment, pts: message.pts, prompt: pending, status: null, startAfterMs });
      $("segment").textContent = String(message.segment);
      ending = null;
      $("cue").hidden = true;
      status.set("generating", `Generating segment #${message.segment}…`);
      renderTimeline();
      break;
    }
    case "segment_end": {
      const s = director.segments.find((x) => x.segment === message.segment);
      if (s) Object.assign(s, { status: message.status, frames: message.frames, endPts: message.pts });
      else director.segments.push({ segment: message.segment, pts: null, status: message.status, frames: message.frames, endPts: message.pts });
      log(`segment ${message.segment} ${message.status} (${message.frames} frames)`);
      ending = { segment: message.segment, status: message.status, endS: message.pts / PTS_HZ };
      renderTimeline();
      break;
    }
    case "moved": director.moved = message; log(`moved to ${message.ws_url}`); break;
    case "ack": director.acks.push(message); log(`ack ${message.re}${message.pts !== undefined ? ` pts ${message.pts}` : ""}`); break;
    case "error": {
      director.errors.push(message);
      log(`error ${message.code}: ${message.message}`);
      const described = describeError(message);
      say(`${described.title}: ${described.detail}`);
      break;
    }
    default: log(message.t);
  }
}

function fail(err) {
  reportFailure(err, { status, errors: director.errors, log, box: $("error"), overlay: $("loading"), onRetry: start,
    mode: "director" });
}

// The video's player for a new connection (each starts with its own init segment); the one before
// it is closed (its MediaSource, SourceBuffer and object URL released), never left alive.
function newPlayer() {
  director.player?.close();
  director.player = new MsePlayer($("video"));
}
// the MsePlayers alive in this page (made and not closed): one while a connection plays
Object.defineProperty(director, "msePlayers", { get: () => MsePlayer.live });

let send = () => {};
let attempt = 0;
async function start() {
  const mine = ++attempt;
  hideError($("error"));
  newPlayer();
  director.pending = new Map();
  try {
    loading("server", "Waiting for the server to be ready…");
    await waitReady((reason) => loading("server", `Warming up the model (${reason})…`));
    // the examples, shown even if this page is refused a session; the session waits for nothing
    servedExamples().then((examples) => { if (!director.examples.length) showExamples(examples); });
    loading("admission", "Creating your session…");
    director.session = await createSession({ mode: "director" });
    $("session-id").textContent = director.session.session_id;
    loading("connecting", "Connecting (WebSocket)…");
    onWelcome((await attach(mine)).welcome);
    loading("ready", "Ready: pick an example (it plays at once), or write a direction and press Direct");
  } catch (err) {
    if (mine === attempt) fail(err);
  }
}

// The session's WebSocket; when it closes, the session is looked for where it went (it moved to
// another server of a fleet, or its server went away) and the page reconnects there.
async function attach(mine) {
  director.moved = null;
  const conn = await connectWebSocket(director.session, "fmp4", (m) => onMessage(m, send));
  send = conn.send;
  director.connected = true;
  conn.ws.addEventListener("close", async (e) => {
    director.connected = false;
    if (mine !== attempt) return;
    const moved = director.moved;
    log(`the WebSocket closed (${e.code})${moved ? "; following the session" : ""}`);
    // the status line says so at once; what is buffered keeps playing under it
    status.set("reconnecting", moved ? "The session moved: reconnecting…" : "Lost the connection: reconnecting…");
    try {
      [director.session] = await reconnectSession(director.session, moved, async (found) => {
        director.session = found;
        newPlayer(); // the new connection starts with its own init
        return attach(mine);
      }, { onWait: (err) => {
        if (mine !== attempt) throw err;
        log(`reconnect: ${err.code}: ${err.message}`);
        status.set("reconnecting", `Reconnecting (${describeError(err).title.toLowerCase()})…`);
      } });
      director.reconnects = (director.reconnects || 0) + 1;
      log(`reconnected to ${director.session.ws_url}`);
      loading("ready", "Reconnected: direct again (a segment under way goes on)");
    } catch (err) {
      if (mine !== attempt) return;
      // a session the server says is gone is said as such; anything else is a lost connection
      fail(err.code === "not_found" ? err
        : { code: "connection", message: `the WebSocket closed (${e.code}) ${e.reason}; ${err.message || err}` });
    }
  });
  return conn;
}

const nextId = idCounter();
director.direct = (prompt, seconds, cut = false) => {
  const id = nextId();
  director.pending.set(id, prompt);
  const message = { t: "direct", id, prompt };
  if (seconds) message.seconds = seconds;
  if (cut) message.cut = true;
  send(message);
  return id;
};
director.interrupt = () => send({ t: "interrupt", id: nextId() });

// Without a connected session a direction would go nowhere: say why instead (the status line's words).
function connectedOrSay() {
  if (director.connected) return true;
  say(`No session to direct yet: ${status.element.textContent}`);
  return false;
}

function directFromBox() {
  if (!connectedOrSay()) return;
  const prompt = $("prompt").value.trim();
  if (!prompt) { say("Write a direction first, or pick one of the examples."); $("prompt").focus(); return; }
  say("");
  director.direct(prompt, Number($("seconds").value) || undefined, $("cut").checked);
}

let updateCount = () => {};
function onWelcome(welcome) {
  const session = welcome.session || director.session;
  const limits = welcome.limits || {};
  director.maxPromptChars = limits.max_prompt_chars || DEFAULT_MAX_PROMPT_CHARS;
  updateCount = limitPrompt($("prompt"), $("count"), director.maxPromptChars,
    (max) => say(`Directions are limited to ${max} characters; the rest was cut.`));
  showExamples(session.prompt_examples || []);
}

// The examples as chips (a click fills the box and directs, or says why it cannot), the box
// pre-filled with the first where it is empty.
function showExamples(examples) {
  director.examples = examples;
  renderExamples($("examples"), examples, (example) => {
    $("prompt").value = example;
    updateCount();
    directFromBox();
  });
  if (examples.length && !$("prompt").value) $("prompt").value = examples[0];
  updateCount();
}

$("direct").onclick = directFromBox;
shareButton($("share"), $("share-box"), "viewers", () => director.session, director);
$("interrupt").onclick = () => { if (connectedOrSay()) director.interrupt(); };
// A segment that stops moving mid-play says so ("Buffering segment #n…") and is counted in
// director.stalls, as a player's stall; the line goes back to "Playing segment #n" when it moves.
const stallWatch = new StallWatch();
function watchStalls(video) {
  const playing = status.step === "playing" || status.step === "buffering";
  // paused: not started yet, or held for the advised start delay (a stall leaves it unpaused, waiting)
  const active = playing && !document.hidden && !video.paused && !!director.player && !director.player.holding();
  const segment = director.segments.length ? director.segments[director.segments.length - 1].segment : 0;
  const change = stallWatch.tick(performance.now(), video.currentTime, active);
  director.stalls = stallWatch.stalls;
  if (change === "stalled") status.set("buffering", `Buffering segment #${segment}: generation is behind playback…`);
  if (change === "resumed" && status.step === "buffering") status.set("playing", `Playing segment #${segment}`);
}

setInterval(() => {
  const video = $("video");
  $("time").textContent = video.currentTime.toFixed(2);
  if (director.player && director.player.behind !== undefined) $("behind").textContent = `${director.player.behind.toFixed(2)} s`;
  if (ending && video.currentTime >= ending.endS - CUE_SLACK_S) showCue();
  watchStalls(video);
}, 250);
deleteOnPageHide(() => director.session);
start();
