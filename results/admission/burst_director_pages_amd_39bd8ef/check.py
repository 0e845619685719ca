"""User check: five Director pages opened at once against a daemon paced at the engine issue's 0.25.
python check.py URL (run from the repository root, with the project's .venv)."""
import sys
import time

from playwright.sync_api import Page, sync_playwright

from loadtest.browser_play import CHROMIUM, CHROMIUM_ARGS

OUT = "/tmp/burstcheck"


def report(pages: list[Page], label: str, shot: str) -> None:
    """Each page's status line and error box, and a screenshot of each."""
    for i, page in enumerate(pages):
        error = page.locator("#error").text_content() if page.locator("#error").is_visible() else ""
        print(i, label, "status:", page.locator("#status").text_content(), "| error:", error)
        page.screenshot(path=f"{OUT}/page{i}_{shot}.png")


def main(url: str) -> None:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        pages = []
        for _ in range(5):
            page = browser.new_context(viewport={"width": 1000, "height": 760}).new_page()
            page.goto(f"{url}/director.html", wait_until="commit")
            pages.append(page)
        time.sleep(8)
        report(pages, "", "t8")
        for page in pages:  # the admitted ones direct
            if not page.locator("#error").is_visible():
                page.fill("#prompt", "a snowy winter day")
                page.click("#direct")
        time.sleep(12)
        for page in pages:  # the refused ones press Retry
            if page.locator("#error").is_visible() and page.locator("#error .retry").count():
                page.locator("#error .retry").click()
        time.sleep(8)
        report(pages, "after retry", "t28")
        browser.close()


if __name__ == "__main__":
    main(sys.argv[1])
