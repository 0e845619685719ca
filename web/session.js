// Talking to the daemon: create a session (HTTP), open WebRTC or the fMP4 WebSocket, and
// speak docs/protocol.md messages (msgpack maps with a `t` key) over them.

import { decode, encode } from "./msgpack.js";
import { ServerError, serverErrorFrom } from "./status.js";

function unreachable(url, err) {
  return new ServerError("network", `${new URL(url).origin} did not answer (${err.message || err}). Is sessiond serve running?`);
}

// fetch, with a failure to reach the server as ServerError("network") and an error body as
// ServerError(its code); resolves to the parsed JSON of a successful response.
async function fetchJson(url, init) {
  let response;
  try { response = await fetch(url, init); } catch (err) { throw unreachable(url, err); }
  let json = null;
  try { json = await response.json(); } catch { json = null; }
  if (!response.ok) throw serverErrorFrom(response, json);
  return json;
}

// Resolves once GET /readyz says ready; calls onWait(reason) while the engine warms up.
export async function waitReady(onWait, { pollMs = 500, timeoutMs = 300_000 } = {}) {
  const url = new URL("readyz", document.baseURI);
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    let response;
    try { response = await fetch(url); } catch (err) { throw unreachable(url, err); }
    if (response.ok) return;
    const body = await response.json().catch(() => ({}));
    const reason = body.reason || `readyz answered ${response.status}`;
    if (performance.now() > deadline) throw new ServerError("not_ready", reason);
    onWait(reason);
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

const API_KEY = "sessiond.apiKey";  // sessionStorage: this tab's API key, when the server needs one

// A small form asking for the API key the server needs (`serve --api-keys`); resolves with it.
function askApiKey(reason) {
  return new Promise((resolve) => {
    const form = document.createElement("form");
    form.id = "api-key";
    form.className = "api-key";
    const why = document.createElement("p");
    why.textContent = reason;
    const input = document.createElement("input");
    Object.assign(input, { id: "api-key-input", type: "password", placeholder: "API key", autocomplete: "off" });
    const button = document.createElement("button");
    Object.assign(button, { type: "submit", textContent: "Use key" });
    form.append(why, input, button);
    form.onsubmit = (event) => {
      event.preventDefault();
      if (!input.value.trim()) return;
      form.remove();
      resolve(input.value.trim());
    };
    document.body.prepend(form);
    input.focus();
  });
}

// POST /v1/sessions, with the tab's API key (X-API-Key) when it has one; a server that needs a
// key (401 unauthorized) gets one pasted by the user, kept in sessionStorage for this tab.
export async function createSession(body) {
  for (;;) {
    const headers = { "content-type": "application/json" };
    const key = sessionStorage.getItem(API_KEY);
    if (key) headers["x-api-key"] = key;
    try {
      return await fetchJson(new URL("v1/sessions", document.baseURI), {
        method: "POST", headers, body: JSON.stringify(body),
      });
    } catch (err) {
      if (!(err instanceof ServerError) || err.code !== "unauthorized") throw err;
      sessionStorage.removeItem(API_KEY);
      sessionStorage.setItem(API_KEY, await askApiKey(err.message));
    }
  }
}

export async function closeSession(session) {
  await fetch(new URL(`v1/sessions/${session.session_id}`, document.baseURI), {
    method: "DELETE",
    headers: { authorization: `Bearer ${session.token}` },
  });
}

// The page closing (or navigating away) deletes its session at once: a keepalive request
// outlives the page; the server's idle timeout stays the fallback. `current()` gives the
// page's session (null before one exists).
export function deleteOnPageHide(current) {
  window.addEventListener("pagehide", () => {
    const session = current();
    if (!session) return;
    fetch(new URL(`v1/sessions/${session.session_id}`, document.baseURI), {
      method: "DELETE",
      keepalive: true,
      headers: { authorization: `Bearer ${session.token}` },
    }).catch(() => {});
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

// Resolves once `control` is open; rejects (ServerError "connection", so callers reconnect or fall
// back) when the peer fails or closes first (the server let it go) or after `timeoutMs`: a page
// never waits without a word for a channel that will not open.
function controlOpen(pc, control, timeoutMs) {
  if (control.readyState === "open") return Promise.resolve();
  return new Promise((resolve, reject) => {
    const done = (err) => {
      clearTimeout(timer);
      control.removeEventListener("open", opened);
      control.removeEventListener("close", closed);
      pc.removeEventListener("connectionstatechange", changed);
      if (err) { pc.close(); reject(err); } else resolve();
    };
    const opened = () => done(null);
    const closed = () => done(new ServerError("connection", "the WebRTC control channel closed before it opened"));
    const changed = () => {
      if (pc.connectionState === "failed" || pc.connectionState === "closed") {
        done(new ServerError("connection", `the WebRTC connection ${pc.connectionState} before its control channel opened`));
      }
    };
    const timer = setTimeout(() => done(new ServerError("connection",
      `the WebRTC control channel did not open within ${Math.round(timeoutMs / 1000)} s`)), timeoutMs);
    control.addEventListener("open", opened);
    control.addEventListener("close", closed);
    pc.addEventListener("connectionstatechange", changed);
  });
}

// Non-trickle offer: receive-only video, `control` (ordered) and `actions` (unordered, no
// retransmits) data channels, no ICE servers (loopback/LAN); returns {pc, control, actions}.
export async function connectWebRTC(session, { onTrack, onMessage, iceServers = [], openTimeoutMs = 15_000 }) {
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
  const answer = await fetchJson(url, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${session.token}` },
    body: JSON.stringify({ sdp: pc.localDescription.sdp, type: pc.localDescription.type }),
  });
  await pc.setRemoteDescription(answer);
  await controlOpen(pc, control, openTimeoutMs);
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
    ws.onerror = () => { if (!welcomed) reject(new ServerError("connection", "the WebSocket could not be opened")); };
    ws.onclose = (event) => { if (!welcomed) reject(new ServerError("connection", `the WebSocket closed (${event.code}) ${event.reason}`)); };
    ws.onmessage = (event) => {
      const message = decode(new Uint8Array(event.data));
      if (!welcomed && message.t === "welcome") { welcomed = true; resolve({ ws, send, welcome: message }); return; }
      if (!welcomed && message.t === "error") { reject(new ServerError(message.code, message.message)); return; }
      onMessage(message);
    };
  });
}

// Where a session is now. A session behind a fleet gateway may move to another server: the
// server that lets it go says `moved` (use `moved`'s URLs), or it just closes; then the status on
// the URL the session was created on names its current ws_url / webrtc_url. While it is being
// moved the status answers 503 with Retry-After: wait and ask again, up to timeoutMs.
// GET /v1/sessions/{id} with the session's token (`init`: more fetch options).
function fetchSession(session, init = {}) {
  const url = new URL(`v1/sessions/${session.session_id}`, document.baseURI);
  return fetch(url, { ...init, headers: { authorization: `Bearer ${session.token}` } });
}

// The session's status (GET /v1/sessions/{id}) as JSON, for any token the session granted.
export function sessionStatus(session) {
  return fetchJson(new URL(`v1/sessions/${session.session_id}`, document.baseURI),
    { headers: { authorization: `Bearer ${session.token}` } });
}

export async function locateSession(session, moved, { timeoutMs = 30_000 } = {}) {
  if (moved) return { ...session, ws_url: moved.ws_url, webrtc_url: moved.webrtc_url };
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    let response = null;
    try { response = await fetchSession(session); } catch { response = null; }
    if (response && response.ok) {
      const where = await response.json();
      return { ...session, ws_url: where.ws_url || session.ws_url, webrtc_url: where.webrtc_url || session.webrtc_url };
    }
    if (response && response.status !== 503) throw serverErrorFrom(response, await response.json().catch(() => null));
    if (performance.now() > deadline) throw new ServerError("connection", "the session could not be found again in time");
    const wait = Number(response && response.headers.get("retry-after")) || 0.5;
    await new Promise((r) => setTimeout(r, wait * 1000));
  }
}

// Finds the session again (where it moved, or on a server that came back) and connects to it with
// `connect(found)`, waiting out a restarting server (silence, then 503 while it warms up) for up to
// `timeoutMs`. `onWait(err)` hears each passing failure (and may throw to give up). Resolves to
// [the session as found, what connect returned].
const PASSING = new Set(["capacity", "not_ready", "network", "connection", "store_unavailable"]);
export async function reconnectSession(session, moved, connect, { timeoutMs = 60_000, onWait = () => {} } = {}) {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      const found = await locateSession(session, moved, { timeoutMs: Math.max(1, deadline - performance.now()) });
      return [found, await connect(found)];
    } catch (err) {
      if (!PASSING.has(err.code) || performance.now() > deadline) throw err;
      onWait(err);
      await new Promise((r) => setTimeout(r, 1000 * Math.min(5, err.retryAfterS || 1)));
    }
  }
}

// Is the session still there? "ok" (200 or 503: the server answers), "gone" (it answered that the
// session is not there; `error` holds its words) or "unreachable" (no answer within `timeoutMs`).
export async function probeSession(session, { timeoutMs = 1500 } = {}) {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  try {
    const response = await fetchSession(session, { signal: abort.signal });
    if (response.ok || response.status === 503) return { state: "ok" };
    return { state: "gone", error: serverErrorFrom(response, await response.json().catch(() => null)) };
  } catch {
    return { state: "unreachable" };
  } finally {
    clearTimeout(timer);
  }
}

// Request ids for `direct`, `interrupt`, `flush`, ... (replies carry `re`).
export function idCounter() { let id = 0; return () => ++id; }
