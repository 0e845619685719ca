"""The world page against the real daemon: WebRTC video decodes in Chromium, keypresses
arrive as `action` messages and show up in the frames' `action_seq`; the page says which step
it is at, shows the controls, explains a refusal and retries it."""

from __future__ import annotations

import itertools
import math

import httpx
import pytest
from PIL import ImageStat
from playwright.sync_api import Page, expect

from tests.browser._frames import video_picture
from tests.browser.conftest import Served, serve

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # Chromium takes seconds to start

# every text the status line shows on the way to a playing world, in order
LOADING = [
    ("server", "Waiting for the server to be ready…"),
    ("admission", "Creating your session…"),
    ("connecting", "Connecting (WebRTC)…"),
    ("first-frame", "Waiting for the first frame…"),
    ("playing", "Playing"),
]
# records each text the #status element shows, from before the page's own script runs
RECORD_STATUS = """
window.statusTexts = [];
new MutationObserver(() => {
  const el = document.getElementById("status");
  if (el && window.statusTexts[window.statusTexts.length - 1] !== el.textContent) window.statusTexts.push(el.textContent);
}).observe(document, { subtree: true, childList: true, characterData: true });
"""


def _open_world(page: Page, daemon_url: str) -> None:
    page.goto(f"{daemon_url}/world.html")
    page.wait_for_function("window.world && window.world.framesDecoded >= 8", timeout=45_000)


def test_webrtc_video_decodes_frames_and_is_not_blank(page: Page, daemon_url: str) -> None:
    _open_world(page, daemon_url)
    first = page.evaluate("world.framesDecoded")
    page.wait_for_function(f"world.framesDecoded >= {first + 16}", timeout=30_000)
    assert page.evaluate("world.errors") == []
    assert page.evaluate("world.steps.at(-1)[0]") == "playing"
    assert page.inner_text("#status").startswith("Playing")  # "Playing", or "Playing at N of 16 frames/s: ..."
    picture = video_picture(page)
    assert max(ImageStat.Stat(picture).stddev) > 8.0  # real content, not one flat colour
    assert len(picture.getcolors(maxcolors=1 << 20) or []) > 50


def test_the_page_shows_the_lead_the_server_measured_under_the_configured_one(page: Page) -> None:
    # tiny: 8-frame chunks at 16 frames/s, a configured lead of 2 chunks (1,000 ms); its chunks take
    # far less, so after the first nine chunks the server begins each one later, and says so. Its own
    # daemon: the measured lead holds only for a session alone on the engine
    with serve("tiny", "--policy", "kv") as served:
        _open_world(page, served.url)
        page.wait_for_function("world.framesDecoded >= 112 && world.leadMs !== null && world.leadMs < 1000",
                               timeout=45_000)
        lead = page.evaluate("world.leadMs")
        assert 125 <= lead < 1000  # never under a quarter of a chunk
        assert page.inner_text("#lead") == f"{math.floor(lead + 0.5)} ms"  # as JavaScript's Math.round


def test_frames_messages_map_rtp_timestamps_to_frame_indices(page: Page, daemon_url: str) -> None:
    _open_world(page, daemon_url)
    page.wait_for_function("world.frameIdx >= 8", timeout=30_000)  # requestVideoFrameCallback rtpTimestamp -> idx
    frames = page.evaluate("world.frames")
    assert frames[0]["idx"] == 0 and frames[0]["pts"] == 0
    for a, b in itertools.pairwise(frames):
        assert b["idx"] == a["idx"] + a["n"]
        assert b["pts"] == round(b["idx"] * 90000 / 16)


def test_keypresses_arrive_as_actions_and_change_action_seq(page: Page, daemon_url: str) -> None:
    _open_world(page, daemon_url)
    assert page.evaluate("[world.actionSent, world.actionSeq]") == [-1, -1]  # nothing held: nothing sent
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.down("KeyW")
    page.wait_for_function("world.actionSent >= 5", timeout=10_000)
    page.wait_for_function("world.actionSeq >= 0", timeout=30_000)
    page.keyboard.up("KeyW")
    held_seq = page.evaluate("world.actionSeq")
    page.keyboard.down("KeyD")
    page.wait_for_function(f"world.actionSeq > {held_seq}", timeout=30_000)
    page.keyboard.up("KeyD")
    assert page.evaluate("world.errors") == []


