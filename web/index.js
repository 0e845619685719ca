// Index page: before any click, what this start of the server serves, in its own words
// (`statement` of GET /v1/capacity), and a mark on a mode's card where it cannot serve it.

const $ = (id) => document.getElementById(id);
const RETRY_MS = 1000;

async function capacity() {
  const response = await fetch("v1/capacity", { cache: "no-store" });
  if (!response.ok) throw new Error(`GET /v1/capacity: HTTP ${response.status}`);
  return response.json();
}

function mark(mode, why) {
  const card = $(`${mode}-link`);
  let note = card.querySelector(".cannot");
  if (!note) {
    note = document.createElement("p");
    note.className = "cannot note warn";
    card.appendChild(note);
  }
  note.textContent = `Not on this start: ${why}.`;
}

async function show() {
  const verdict = $("verdict");
  let body;
  try {
    body = await capacity();
  } catch (err) {
    verdict.textContent = `Cannot ask the server what it serves (${err.message}); retrying…`;
    setTimeout(show, RETRY_MS);
    return;
  }
  if (!body.ready || typeof body.statement !== "string") {
    verdict.textContent = "The server is starting: it measures this machine to know what it can serve…";
    setTimeout(show, RETRY_MS);
    return;
  }
  verdict.textContent = body.statement;
  verdict.classList.toggle("warn", Object.keys(body.cannot || {}).length > 0);
  for (const [mode, why] of Object.entries(body.cannot || {})) mark(mode, why);
  window.verdict = body;  // what tests read
}

show();
