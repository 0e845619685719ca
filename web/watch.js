// Watch page: a spectator of someone's session, from the share link's `?session=ID&token=T`.
// WebRTC first (as the World page), the fMP4 WebSocket when the server does not serve this
// token over WebRTC; the stream, who is playing and how many watch (`presence`); no controls:
// a viewer token steers nothing. The link names only the page, the session and the token: the
// page asks `GET /v1/sessions/{id}` on its own origin where the session's media is now (through a
// fleet gateway: the worker that holds it, or the gateway itself in proxy mode) before it connects,
// and again when the session moves, so a link keeps working after a drain or a failover.

import { MsePlayer } from "./mse.js";
import { connectWebRTC, connectWebSocket, locateSession, sessionStatus } from "./session.js";
import { presenceText } from "./share.js";
import { debugLog, describeError, hideError, reportFailure, StatusLine } from "./status.js";

const $ = (id) => document.getElementById(id);
const log = debugLog($("log"));
const status = new StatusLine($("status"));

// What tests and curious humans can read: window.watch.
const watch = {
  session: null, transport: null, framesReceived: 0, framesDecoded: 0, lastIdx: -1, presence: null,
  errors: [], steps: status.history, moves: 0,
  firstFrameMs: null,  // when the first frame was shown, in ms since the page began to load
  // the way there, in ms since the page began to load: connecting (the script runs), located (the
  // session's status answered), connected (WebRTC: the answer applied; WebSocket: its welcome), track
  // (WebRTC: the video track arrived)
  marks: {},
};
window.watch = watch;

const params = new URLSearchParams(location.search);
let mse = null;
let link = null;
// the fMP4 player now (null over WebRTC), and the MsePlayers alive in this page (made and not
// closed): one at most, whatever the reconnects
Object.defineProperty(watch, "mse", { get: () => mse });
Object.defineProperty(watch, "msePlayers", { get: () => MsePlayer.live });

// The fMP4 player of the previous connection goes when the next one brings its own video (an
// MsePlayer holds a MediaSource, its SourceBuffer and an object URL until it is closed).
function dropPlayer() {
  if (mse) mse.close();
  mse = null;
}

function loading(step, text) {
  status.set(step, text);
  $("loading-text").textContent = text;
  $("loading").hidden = step === "playing";
}

function onFrames(idx, n) {
  watch.framesReceived += n;
  watch.lastIdx = Math.max(watch.lastIdx, idx + n - 1);
  $("frames").textContent = String(watch.framesReceived);
  $("frame-idx").textContent = String(watch.lastIdx);
}

function onMessage(message) {
  switch (message.t) {
    case "init": if (mse) mse.init(message.codec, message.data); break;
    case "media": if (mse) mse.append(message.data); onFrames(message.idx, message.n); break;
    case "frames": onFrames(message.idx, message.n); break;
    case "presence": {
      watch.presence = message;
      $("presence").textContent = presenceText(message);
      $("viewers").textContent = String(message.spectators);
      break;
    }
    case "moved": follow(message); break;
    case "error": {
      watch.errors.push(message);
      log(`error ${message.code}: ${message.message}`);
      if (message.fatal) fail(message);
      break;
    }
    default: log(message.t);
  }
}

function fail(err) {
  if (link && link.pc) link.pc.close();
  if (link && link.ws) link.ws.close();
  link = null;
  reportFailure(err, { status, errors: watch.errors, log, box: $("error"), overlay: $("loading"), onRetry: start });
}

async function viaWebRTC(session) {
  const video = $("video");
  return connectWebRTC(session, {
    onTrack: (stream) => {
      if (watch.marks.track === undefined) watch.marks.track = performance.now();
      dropPlayer();
      video.srcObject = stream; video.play().catch(() => {});
    },
    onMessage,
  });
}

async function viaWebSocket(session) {
  dropPlayer();
  $("video").srcObject = null; // a stream of an earlier WebRTC connection would hide the new player
  mse = new MsePlayer($("video"));
  const conn = await connectWebSocket(session, "fmp4", onMessage);
  conn.ws.addEventListener("close", (e) => {
    if (link !== conn || e.code === 1000) return;  // replaced, or closed after `moved` (followed)
    fail({ code: e.code === 4401 ? "unauthorized" : e.code === 4404 ? "not_found" : "connection",
      message: `the stream closed (${e.code}) ${e.reason}` });
  });
  return conn;
}

// The session moved (its server drains): drop this connection and connect where `moved` says.
function follow(moved) {
  const old = link;
  link = null;
  if (old && old.pc) old.pc.close();
  if (old && old.ws) old.ws.close();
  watch.moves += 1;
  log(`the session moved to ${moved.ws_url}`);
  start(moved);
}

async function start(movedTo = null) {
  const moved = movedTo && movedTo.ws_url ? movedTo : null;  // a retry click passes its event
  hideError($("error"));
  const linked = { session_id: params.get("session"), token: params.get("token") };
  if (!linked.session_id || !linked.token) {
    fail({ code: "invalid_field", message: "this page needs a share link: watch.html?session=…&token=…" });
    return;
  }
  $("session-id").textContent = linked.session_id;
  try {
    loading("connecting", "Finding the session…");
    if (watch.marks.connecting === undefined) watch.marks.connecting = performance.now();
    // where its media is now (a single daemon's status names no URLs: this page's origin then)
    const session = await locateSession(linked, moved);
    watch.session = session;
    if (watch.marks.located === undefined) watch.marks.located = performance.now();
    loading("connecting", "Connecting (WebRTC)…");
    try {
      link = await viaWebRTC(session);
      watch.transport = "webrtc";
      // WebRTC has no welcome message: the mode comes from the session's status
      sessionStatus(session).then((s) => { $("mode").textContent = s.mode; })
        .catch((err) => log(`status: ${err.message || err}`));
    } catch (err) {
      log(`WebRTC: ${err.code || ""} ${err.message || err}; using the WebSocket`);
      loading("connecting", "Connecting (WebSocket)…");
      link = await viaWebSocket(session);
      watch.transport = "fmp4";
      $("mode").textContent = link.welcome.session.mode;
    }
    $("transport").textContent = watch.transport;
    if (watch.marks.connected === undefined) watch.marks.connected = performance.now();
    loading("first-frame", "Waiting for the first frame…");
  } catch (err) {
    fail(err);
  }
}

// The moment the first frame is presented (the decoded count below is polled, 250 ms coarse).
function markFirstFrame(video) {
  const mark = () => { if (watch.firstFrameMs === null) watch.firstFrameMs = performance.now(); };
  if (video.requestVideoFrameCallback) video.requestVideoFrameCallback(mark);
  else video.addEventListener("loadeddata", mark, { once: true });
}
markFirstFrame($("video"));

setInterval(() => {
  const video = $("video");
  const quality = video.getVideoPlaybackQuality ? video.getVideoPlaybackQuality() : null;
  if (!quality) return;
  watch.framesDecoded = quality.totalVideoFrames;
  $("frames-decoded").textContent = String(watch.framesDecoded);
  if (watch.framesDecoded > 0 && status.step === "first-frame") loading("playing", "Playing");
}, 250);

window.addEventListener("error", (e) => log(describeError({ code: "internal", message: String(e.message) }).title));
start();