def test_media_flows_only_between_loopback_addresses(page: Page, daemon_url: str) -> None:
    _open_world(page, daemon_url)
    pairs = page.evaluate("""async () => {
      const report = await world.pc.getStats();
      const out = [];
      report.forEach((s) => {
        if (s.type === "candidate-pair" && s.state === "succeeded") {
          out.push([report.get(s.localCandidateId).address, report.get(s.remoteCandidateId).address]);
        }
      });
      return out;
    }""")
    assert pairs and {address for pair in pairs for address in pair} == {"127.0.0.1"}


def test_the_status_line_walks_through_every_loading_step_in_order(page: Page, daemon_url: str) -> None:
    page.add_init_script(RECORD_STATUS)
    page.goto(f"{daemon_url}/world.html")
    page.wait_for_function("window.world && world.steps.length && world.steps.at(-1)[0] === 'playing'", timeout=45_000)
    assert [tuple(step) for step in page.evaluate("world.steps")] == LOADING
    seen = [text for text in page.evaluate("window.statusTexts") if text != "Loading the page…"]
    assert seen == [text for _, text in LOADING]
    expect(page.locator("#loading")).to_be_hidden()
    page.wait_for_function("world.framesDecoded >= 1", timeout=5_000)  # the decoder's count (polled twice a second)


def test_the_controls_hint_names_what_the_page_sends(page: Page, daemon_url: str) -> None:
    _open_world(page, daemon_url)
    hint = page.locator("#hint")
    expect(hint).to_be_visible()
    text = hint.inner_text()
    for words in ("W A S D", "← ↑ → ↓", "Shift", "Space", "move the mouse to pan", "gamepad", "left stick",
                  "buttons 1–2"):
        assert words in text, words


def test_acks_become_sentences_and_the_raw_lines_stay_in_the_debug_log(page: Page, daemon_url: str) -> None:
    _open_world(page, daemon_url)
    page.click("#interrupt")
    expect(page.locator("#note")).to_have_text("Interrupted: the world goes on from the frame on screen.")
    expect(page.locator("#log")).to_be_hidden()  # the debug panel is closed until asked for
    page.click("#debug summary")
    expect(page.locator("#log")).to_contain_text("ack 1")


def test_no_webrtc_library_info_lines_in_the_daemons_log_by_default(page: Page, tiny_daemon: Served) -> None:
    _open_world(page, tiny_daemon.url)
    text = tiny_daemon.log.read_text()
    assert "created s_" in text  # the daemon's own info lines are there
    assert [line for line in text.splitlines() if " aioice." in line or " aiortc." in line] == []


def test_a_full_server_is_explained_with_a_retry_that_works(page: Page) -> None:
    # max_sessions is the KV-pool policy's limit: this test runs that policy explicitly
    with serve("tiny", "--policy", "kv", "--max-sessions", "1", "--log-level", "info") as served:
        held = httpx.post(f"{served.url}/v1/sessions", json={"mode": "world"}).json()
        page.goto(f"{served.url}/world.html")
        error = page.locator("#error")
        expect(error).to_be_visible(timeout=30_000)
        expect(error.locator("strong")).to_have_text("The server is full right now")
        expect(error.locator(".detail")).to_have_text("1 sessions are open (max_sessions)")
        expect(error.locator(".when")).to_contain_text("Try again in")
        expect(page.locator("#status")).to_have_text("The server is full right now")
        assert page.evaluate("world.errors.map((e) => e.code)") == ["capacity"]
        page.click("#interrupt")  # with no session it says why instead of doing nothing
        expect(page.locator("#note")).to_have_text("No session yet: The server is full right now")
        retry = page.locator("#error-retry")
        expect(retry).to_be_visible()
        httpx.delete(f"{served.url}/v1/sessions/{held['session_id']}",
                     headers={"Authorization": f"Bearer {held['token']}"})
        retry.click()
        page.wait_for_function("world.steps.at(-1)[0] === 'playing'", timeout=45_000)
        expect(error).to_be_hidden()
        # --log-level info lets the WebRTC libraries' info lines through (hidden by default, above)
        assert any(" aioice." in line or " aiortc." in line for line in served.log.read_text().splitlines())


def test_an_unreachable_server_is_a_network_error_with_a_retry(page: Page, daemon_url: str) -> None:
    page.route("**/v1/sessions", lambda route: route.abort())
    page.goto(f"{daemon_url}/world.html")
    error = page.locator("#error")
    expect(error.locator("strong")).to_have_text("Cannot reach the server", timeout=30_000)
    expect(error.locator(".detail")).to_contain_text("Is sessiond serve running?")
    expect(page.locator("#error-retry")).to_be_visible()


