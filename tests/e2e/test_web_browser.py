"""The web chat in a real browser: Debian's chromium, driven by Playwright through ``executable_path`` (never a
downloaded browser), against the real `herald run` process and the fake model.

Opened without a token the page asks for one; pasting what `herald web-url` printed connects it; a reply's
markdown arrives as HTML elements below the message that caused it; a command sent during a running turn is
answered below itself; an approval button updates its prompt; a wrong token stops the stream and asks again.
The screenshot is kept in the test's tmp dir (web-chat.png) for a person to look at.

The page's Content-Security-Policy (default-src 'self') forbids eval, so waits go through locators (Playwright's
own isolated world), never page.wait_for_function: the test runs under the real policy.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import HERALD_BIN, Herald
from tests.fakes.llm import FakeLLMThread, Reply

pytestmark = [pytest.mark.e2e, pytest.mark.browser]
expect = pytest.importorskip("playwright.sync_api").expect

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

REPLY = """# Disk report

Everything **looks fine**:

- `/` is 41% full
- `/var` is 12% full

```sh
df -h /
  Filesystem  Size  Used
```

| mount | used |
|-------|------|
| /     | 41%  |
| /var  | 12%  |

<script>document.title = "pwned"</script>"""


@pytest.fixture
def browser_page(tmp_path: Path) -> Any:
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium; .ci/run does it): the browser "
                    "test needs a real browser and cannot download one")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the dev extra) is not installed")
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, headless=True, args=ARGS,
            viewport={"width": 1000, "height": 1100})
        try:
            page = context.pages[0] if context.pages else context.new_page()
            page.set_default_timeout(15_000)
            yield page
        finally:
            context.close()


def web_url(herald: Herald) -> str:
    out = subprocess.run([str(HERALD_BIN), "web-url"], env=herald.env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def messages(page: Any) -> list[tuple[str, str]]:
    """(role, text) of every message on the page, top to bottom."""
    return page.eval_on_selector_all(
        "#log .msg", "els => els.map(e => [e.classList.contains('user') ? 'user' : 'assistant', e.innerText])")


def index_of(msgs: list[tuple[str, str]], role: str, pred: Any) -> int:
    return next(i for i, (r, t) in enumerate(msgs) if r == role and pred(t))


def assistant(page: Any, text: str | re.Pattern[str]) -> Any:
    """The first reply whose text contains ``text`` (or matches the pattern)."""
    return page.locator("#log .msg.assistant", has_text=text).first


def send(page: Any, text: str) -> None:
    page.fill("#text", text)
    page.press("#text", "Enter")


def test_the_web_chat_in_a_browser(herald: Herald, fake_llm: FakeLLMThread, browser_page: Any,
                                   tmp_path: Path) -> None:
    page = browser_page
    requests_to_events: list[int] = []
    page.on("response", lambda r: requests_to_events.append(r.status) if "/events" in r.url else None)

    # No token: the form, saying where to get one.
    page.goto(herald.base + "/")
    form = page.locator("#tokenform")
    form.wait_for(state="visible")
    assert "herald web-url" in form.inner_text()
    assert page.locator("#compose").is_hidden()

    # Paste what `herald web-url` printed (the whole address): connected.
    url = web_url(herald)
    assert url.startswith(f"http://127.0.0.1:{herald.port}/#token=")
    page.fill("#tokeninput", url)
    page.click("#tokenform button[type=submit]")
    expect(page.locator("#status")).to_have_text("connected")
    assert form.is_hidden()

    # hello -> the reply below it, rendered: heading, list, code block, table; the raw <script> only as text.
    fake_llm.script(Reply(REPLY))
    send(page, "hello")
    page.wait_for_selector("#log .msg.assistant h1")
    msgs = messages(page)
    assert index_of(msgs, "user", lambda t: t == "hello") < index_of(msgs, "assistant", lambda t: "Disk report" in t)
    reply = page.locator("#log .msg.assistant", has=page.locator("h1"))
    assert reply.locator("h1").inner_text() == "Disk report"
    assert reply.locator("ul > li").count() == 2
    assert reply.locator("pre > code").inner_text() == "df -h /\n  Filesystem  Size  Used\n"
    assert reply.locator("table th").all_inner_texts() == ["mount", "used"]
    assert reply.locator("table tbody tr").count() == 2
    assert reply.locator("script").count() == 0 and page.title() == "Herald"
    assert '<script>document.title = "pwned"</script>' in reply.inner_text()

    # /status while a turn runs: its answer appears below /status.
    send(page, "[sleep=2.5] a slow one")
    expect(page.locator("#typing")).not_to_have_text("")
    send(page, "/status")
    expect(assistant(page, re.compile(r"^Busy"))).to_be_visible()
    msgs = messages(page)
    busy = index_of(msgs, "assistant", lambda t: t.startswith("Busy"))
    assert index_of(msgs, "user", lambda t: t == "/status") < busy
    expect(assistant(page, "echo: [sleep=2.5] a slow one")).to_be_visible(timeout=20_000)

    # An approval button in the page: pressed, the prompt updates and the notice is shown as information.
    target = herald.home / "workspace" / "victim"
    target.mkdir()
    (target / "precious.txt").write_text("keep me")
    send(page, f"[tool=terminal:{json.dumps({'command': f'rm -rf {target}'})}]")
    button = page.get_by_role("button", name="Approve once")
    button.wait_for()
    prompt = page.locator("#log .msg.assistant", has=button)
    prompt_id = prompt.get_attribute("data-id")
    button.click()
    expect(page.locator(f'[data-id="{prompt_id}"]')).to_contain_text("Approved once")
    assert page.locator(f'[data-id="{prompt_id}"] .buttons button').count() == 0  # only its code's Copy is left
    expect(page.locator("#notice")).to_have_text("Approved once.")
    assert page.locator("#error").inner_text() == ""
    expect(assistant(page, re.compile(r"^tool said:"))).to_be_visible(timeout=20_000)
    assert not target.exists()

    shot = tmp_path / "web-chat.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")

    # A wrong token (web_token replaced, another Herald's): the stream stops and the form asks again.
    page.evaluate("localStorage.setItem('herald_token', 'not-the-token')")
    page.reload()
    form.wait_for(state="visible")
    assert "not accepted" in page.locator("#tokenwhy").inner_text()
    before = len(requests_to_events)
    time.sleep(3)  # the old page retried every 2 s forever ("stream 401")
    assert requests_to_events[before:] == []
    assert requests_to_events[-1] == 401
    page.screenshot(path=str(tmp_path / "web-chat-token-form.png"))
