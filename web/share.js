// Share links and co-play invites: the owner's page asks the server for a link (POST
// /v1/sessions/{id}/viewers or /players with the owner's token) and shows it as a plain URL with a
// Copy button (no QR code). `presence` messages become a line saying who plays and how many watch.

import { ServerError, serverErrorFrom, describeError } from "./status.js";

// POST `path` of the session with its token; the JSON answer, or a ServerError in words.
async function postGrant(session, path, body = {}) {
  let response;
  try {
    response = await fetch(new URL(`v1/sessions/${session.session_id}/${path}`, document.baseURI), {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${session.token}` },
      body: JSON.stringify(body),
    });
  } catch (err) {
    throw new ServerError("network", `the server did not answer (${err.message || err})`);
  }
  const json = await response.json().catch(() => null);
  if (!response.ok) throw serverErrorFrom(response, json);
  return json;
}

// A read-only URL box with a Copy button, put into `box` (replacing what was there).
function showLink(box, title, url) {
  box.replaceChildren();
  const label = document.createElement("span");
  label.textContent = title;
  const input = document.createElement("input");
  Object.assign(input, { readOnly: true, value: url, className: "share-url" });
  input.onfocus = () => input.select();
  const copy = document.createElement("button");
  copy.textContent = "Copy";
  copy.className = "share-copy";
  copy.onclick = async () => {
    input.select();
    try {
      await navigator.clipboard.writeText(url);
      copy.textContent = "Copied";
    } catch {
      copy.textContent = document.execCommand && document.execCommand("copy") ? "Copied" : "Select and copy";
    }
  };
  box.append(label, input, copy);
  box.hidden = false;
}

// Wires `button`: a click asks for a link of `kind` ("viewers": a watch link; "players": a play
// invite) for `current()`'s session and shows it in `box`. `state` (window.world / .director)
// records each link in `state.links`, for tests and the curious.
export function shareButton(button, box, kind, current, state) {
  const title = kind === "players" ? "Send this link to a player:" : "Anyone with this link can watch:";
  button.onclick = async () => {
    const session = current();
    if (!session) return;
    button.disabled = true;
    try {
      const grant = await postGrant(session, kind, {});
      const url = grant.play_url || grant.watch_url;
      (state.links = state.links || []).push({ kind, url, grant_id: grant.grant_id, player: grant.player });
      showLink(box, title, url);
    } catch (err) {
      const said = describeError(err);
      box.replaceChildren(`${said.title}: ${said.detail}`);
      box.hidden = false;
    } finally {
      button.disabled = false;
    }
  };
}

// One line from a `presence` message: who plays (connected or not) and how many watch.
export function presenceText(message, self = null) {
  const players = (message.players || []).map((p) => {
    const name = p.player === 0 ? "owner" : (p.label || `player ${p.player}`);
    const you = self !== null && p.player === self ? " (you)" : "";
    return `${name}${you}${p.connected ? "" : " (left)"}`;
  });
  const watching = `${message.spectators} watching`;
  return players.length ? `Playing: ${players.join(", ")} · ${watching}` : watching;
}