def test_an_error_retrying_cannot_fix_gets_no_retry_button(page: Page, daemon_url: str) -> None:
    page.goto(f"{daemon_url}/")
    shown = page.evaluate("""async () => {
      const s = await import("/status.js");
      const box = document.createElement("div");
      box.id = "box";
      document.body.appendChild(box);
      const described = s.describeError(new s.ServerError("invalid_field", "`fps` must be in [1, 240], got 0"));
      s.showError(box, described, () => {});
      return { canRetry: described.canRetry, buttons: box.querySelectorAll("button").length, text: box.innerText };
    }""")
    assert shown["canRetry"] is False and shown["buttons"] == 0
    assert [line for line in shown["text"].splitlines() if line][:2] == ["The server refused a value sent by this page",
                                              "`fps` must be in [1, 240], got 0"]


def test_a_refusal_that_can_never_succeed_has_no_retry_button_and_says_why(page: Page, daemon_url: str) -> None:
    page.goto(f"{daemon_url}/")
    shown = page.evaluate("""async () => {
      const s = await import("/status.js");
      const show = (err, id) => {
        const box = document.createElement("div");
        box.id = id;
        document.body.appendChild(box);
        const described = s.describeError(err);
        s.showError(box, described, () => {});
        return { canRetry: described.canRetry, buttons: box.querySelectorAll("button").length, text: box.innerText };
      };
      const message = "this server cannot serve one world session within objective (needs 1.04 s of engine " +
        "time per media second, has 0.85); waiting will not help";
      return {
        never: show(new s.ServerError("capacity", message, { status: 503 }), "never"),
        later: show(new s.ServerError("capacity", "over capacity", { status: 503, retryAfterS: 12 }), "later"),
      };
    }""")
    never, later = shown["never"], shown["later"]
    assert never["canRetry"] is False and never["buttons"] == 0
    lines = [line for line in never["text"].splitlines() if line]
    assert lines[0] == "This server cannot serve this kind of session"
    assert lines[1].startswith("this server cannot serve one world session within objective (needs 1.04 s")
    assert lines[2] == "Retrying will not help: this server is too slow for it within its objectives."
    assert len(lines) == 3  # no page named its mode: no advice from /v1/capacity
    assert later["canRetry"] is True and later["buttons"] == 1
    assert "Try again in 12 s." in later["text"]


def test_a_world_the_server_can_never_serve_sends_the_player_to_the_mode_it_serves(page: Page) -> None:
    # an action-to-photon objective of 50 ms: no world session can meet it, a director can
    with serve("tiny", "--objective-world-a2p-p95-ms", "50") as served:
        serves = httpx.get(f"{served.url}/v1/capacity").json()["admission"]["serves"]
        assert serves["world"] == 0 and serves["director"] >= 1
        page.goto(f"{served.url}/world.html")
        error = page.locator("#error")
        expect(error.locator("strong")).to_have_text("This server cannot serve this kind of session", timeout=30_000)
        expect(error.locator(".when")).to_have_text(
            "Retrying will not help: this server is too slow for it within its objectives.")
        many = "one session" if serves["director"] == 1 else f"up to {serves['director']} sessions at once"
        expect(error.locator(".advice")).to_have_text(
            f"This server serves Director sessions here ({many}): open the Director page. Go to Director")
        assert page.locator("#error-retry").count() == 0
        error.locator(".advice a").click()
        page.wait_for_url(f"{served.url}/director.html")
        expect(page.locator("#direct")).to_be_visible()


def test_the_advice_after_a_final_refusal_follows_what_the_server_serves(page: Page, daemon_url: str) -> None:
    page.goto(f"{daemon_url}/")
    advice = page.evaluate("""async () => {
      const s = await import("/status.js");
      return [
        s.finalAdvice("world", { admission: { serves: { world: 0, director: 3 } } }),
        s.finalAdvice("director", { serves: { world: 1, director: 0 } }),
        s.finalAdvice("world", { admission: { serves: { world: 0, director: 0 } } }),
        s.finalAdvice("director", null),
      ];
    }""")
    assert advice == [
        {"text": "This server serves Director sessions here (up to 3 sessions at once): open the Director page.",
         "href": "director.html"},
        {"text": "This server serves World sessions here (one session): open the World page.", "href": "world.html"},
        {"text": "This server serves no session of either kind on this machine. Whoever runs it can restart it with "
                 "--policy kv to look anyway (no promise of real time), or run it on a faster machine."},
        {"text": "Another kind of session may fit: see the home page, or try a faster server."},
    ]


