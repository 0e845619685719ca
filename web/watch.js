// Watch page: a spectator of someone's session, from the share link's `?session=ID&token=T`.
// WebRTC first (as the World page), the fMP4 WebSocket when the server does not serve this
// token over WebRTC; the stream, who is playing and how many watch (`presence`); no controls:
// a viewer token steers nothing.

import { MsePlayer } from "./mse.js";
import { connectWebRTC, connectWebSocket, sessionStatus } from "./session.js";
import { presenceText } from "./share.js";
import { debugLog, describeError, hideError, reportFailure, StatusLine } from "./status.js";

const $ = (id) => document.getElementById(id);
const log = debugLog($("log"));
const status = new StatusLine($("status"));

// What tests and curious humans can read: window.watch.
const watch = {
  session: null, transport: null, framesReceived: 0, framesDecoded: 0, lastIdx: -1, presence: null,
  errors: [], steps: status.history,
};
window.watch = watch;

const params = new URLSearchParams(location.search);
let mse = null;
let link = null;

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
    case "moved": log("the session moved: open the share link again"); break;
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
    onTrack: (stream) => { video.srcObject = stream; video.play().catch(() => {}); },
    onMessage,
  });
}

async function viaWebSocket(session) {
  mse = new MsePlayer($("video"));
  const conn = await connectWebSocket(session, "fmp4", onMessage);
  conn.ws.addEventListener("close", (e) => {
    if (link !== conn) return;
    fail({ code: e.code === 4401 ? "unauthorized" : e.code === 4404 ? "not_found" : "connection",
      message: `the stream closed (${e.code}) ${e.reason}` });
  });
  return conn;
}

async function start() {
  hideError($("error"));
  const session = { session_id: params.get("session"), token: params.get("token") };
  if (!session.session_id || !session.token) {
    fail({ code: "invalid_field", message: "this page needs a share link: watch.html?session=…&token=…" });
    return;
  }
  watch.session = session;
  $("session-id").textContent = session.session_id;
  try {
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
    loading("first-frame", "Waiting for the first frame…");
  } catch (err) {
    fail(err);
  }
}

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
