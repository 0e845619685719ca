// World page: a world session over WebRTC, actions at a steady 30 Hz while input is live,
// live stats (fps, action-to-photon estimate, queue), interrupt / flush.

import { f64 } from "./msgpack.js";
import { Controller } from "./input.js";
import { connectWebRTC, createSession, idCounter } from "./session.js";
import { ptsFor } from "./timeline.js";

const ACTION_HZ = 30;
const $ = (id) => document.getElementById(id);
const log = (text) => { $("log").textContent = `${new Date().toISOString().slice(11, 23)} ${text}\n` + $("log").textContent.slice(0, 4000); };

// What tests and curious humans can read: window.world.
const world = {
  session: null, framesDecoded: 0, fps: 0, actionSent: -1, actionSeq: -1, frameIdx: -1,
  frames: [], acks: [], errors: [], a2p: [],
};
window.world = world;

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
    case "ack": world.acks.push(message); log(`ack ${message.re}${message.pts !== undefined ? ` pts ${message.pts}` : ""}`); break;
    case "stats": if (message.queue !== undefined) $("queue").textContent = String(message.queue); break;
    case "error": world.errors.push(message); log(`error ${message.code}: ${message.message}`); break;
    default: log(message.t);
  }
}

let lastShownSeq = -1;
function watchFrames(video) {
  if (!video.requestVideoFrameCallback) return;
  const onFrame = (now, meta) => {
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

async function pollStats(pc) {
  let last = null;
  setInterval(async () => {
    const report = await pc.getStats();
    report.forEach((s) => {
      if (s.type !== "inbound-rtp" || s.kind !== "video") return;
      world.framesDecoded = s.framesDecoded || 0;
      if (last) world.fps = ((s.framesDecoded - last.framesDecoded) * 1000) / (s.timestamp - last.timestamp);
      last = s;
      $("frames-decoded").textContent = String(world.framesDecoded);
      $("fps").textContent = world.fps.toFixed(1);
      if (s.jitterBufferEmittedCount) $("jitter").textContent = `${((s.jitterBufferDelay / s.jitterBufferEmittedCount) * 1000).toFixed(0)} ms`;
    });
  }, 500);
}

function startActions(controller) {
  let seq = 0;
  setInterval(() => {
    const fields = controller.sample();
    const keysView = [...controller.held].map((k) => `<span class="on">${k}</span>`).join("");
    $("keys").innerHTML = keysView;
    if (!fields || !rtc) return;
    const ts = performance.now();
    rtc.send({ t: "action", seq, ts: f64(ts), ...fields }, rtc.actions.readyState === "open" ? rtc.actions : rtc.control);
    remember(sentAt, seq, ts, 512);
    world.actionSent = seq;
    $("action-sent").textContent = String(seq);
    seq += 1;
  }, 1000 / ACTION_HZ);
}

async function main() {
  const video = $("video");
  try {
    world.session = await createSession({ mode: "world" });
    $("session-id").textContent = world.session.session_id;
    rtc = await connectWebRTC(world.session, {
      onTrack: (stream) => { video.srcObject = stream; video.play().catch(() => {}); },
      onMessage,
    });
    $("status").textContent = "connected";
    world.pc = rtc.pc;
    rtc.pc.addEventListener("connectionstatechange", () => { $("status").textContent = rtc.pc.connectionState; });
  } catch (err) {
    $("status").textContent = String(err.message || err);
    world.errors.push({ code: "client", message: String(err) });
    return;
  }
  const nextId = idCounter();
  $("interrupt").onclick = () => rtc.send({ t: "interrupt", id: nextId() });
  $("flush").onclick = () => rtc.send({ t: "flush", id: nextId() });
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && e.target.value.trim()) rtc.send({ t: "direct", id: nextId(), prompt: e.target.value.trim() });
  });
  if (world.session.action_space && world.session.action_space.mouse) video.onclick = () => video.requestPointerLock();
  startActions(new Controller(world.session.action_space, window));
  watchFrames(video);
  pollStats(rtc.pc);
}

main();
