"""The web chat as a client of many chats, in a real browser (Debian's chromium through Playwright, as
test_web_browser.py) against the real `herald run` process: two chats, the list showing both with their titles,
switching between them keeping each history, a reload (and a browser that never saw them) keeping the list,
rename and delete, search finding a message and opening its chat, a code block's Copy button, files uploaded
with a message (an image shown inline), and the page at a phone's width (390 px) without horizontal scrolling.

Screenshots are kept in the test's tmp dir (chats-desktop.png, chats-search.png, chats-phone.png,
chats-phone-list.png, chats-phone-code.png) for a person to look at. Waits go through locators: the page's
policy forbids eval.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Herald
from tests.e2e.test_web_browser import assistant, browser_page, send, web_url  # noqa: F401 - the fixture
from tests.fakes.llm import FakeLLMThread, Reply
from tests.platforms.web.test_web_chats import png

pytestmark = [pytest.mark.e2e, pytest.mark.browser]
expect = pytest.importorskip("playwright.sync_api").expect

CODE_REPLY = """Here is the script:

```sh
for f in *.log; do gzip "$f"; done
```

and a very long line: """ + "x" * 300 + """

| a | b | c | d | e | f | g | h |
|---|---|---|---|---|---|---|---|
| """ + " | ".join(["a rather long cell"] * 8) + " |"


def names(page: Any) -> Any:
    return page.locator("#chats .chat .name")


def no_horizontal_scroll(page: Any) -> None:
    width = page.evaluate("document.documentElement.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.evaluate("document.body.scrollWidth") <= width
    # Nor does anything in the chat stick out of it (a wide table or code block scrolls inside its message).
    assert page.locator("#log").evaluate("el => el.scrollWidth <= el.clientWidth")


def _two_chats_and_switching(page: Any) -> None:
    # Two chats, each with its own question.
    send(page, "Where is the lighthouse keeper tonight?")
    expect(assistant(page, "echo: Where is the lighthouse keeper tonight?")).to_be_visible()
    page.click("#newchat")
    expect(page.locator("#log .msg")).to_have_count(0)
    send(page, "A recipe for plum dumplings, please")
    expect(assistant(page, "echo: A recipe for plum dumplings")).to_be_visible()
    expect(names(page)).to_have_text(["A recipe for plum dumplings, please",
                                      "Where is the lighthouse keeper tonight?"])
    expect(page.locator("#title")).to_have_text("A recipe for plum dumplings, please")

    # Switching keeps each history.
    page.locator("#chats .chat", has_text="lighthouse").click()
    expect(page.locator("#log .msg")).to_have_text(["Where is the lighthouse keeper tonight?",
                                                    "echo: Where is the lighthouse keeper tonight?"])
    page.locator("#chats .chat", has_text="dumplings").click()
    expect(page.locator("#log .msg")).to_have_text(["A recipe for plum dumplings, please",
                                                    "echo: A recipe for plum dumplings, please"])


def _copy_a_code_block(page: Any, herald: Herald, fake_llm: FakeLLMThread) -> None:
    # A code block gets a Copy button that copies it.
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=herald.base)
    fake_llm.script(Reply(CODE_REPLY))
    send(page, "how do I compress the logs?")
    code = assistant(page, "Here is the script")
    code.get_by_role("button", name="Copy").click()
    expect(code.get_by_role("button", name="Copied")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == 'for f in *.log; do gzip "$f"; done\n'


def _reload_keeps_the_list(page: Any) -> None:
    # A reload keeps the list and the open chat; so does a browser that never saw them (the list is the server's).
    page.reload()
    expect(page.locator("#status")).to_have_text("connected")
    expect(names(page)).to_have_count(2)
    expect(page.locator('#chats .chat[aria-current="true"] .name')).to_have_text("A recipe for plum dumplings, please")
    expect(page.locator("#log .msg")).to_have_count(4)
    page.evaluate("localStorage.removeItem('herald_chat')")
    page.reload()
    expect(names(page)).to_have_text(["New chat", "A recipe for plum dumplings, please",
                                      "Where is the lighthouse keeper tonight?"])


def _rename(page: Any) -> None:
    # Rename the lighthouse chat: the list, the header and the chat's /title agree, after a reload too.
    page.locator("#chats .chat", has_text="lighthouse").click()
    page.click("#rename")
    page.fill("#renameinput", "Lighthouse <b>night</b> shift")
    page.press("#renameinput", "Enter")
    expect(page.locator("#title")).to_have_text("Lighthouse <b>night</b> shift")
    page.reload()
    expect(page.locator("#chats .chat", has_text="Lighthouse <b>night</b> shift")).to_have_count(1)
    send(page, "/title")
    expect(assistant(page, "Title: Lighthouse")).to_be_visible()


def _search(page: Any, tmp_path: Path) -> None:
    # Search finds a message and opens its chat with the message marked.
    page.fill("#search", "dumplings")
    result = page.locator("#results .result")
    expect(result.first).to_be_visible()
    expect(result.first.locator(".name")).to_have_text("A recipe for plum dumplings, please")
    expect(result.first.locator("mark").first).to_have_text(re.compile("dumplings", re.I))
    page.screenshot(path=str(tmp_path / "chats-search.png"), full_page=True)
    result.first.click()
    expect(page.locator('#chats .chat[aria-current="true"] .name')).to_have_text("A recipe for plum dumplings, please")
    expect(page.locator("#log .msg.hit").first).to_contain_text("dumplings")
    page.fill("#search", "zeppelin")
    expect(page.locator("#results")).to_have_text("No messages found.")
    page.fill("#search", "")
    expect(page.locator("#chats")).to_be_visible()


def _files(page: Any, tmp_path: Path) -> None:
    # Files with a message: the image shown inline, the document as a link; the agent got both.
    doc = tmp_path / "notes.txt"
    doc.write_text("remember the milk")
    image = tmp_path / "dot.png"
    image.write_bytes(png(160, 90))
    page.set_input_files("#file", [str(image), str(doc)])
    expect(page.locator("#pending .chip")).to_have_count(2)
    send(page, "what are these?")
    sent = page.locator("#log .msg.user", has_text="what are these?")
    expect(sent.locator("img")).to_have_count(1)
    expect(sent.locator("a.file")).to_contain_text("notes.txt")
    expect(sent.locator("img")).to_have_js_property("naturalWidth", 160)  # loaded, through the page's policy
    expect(assistant(page, "echo: what are these?")).to_contain_text("notes.txt")
    expect(page.locator("#pending .chip")).to_have_count(0)
    page.screenshot(path=str(tmp_path / "chats-desktop.png"), full_page=True)


def _delete(page: Any) -> None:
    # Delete the lighthouse chat (two clicks): gone from the list, from search, after a reload too.
    page.locator("#chats .chat", has_text="Lighthouse").click()
    page.click("#delete")
    page.get_by_role("button", name="Confirm delete").click()
    expect(page.locator("#chats .chat", has_text="Lighthouse")).to_have_count(0)
    page.reload()
    expect(page.locator("#status")).to_have_text("connected")
    expect(page.locator("#chats .chat", has_text="Lighthouse")).to_have_count(0)
    page.fill("#search", "lighthouse keeper")
    expect(page.locator("#results")).to_have_text("No messages found.")
    page.fill("#search", "")
    expect(page.locator("#chats")).to_be_visible()


def _phone_width(page: Any, tmp_path: Path) -> None:
    # A phone's width: nothing scrolls sideways, even the chat with the wide table and the long line; the list
    # slides in from the menu button.
    page.set_viewport_size({"width": 390, "height": 844})
    expect(page.locator("#sidebar")).to_be_hidden()
    page.click("#menu")
    expect(page.locator("#sidebar")).to_be_visible()
    no_horizontal_scroll(page)
    page.screenshot(path=str(tmp_path / "chats-phone-list.png"))
    page.locator("#chats .chat", has_text="dumplings").click()
    expect(page.locator("#sidebar")).to_be_hidden()
    expect(page.locator("#log .msg")).to_have_count(6)
    no_horizontal_scroll(page)
    page.screenshot(path=str(tmp_path / "chats-phone.png"))
    page.locator("#log .msg.assistant", has_text="Here is the script").scroll_into_view_if_needed()
    no_horizontal_scroll(page)
    page.screenshot(path=str(tmp_path / "chats-phone-code.png"))
    page.click("#menu")
    page.click("#newchat")
    expect(page.locator("#sidebar")).to_be_hidden()
    expect(page.locator("#title")).to_have_text("New chat")


def test_chats_in_a_browser(herald: Herald, fake_llm: FakeLLMThread, browser_page: Any,  # noqa: F811
                            tmp_path: Path) -> None:
    page = browser_page
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    page.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type == "error" else None)
    page.goto(web_url(herald))
    expect(page.locator("#status")).to_have_text("connected")
    expect(page.locator("#title")).to_have_text("New chat")
    _two_chats_and_switching(page)
    _copy_a_code_block(page, herald, fake_llm)
    _reload_keeps_the_list(page)
    _rename(page)
    _search(page, tmp_path)
    _files(page, tmp_path)
    _delete(page)
    _phone_width(page, tmp_path)
    print(f"screenshots: {tmp_path}")
    assert problems == [], problems
