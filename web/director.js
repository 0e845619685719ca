// Director page: a director session over the fMP4 WebSocket; prompt -> `direct`, a segment
// timeline from segment_start / segment_end, interrupt, `received` acks.

import { MsePlayer } from "./mse.js";
import { connectWebSocket, createSession, idCounter } from "./session.js";

const $ = (id) => document.getElementById(id);
const log = (text) => { $("log").textContent = `${new Date().toISOString().slice(11, 23)} ${text}\n` + $("log").textContent.slice(0, 4000); };

// What tests and curious humans can read: window.director.
const director = { trace: [], session: null, codec: null, segments: [], fragments: 0, lastIdx: -1, errors: [], acks: [], player: null };
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

function onMessage(message, send) {
  director.trace.push([Math.round(performance.now()), message.t, message.idx, message.n]);
  if (director.trace.length > 200) director.trace.shift();
  switch (message.t) {
    case "init":
      director.codec = message.codec;
      $("codec").textContent = message.codec;
      if (!MsePlayer.supports(message.codec)) { log(`this browser cannot play ${message.codec} with MSE`); return; }
      director.player.init(message.codec, message.data);
      break;
    case "media":
      director.player.append(message.data);
      director.fragments += 1;
      director.lastIdx = message.idx + message.n - 1;
      send({ t: "received", idx: director.lastIdx });
      $("fragments").textContent = String(director.fragments);
      break;
    case "segment_start": {
      const pending = director.pending.get(message.re);
      director.segments.push({ segment: message.segment, pts: message.pts, prompt: pending, status: null });
      $("segment").textContent = String(message.segment);
      renderTimeline();
      break;
    }
    case "segment_end": {
      const s = director.segments.find((x) => x.segment === message.segment);
      if (s) Object.assign(s, { status: message.status, frames: message.frames, endPts: message.pts });
      else director.segments.push({ segment: message.segment, pts: null, status: message.status, frames: message.frames, endPts: message.pts });
      log(`segment ${message.segment} ${message.status} (${message.frames} frames)`);
      renderTimeline();
      break;
    }
    case "ack": director.acks.push(message); break;
    case "error": director.errors.push(message); log(`error ${message.code}: ${message.message}`); break;
    default: break;
  }
}

async function main() {
  const video = $("video");
  director.player = new MsePlayer(video);
  director.pending = new Map();
  let send = () => {};
  try {
    director.session = await createSession({ mode: "director" });
    $("session-id").textContent = director.session.session_id;
    const conn = await connectWebSocket(director.session, "fmp4", (m) => onMessage(m, send));
    send = conn.send;
    $("status").textContent = "connected";
    conn.ws.addEventListener("close", (e) => { $("status").textContent = `closed ${e.code}`; });
  } catch (err) {
    $("status").textContent = String(err.message || err);
    director.errors.push({ code: "client", message: String(err) });
    return;
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
  $("direct").onclick = () => {
    const prompt = $("prompt").value.trim();
    if (prompt) director.direct(prompt, Number($("seconds").value) || undefined, $("cut").checked);
  };
  $("interrupt").onclick = () => director.interrupt();
  setInterval(() => {
    $("time").textContent = video.currentTime.toFixed(2);
    if (director.player.behind !== undefined) $("behind").textContent = `${director.player.behind.toFixed(2)} s`;
  }, 250);
}

main();
