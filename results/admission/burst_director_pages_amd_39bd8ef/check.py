"""User check: five Director pages opened at once against a daemon paced at the engine issue's 0.25."""
import time, json, sys
from playwright.sync_api import sync_playwright
from loadtest.browser_play import CHROMIUM, CHROMIUM_ARGS
url = sys.argv[1]
out = "/tmp/burstcheck"
with sync_playwright() as p:
    b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    pages = []
    for i in range(5):
        pg = b.new_context(viewport={"width": 1000, "height": 760}).new_page()
        pg.goto(f"{url}/director.html", wait_until="commit")
        pages.append(pg)
    time.sleep(8)
    for i, pg in enumerate(pages):
        st = pg.locator("#status").text_content()
        err = pg.locator("#error").text_content() if pg.locator("#error").is_visible() else ""
        print(i, "status:", st, "| error:", err)
        pg.screenshot(path=f"{out}/page{i}_t8.png")
    # the admitted ones direct
    for pg in pages:
        if not pg.locator("#error").is_visible():
            pg.fill("#prompt", "a snowy winter day"); pg.click("#direct")
    time.sleep(12)
    for i, pg in enumerate(pages):
        if pg.locator("#error").is_visible():
            btn = pg.locator("#error .retry")
            if btn.count():
                btn.click()
    time.sleep(8)
    for i, pg in enumerate(pages):
        st = pg.locator("#status").text_content()
        err = pg.locator("#error").text_content() if pg.locator("#error").is_visible() else ""
        print(i, "after retry status:", st, "| error:", err)
        pg.screenshot(path=f"{out}/page{i}_t28.png")
    b.close()
