// Talking to the daemon: create a session (HTTP), open WebRTC or the fMP4 WebSocket, and
// speak PROTOCOL.md messages (msgpack maps with a `t` key) over them.

import { decode, encode } from "./msgpack.js";

export async function createSession(body) {
  const response = await fetch(new URL("v1/sessions", document.baseURI), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const json = await response.json();
  if (!response.ok) {
    const e = json.error || {};
    throw new Error(`create failed (${response.status} ${e.code}): ${e.message}`);
  }
  return json;
}

export async function closeSession(session) {
  await fetch(new URL(`v1/sessions/${session.session_id}`, document.baseURI), {
    method: "DELETE",
    headers: { authorization: `Bearer ${session.token}` },
  });
}

function waitIceComplete(pc, timeoutMs) {
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => { if (pc.iceGatheringState === "complete") { clearTimeout(timer); resolve(); } };
    const timer = setTimeout(resolve, timeoutMs);
    pc.addEventListener("icegatheringstatechange", done);
  });
}

// Non-trickle offer: receive-only video, `control` (ordered) and `actions` (unordered, no
// retransmits) data channels, no ICE servers (loopback/LAN); returns {pc, control, actions}.
export async function connectWebRTC(session, { onTrack, onMessage, iceServers = [] }) {
  const pc = new RTCPeerConnection({ iceServers });
  pc.addTransceiver("video", { direction: "recvonly" });
  const control = pc.createDataChannel("control");
  const actions = pc.createDataChannel("actions", { ordered: false, maxRetransmits: 0 });
  for (const channel of [control, actions]) {
    channel.binaryType = "arraybuffer";
    channel.onmessage = (event) => onMessage(decode(new Uint8Array(event.data)));
  }
  pc.ontrack = (event) => onTrack(event.streams[0] || new MediaStream([event.track]), event.receiver);
  await pc.setLocalDescription(await pc.createOffer());
  await waitIceComplete(pc, 3000);
  const url = new URL(session.webrtc_url || `v1/sessions/${session.session_id}/webrtc`, document.baseURI);
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${session.token}` },
    body: JSON.stringify({ sdp: pc.localDescription.sdp, type: pc.localDescription.type }),
  });
  const answer = await response.json();
  if (!response.ok) {
    const e = answer.error || {};
    throw new Error(`webrtc offer refused (${response.status} ${e.code}): ${e.message}`);
  }
  await pc.setRemoteDescription(answer);
  const opened = (c) => (c.readyState === "open" ? Promise.resolve() : new Promise((r) => c.addEventListener("open", r, { once: true })));
  await opened(control);
  const send = (message, channel = control) => { if (channel.readyState === "open") channel.send(encode(message)); };
  return { pc, control, actions, send };
}

// The WebSocket of a session (`media` = "fmp4" | "raw"), hello first; resolves on welcome.
export function connectWebSocket(session, media, onMessage) {
  const url = new URL(session.ws_url || `v1/sessions/${session.session_id}/ws`, document.baseURI);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  url.searchParams.set("media", media);
  url.searchParams.set("token", session.token);
  const ws = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  const send = (message) => { if (ws.readyState === WebSocket.OPEN) ws.send(encode(message)); };
  return new Promise((resolve, reject) => {
    let welcomed = false;
    ws.onopen = () => send({ t: "hello", v: 1, client: "web/0.1" });
    ws.onerror = () => { if (!welcomed) reject(new Error("websocket failed")); };
    ws.onclose = (event) => { if (!welcomed) reject(new Error(`websocket closed ${event.code} ${event.reason}`)); };
    ws.onmessage = (event) => {
      const message = decode(new Uint8Array(event.data));
      if (!welcomed && message.t === "welcome") { welcomed = true; resolve({ ws, send, welcome: message }); return; }
      if (!welcomed && message.t === "error") { reject(new Error(`${message.code}: ${message.message}`)); return; }
      onMessage(message);
    };
  });
}

// Request ids for `direct`, `interrupt`, `flush`, ... (replies carry `re`).
export function idCounter() { let id = 0; return () => ++id; }
