"""web_fetch and web_search against local aiohttp servers.

Every server here listens on 127.0.0.1, which the address rules refuse: a test that must reach one says so —
``allow_private`` for the whole call, or a judge that lets exactly that server's port through and applies the
real rules to everything else (the redirects)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from tools import online
from tools.config import ToolsConfig
from tools.registry import ToolContext, load_builtin_tools

ARTICLE = """<!doctype html><html><head><title>Release notes</title></head><body>
<nav><a href="/">Home</a> <a href="/blog">Blog</a> <a href="/shop">Shop</a></nav>
<article><h1>Herald 2.0 is out</h1>
<p>The gateway now lets the agent ask questions, send messages to other chats and read pages. Each of these
was asked for by many users, and each of them is described below in some detail.</p>
<p>Steering lets a person add to a running turn without stopping it: the agent reads the message before its
next step, which keeps long tasks on track when plans change halfway.</p></article>
<footer>© Example Corp — cookie settings — imprint</footer></body></html>"""


@pytest.fixture
async def site() -> AsyncIterator[Any]:
    app = web.Application()

    async def article(_r: web.Request) -> web.Response:
        return web.Response(text=ARTICLE, content_type="text/html")

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound(request.query["to"])

    async def long(_r: web.Request) -> web.Response:
        paragraphs = "".join(f"<p>Paragraph {n}: {'words that go on and on ' * 8}</p>" for n in range(40))
        return web.Response(text=f"<html><body><article>{paragraphs}</article></body></html>",
                            content_type="text/html")

    async def binary(_r: web.Request) -> web.Response:
        return web.Response(body=b"\x89PNG\r\n", content_type="image/png")

    async def searx(request: web.Request) -> web.Response:
        assert request.query["format"] == "json"
        q = request.query["q"]
        return web.json_response({"results": [{"title": f"{q} {n}", "url": f"https://example.org/{n}",
                                               "content": f"about {q}"} for n in range(10)]})

    app.add_routes([web.get("/article", article), web.get("/redirect", redirect), web.get("/long", long),
                    web.get("/logo.png", binary), web.get("/search", searx)])
    runner = web.AppRunner(app)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield type("Site", (), {"port": port, "url": f"http://127.0.0.1:{port}"})
    await runner.cleanup()


def context(**tools_cfg: Any) -> ToolContext:
    records: list[tuple[str, ...]] = []
    ctx = ToolContext("qa:dm:c1", "/tmp", threading.Event(), ToolsConfig.model_validate(tools_cfg),
                      extras={"audit": lambda *a: records.append(a[:4])})
    ctx.extras["records"] = records
    return ctx


async def call(name: str, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    registry = load_builtin_tools()
    return json.loads(await asyncio.to_thread(registry.dispatch, name, args, ctx))


async def test_a_page_comes_back_as_its_article_text_with_title_and_final_address(site):
    ctx = context(web_fetch={"allow_private": True})  # the test's server is on loopback: allowed here only
    page = await call("web_fetch", {"url": f"{site.url}/redirect?to=/article"}, ctx)
    assert page["url"] == f"{site.url}/article" and page["status"] == 200
    assert page["title"] in ("Release notes", "Herald 2.0 is out")
    assert "Steering lets a person add to a running turn" in page["text"]
    assert "cookie settings" not in page["text"] and "Shop" not in page["text"]
    assert ctx.extras["records"][-1][:3] == ("web_fetch", f"{site.url}/redirect?to=/article", "fetched")


async def test_the_text_is_capped(site):
    page = await call("web_fetch", {"url": f"{site.url}/long"},
                      context(web_fetch={"allow_private": True, "max_chars": 500}))
    assert page["truncated"] is True and len(page["text"]) <= 502 and page["text"].startswith("Paragraph 0")


async def test_not_a_page_is_refused(site):
    result = await call("web_fetch", {"url": f"{site.url}/logo.png"}, context(web_fetch={"allow_private": True}))
    assert "not text" in result["error"]


@pytest.mark.parametrize("url, why", [
    ("http://127.0.0.1:9/", "loopback"),
    ("http://10.1.2.3/", "private"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://[::1]:9/", "loopback"),
    ("http://[::ffff:127.0.0.1]:9/", "loopback"),
    ("http://localhost:9/", "loopback"),  # a name that resolves to 127.0.0.1 (and ::1)
    ("ftp://example.org/file", "only http and https"),
    ("file:///etc/passwd", "only http and https"),
])
async def test_addresses_of_this_machine_and_private_networks_are_refused(url, why):
    ctx = context()
    result = await call("web_fetch", {"url": url}, ctx)
    assert result["error"].startswith("not fetched") and why in result["error"], result
    assert ctx.extras["records"][-1][2] == "refused"


def only(port: int) -> online.Judge:
    """The real rules, except for the test's own server (127.0.0.1 on ``port``), which the test allows."""
    strict = online.rules(allow_private=False)
    return lambda ip, p: None if (ip, p) == ("127.0.0.1", port) else strict(ip, p)


@pytest.mark.parametrize("target, why", [
    ("http://127.0.0.1:{other}/article", "loopback"),
    ("http://10.0.0.7/", "private"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://[::1]:{other}/", "loopback"),
        ("http://localhost:{other}/article", "loopback"),  # a name: judged by the addresses it resolves to
    ("gopher://example.org/", "only http and https"),
])
async def test_a_redirect_to_any_of_them_is_refused(site, target, why):
    cfg = ToolsConfig().web_fetch
    assert (await online.fetch(f"{site.url}/article", cfg, only(site.port)))["status"] == 200
    to = target.format(port=site.port, other=site.port + 1)
    with pytest.raises(online.Refused, match=why):
        await online.fetch(f"{site.url}/redirect?to={to}", cfg, only(site.port))


async def test_search_through_searxng(site):
    ctx = context(web_search={"url": site.url, "max_results": 3})
    result = await call("web_search", {"query": "herald"}, ctx)
    assert [r["title"] for r in result["results"]] == ["herald 0", "herald 1", "herald 2"]
    assert result["results"][0] == {"title": "herald 0", "url": "https://example.org/0", "snippet": "about herald"}


async def test_search_is_off_until_a_service_is_configured():
    result = await call("web_search", {"query": "herald"}, context())
    assert "no search service is configured" in result["error"]
    assert "web_search" not in load_builtin_tools().names(ToolsConfig())
    assert "web_fetch" in load_builtin_tools().names(ToolsConfig())