def test_a_refusal_reads_its_reason_from_the_error_body_not_from_the_message(page: Page, daemon_url: str) -> None:
    page.goto(f"{daemon_url}/")
    titles = page.evaluate("""async () => {
      const s = await import("/status.js");
      const refusal = (error) => s.serverErrorFrom(
        new Response(JSON.stringify({ error }), { status: 503, headers: { "retry-after": "1" } }), { error });
      const starting = refusal({ code: "capacity", message: "the engine is warming up", reason: "not_ready" });
      const load = refusal({ code: "capacity", message: "not ready-made for this", reason: "load", retry_after_s: 9 });
      const full = refusal({ code: "capacity", message: "retry once one closes", reason: "full", retry_after_s: 60 });
      const burst = refusal({ code: "capacity", message: "3 directors are starting", reason: "burst", retry_after_s: 4 });
      const box = document.createElement("div");
      box.id = "box";
      document.body.appendChild(box);
      s.showError(box, s.describeError(full), () => {});
      const burstBox = document.createElement("div");
      document.body.appendChild(burstBox);
      s.showError(burstBox, s.describeError(burst), () => {});
      return { burst: s.describeError(burst).title, burstWhen: burstBox.querySelector(".when").textContent,
               burstDetail: s.describeError(burst).detail, reason: starting.reason, starting: s.describeError(starting).title, load: s.describeError(load).title,
               retry: s.describeError(load).retryAfterS, full: s.describeError(full).title,
               when: box.querySelector(".when").textContent, buttons: box.querySelectorAll("button").length };
    }""")
    assert titles == {"reason": "not_ready", "starting": "The server is still starting",
                      "load": "The server is full right now", "retry": 9,
                      "full": "The server is busy with other sessions",
                      "when": "Another session has to close first: try again in 60 s.", "buttons": 1,
                      "burst": "Other sessions could need the engine at the same moment",
                      "burstWhen": "That should ease within 4 s: try again then.",
                      "burstDetail": "3 directors are starting"}


def test_playback_slower_than_real_time_is_said_in_numbers_and_cleared_when_it_recovers(
        page: Page, daemon_url: str) -> None:
    page.goto(f"{daemon_url}/")
    texts = page.evaluate("""async () => {
      const s = await import("/status.js");
      const rate = new s.PlaybackRate(16);
      const out = [];
      let frames = 0;
      for (let t = 0; t <= 10000; t += 500) {  // 13 frames/s for 10 s, then 16 for 10 s
        out.push(rate.add(t, frames)); frames += 6.5;
      }
      for (let t = 10500; t <= 20000; t += 500) { out.push(rate.add(t, frames)); frames += 8; }
      return out;
    }""")
    slow = "Playing at 13.0 of 16 frames/s: slower than real time"
    assert texts[:8] == ["Playing"] * 8  # under 4 s of samples: no verdict yet
    assert texts[8] == slow and texts[20] == slow
    assert texts[-1] == "Playing"
    assert texts.index("Playing", 21) > 21  # it stays said until a whole window has recovered to 95%


def test_the_status_history_keeps_the_last_200_changes(page: Page, daemon_url: str) -> None:
    page.goto(f"{daemon_url}/")
    kept = page.evaluate("""async () => {
      const s = await import("/status.js");
      const line = new s.StatusLine(document.createElement("span"));
      for (let i = 0; i < 450; i++) line.set("playing", `Playing at ${i} of 16 frames/s`);
      line.set("playing", "Playing at 449 of 16 frames/s");  // the same again: not a change
      return [line.history.length, line.history[0][1], line.history.at(-1)[1], line.element.textContent];
    }""")
    assert kept == [200, "Playing at 250 of 16 frames/s", "Playing at 449 of 16 frames/s", "Playing at 449 of 16 frames/s"]


def test_a_degraded_picture_is_said_over_the_video_and_cleared_when_it_recovers(page: Page, daemon_url: str) -> None:
    page.goto(f"{daemon_url}/")
    notices = page.evaluate("""async () => {
      const p = await import("/picture.js");
      return [p.pictureNotice({ t: "picture", ok: false, why: "the avatar is gone from the centre", avatar: 0.0 }),
              p.pictureNotice({ t: "picture", ok: true })];
    }""")
    assert notices == [
        {"hidden": False, "text": "The model's picture has degraded: the avatar is gone from the centre. This is the "
                                  "model, not your connection; a new prompt or a new session starts it afresh."},
        {"hidden": True, "text": ""},
    ]
    page.goto(f"{daemon_url}/world.html")
    assert page.locator("#picture").is_hidden()  # nothing said before the model says so
