"""The web chat's server side: replies rendered from markdown to safe HTML, the favicon, the page's token form,
and the address logged at start without the token."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from gateway.platforms.web.markdown import to_html
from tests.fakes.llm import Reply

MARKDOWN = """# Results

Some **bold** and `code`.

- one
- two

```python
def f():
    if x:
        return  1
```

| name | value |
|------|-------|
| a    | 1     |

[docs](https://example.org/docs)"""


def test_markdown_becomes_html_elements() -> None:
    html = to_html(MARKDOWN)
    for fragment in ("<h1>Results</h1>", "<strong>bold</strong>", "<code>code</code>", "<ul>\n<li>one</li>",
                     "<table>", "<th>name</th>", "<td>1</td>", '<pre><code class="language-python">'):
        assert fragment in html, fragment
    # Code keeps its whitespace exactly (indentation and the double space).
    assert "def f():\n    if x:\n        return  1\n" in html
    assert '<a href="https://example.org/docs" target="_blank" rel="noopener noreferrer">docs</a>' in html


@pytest.mark.parametrize("hostile", [
    "<script>alert(1)</script>",
    '<img src="x" onerror="alert(1)">',
    "<iframe src='https://evil.example'></iframe>",
    '<a href="https://evil.example" onclick="steal()">x</a>',
])
def test_raw_html_from_the_model_is_escaped(hostile: str) -> None:
    html = to_html(f"before {hostile} after")
    assert "<script" not in html and "<img" not in html and "<iframe" not in html and "onclick=\"" not in html
    assert "&lt;" in html


@pytest.mark.parametrize("link", ["[x](javascript:alert(1))", "[x](vbscript:msgbox)", "[x](data:text/html;base64,PHNj)",
                                  "![pixel](https://tracker.example/p.png)"])
def test_dangerous_links_and_images_are_not_rendered(link: str) -> None:
    html = to_html(link)
    assert "javascript:" not in html.split("href")[-1] or "href" not in html
    assert "<img" not in html and 'href="javascript' not in html and 'href="vbscript' not in html
    assert 'href="data' not in html


def test_only_the_chats_own_files_are_shown_as_images() -> None:
    own = "/chat/files/" + "a" * 32 + "/chart.png?sig=" + "b" * 32
    html = to_html(f'![the <b>chart</b>]({own}) and ![elsewhere](https://example.org/x.png)')
    assert f'<img src="{own}" alt="the &lt;b&gt;chart&lt;/b&gt;" loading="lazy">' in html
    assert '<a href="https://example.org/x.png" target="_blank" rel="noopener noreferrer">elsewhere</a>' in html
    assert html.count("<img") == 1
    # The address must be exactly a file's: another path of this site, or a file's without a signature, is not.
    for other in ("/api/v1/status", "/chat/files/" + "a" * 32 + "/x.png",
                  "/chat/files/../../web_token?sig=" + "b" * 32):
        assert "<img" not in to_html(f"![x]({other})"), other


async def _web_runner(make_runner: Any) -> tuple[Any, Any, str]:
    runner, _ = await make_runner({"platforms": {"web": {"enabled": True}}})
    return runner, runner.adapters["web"], f"http://127.0.0.1:{runner.http_port}"


async def test_the_api_and_the_stream_carry_the_rendered_reply(make_runner: Any, fake_llm: Any) -> None:
    _runner, web, base = await _web_runner(make_runner)
    fake_llm.script(Reply(MARKDOWN))
    headers = {"Authorization": f"Bearer {web.token}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.get(f"{base}/api/v1/chats/c/events") as stream:
            await stream.content.readline()  # ": connected"
            async with http.post(f"{base}/api/v1/messages", json={"chat_id": "c", "user_id": "owner",
                                                                  "text": "<b>hi</b>"}) as r:
                assert r.status == 202
            frames = b""
            while b'"role": "assistant"' not in frames:
                frames += await asyncio.wait_for(stream.content.readany(), 10)
        assert b"<h1>Results</h1>" in frames
        for _ in range(100):
            async with http.get(f"{base}/api/v1/chats/c/messages") as r:
                msgs = (await r.json())["messages"]
            if len(msgs) == 2:
                break
            await asyncio.sleep(0.05)
    user, reply = msgs
    assert "html" not in user and user["text"] == "<b>hi</b>"  # the user's text is shown as typed, by the page
    assert reply["text"] == MARKDOWN and "<table>" in reply["html"] and "<h1>Results</h1>" in reply["html"]


async def test_favicon_and_the_token_form(make_runner: Any) -> None:
    _runner, _web, base = await _web_runner(make_runner)
    async with aiohttp.ClientSession() as http:
        for path in ("/favicon.ico", "/favicon.svg"):
            async with http.get(base + path) as r:
                assert r.status == 200 and r.content_type == "image/svg+xml"
                assert (await r.read()).startswith(b"<svg")
        async with http.get(base + "/") as r:
            page = await r.text()
    assert 'rel="icon" href="/favicon.svg"' in page
    # Its script and style are files of its own, and its policy lets nothing else run.
    assert "<script>" not in page and "<style>" not in page and 'src="/chat/static/chat.js"' in page
    assert r.headers["Content-Security-Policy"].startswith("default-src 'self';")
    # Without a token the page asks for one and says where to get it.
    assert 'id="tokenform"' in page and "herald web-url" in page


async def test_with_the_web_chat_off_its_page_says_so_and_the_api_and_dashboard_are_closed(make_runner: Any) -> None:
    runner, _ = await make_runner()  # the web chat is off: no adapter guards the API
    base = f"http://127.0.0.1:{runner.http_port}"
    async with aiohttp.ClientSession(headers={"Authorization": "Bearer anything"}) as http:
        async with http.get(base + "/") as r:
            assert r.status == 404 and await r.text() == "The web chat is disabled (platforms.web.enabled)."
        async with http.get(base + "/dashboard") as r:
            assert r.status == 404  # a token form nobody could fill in
        for path in ("/api/v1/status", "/api/v1/dashboard/view", "/api/v1/chats/c/messages"):
            async with http.get(base + path) as r:
                assert r.status == 401, path
        async with http.get(base + "/favicon.svg") as r:
            assert r.status == 200  # Herald's icon, not the web chat's


async def test_the_daemon_logs_the_address_without_the_token(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from gateway.cli.daemon import _serve
    from gateway.config import parse_config, resolve_paths
    from gateway.kernel.logs import close_logging, configure_logging
    from gateway.platforms.web import TOKEN_FILE

    monkeypatch.setenv("HERALD_HOME", str(tmp_path / "home"))
    paths = resolve_paths()
    token_file = paths.home / TOKEN_FILE
    cfg = parse_config({"http": {"port": 0}})
    configure_logging(paths.logs_dir, "info", console=False)
    try:
        serve = asyncio.create_task(_serve(cfg, paths))
        for _ in range(200):
            if token_file.exists() and "web_chat" in (paths.logs_dir / "herald.log").read_text():
                break
            await asyncio.sleep(0.05)
        import os
        import signal

        os.kill(os.getpid(), signal.SIGTERM)  # _serve's own handler: a clean stop
        assert await asyncio.wait_for(serve, 30) == 0
    finally:
        close_logging()
    token = token_file.read_text().strip()
    (event,) = [json.loads(line) for line in (paths.logs_dir / "herald.log").read_text().splitlines()
                if '"web_chat"' in line]
    assert event["url"].startswith("http://127.0.0.1:") and token not in json.dumps(event)
    out = capsys.readouterr().out
    # stdout is not a terminal here (systemd, Docker, a pipe): the address, and where to get the token.
    assert token not in out and "herald web-url" in out
