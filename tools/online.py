"""``web_fetch`` and ``web_search``: the agent reads a page from the internet, and searches it.

``web_fetch`` takes an http(s) address and gives back the page's readable text (trafilatura's extraction, as
markdown), its title and the address it ended at, within ``tools.web_fetch``'s caps on time, bytes read and
characters returned. The daemon makes the request itself, so the sandbox's egress rules are applied here the
same way (tools/egress.py's ``refusal``): a name is resolved first and every address it resolves to is
judged — loopback, private, link-local (cloud metadata), CGNAT, multicast and reserved ones are refused, an
IPv6 address carrying an IPv4 one is judged by that — and the connection goes to the very addresses judged
(a resolver of our own hands them to aiohttp), so a name that resolves differently a moment later cannot
slip past. Redirects are followed by hand, each hop judged the same way. ``allow_private: true`` lifts the
address rules (a page on this machine or the LAN); http(s) only, always.

``web_search`` asks a search service (``tools.web_search``: SearXNG's JSON API) and is off while no service is
configured. The service is the operator's own, so no address rule applies to it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin, urlsplit

from tools.egress import refusal
from tools.registry import ToolContext, error, short, tool

MAX_REDIRECTS = 5
USER_AGENT = "Herald/1 (an assistant reading a page for its user)"
TEXT_TYPES = ("text/plain", "text/markdown", "application/json", "text/csv", "application/xml", "text/xml")


class Refused(Exception):
    """The address is not one the agent may reach: ``str()`` says which and why."""


# (ip, port) -> why it may not be reached, or None. The rules of tools/egress.py; tests judge their own server.
Judge = Callable[[str, int], str | None]


def rules(allow_private: bool) -> Judge:
    def judge(ip: str, _port: int) -> str | None:
        if allow_private:
            return None
        return refusal(ipaddress.ip_address(ip.split("%")[0]))

    return judge


def _literal(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return None


def _resolver(judge: Judge) -> Any:
    from aiohttp.abc import AbstractResolver

    class Judged(AbstractResolver):
        """Resolves like the system, then lets aiohttp connect only to addresses ``judge`` passed."""

        async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> Any:
            loop = asyncio.get_running_loop()
            try:
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, family=family)
            except socket.gaierror as exc:
                raise OSError(f"{host}: the name does not resolve ({exc.strerror})") from None
            out = []
            for fam, _type, proto, _canon, sockaddr in infos:
                ip = str(sockaddr[0])
                why = judge(ip, port)
                if why is not None:  # one refused address refuses the name: it may be handed out next time
                    raise Refused(f"{host} resolves to {ip}, {why}")
                out.append({"hostname": host, "host": ip, "port": port, "family": fam, "proto": proto,
                            "flags": socket.AI_NUMERICHOST})
            return out

        async def close(self) -> None:
            return None

    return Judged()


def _check_url(url: str, judge: Judge) -> tuple[str, int]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise Refused(f"only http and https addresses can be fetched (not {parts.scheme or 'this'}:)")
    host = parts.hostname
    if not host:
        raise Refused("the address has no host")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    ip = _literal(host)
    if ip is not None and (why := judge(ip, port)) is not None:  # aiohttp never asks the resolver for an address
        raise Refused(f"{host} is {why}")
    return host, port


async def fetch(url: str, cfg: Any, judge: Judge | None = None) -> dict[str, Any]:
    """The page at ``url`` as the tool returns it (``cfg``: tools.web_fetch); raises ``Refused``."""
    import aiohttp

    judge = judge or rules(cfg.allow_private)
    started = time.monotonic()
    timeout = aiohttp.ClientTimeout(total=cfg.timeout_seconds)
    connector = aiohttp.TCPConnector(resolver=_resolver(judge), use_dns_cache=False, limit=2)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False,
                                     headers={"User-Agent": USER_AGENT}) as http:
        current = url
        for _hop in range(MAX_REDIRECTS + 1):
            _check_url(current, judge)
            async with http.get(current, allow_redirects=False) as resp:
                if resp.status in (301, 302, 303, 307, 308) and resp.headers.get("Location"):
                    current = urljoin(current, resp.headers["Location"])
                    continue
                body, cut = await _read(resp, cfg.max_bytes)
                page = _readable(body, resp, current, cfg.max_chars)
                page.update(status=resp.status, bytes=len(body), truncated_download=cut,
                            seconds=round(time.monotonic() - started, 2))
                return page
        raise Refused(f"more than {MAX_REDIRECTS} redirects")


async def _read(resp: Any, limit: int) -> tuple[bytes, bool]:
    chunks, size = [], 0
    async for chunk in resp.content.iter_chunked(65536):
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


def _readable(body: bytes, resp: Any, url: str, max_chars: int) -> dict[str, Any]:
    ctype = (resp.headers.get("Content-Type") or "").split(";")[0].strip().lower()
    charset = resp.charset or "utf-8"
    title = None
    if ctype in ("text/html", "application/xhtml+xml") or (not ctype and body.lstrip()[:1] == b"<"):
        import trafilatura

        html = body.decode(charset, errors="replace")
        text = trafilatura.extract(html, url=url, output_format="markdown", include_links=True,
                                   include_tables=True, favor_recall=True)
        meta = trafilatura.extract_metadata(html, default_url=url)
        title = getattr(meta, "title", None) if meta is not None else None
        if not text:  # no main content found (a bare page): its text as a whole
            text = trafilatura.html2txt(html) or ""
    elif ctype.startswith("text/") or ctype in TEXT_TYPES:
        text = body.decode(charset, errors="replace")
    else:
        raise Refused(f"the page is not text ({ctype or 'unknown type'}); only pages and text files can be read")
    cut = len(text) > max_chars
    return {"url": url, "title": title, "content_type": ctype or None,
            "text": text[:max_chars] + ("\n…" if cut else ""), "truncated": cut}


def _audit(ctx: ToolContext, kind: str, subject: str, outcome: str, detail: str | None = None) -> None:
    record = ctx.extras.get("audit")
    if record is not None:
        record(kind, subject, outcome, detail, ctx)


@tool(
    "web_fetch",
    "Read a page from the internet: its readable text (as markdown, menus and ads left out), its title and the "
    "address it ended at after redirects. http and https addresses only; addresses of this machine and private "
    "networks are refused unless the operator allowed them. Long pages are cut.",
    {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "The page's address (http:// or https://)."}},
        "required": ["url"],
    },
    toolset="internet",
    check_enabled=lambda config: bool(config.web_fetch.enabled),
    disabled_reason=lambda _c: "reading pages is disabled in the configuration (tools.web_fetch.enabled: false)",
    progress=lambda args: f"reading {short(args.get('url', ''), 60)}",
)
def web_fetch(args: dict[str, Any], ctx: ToolContext) -> Any:
    url = str(args.get("url") or "").strip()
    if not url:
        return error("url is empty")
    try:
        page = asyncio.run(fetch(url, ctx.config.web_fetch))
    except Refused as exc:
        _audit(ctx, "web_fetch", url, "refused", str(exc))
        return error(f"not fetched: {exc}")
    except TimeoutError:
        _audit(ctx, "web_fetch", url, "failed", "timed out")
        return error(f"not fetched: no answer within {ctx.config.web_fetch.timeout_seconds:g} s")
    except Exception as exc:
        _audit(ctx, "web_fetch", url, "failed", f"{type(exc).__name__}: {exc}")
        return error(f"not fetched: {type(exc).__name__}: {exc}")
    _audit(ctx, "web_fetch", url, "fetched", f"HTTP {page['status']} {page['url']}")
    return page


async def search(query: str, cfg: Any) -> list[dict[str, Any]]:
    """SearXNG's JSON API (``/search?format=json``): title, address and snippet of the first results."""
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=cfg.timeout_seconds)
    async with aiohttp.ClientSession(timeout=timeout, trust_env=False) as http, \
            http.get(f"{cfg.url}/search", params={"q": query, "format": "json"}) as resp:
        if resp.status != 200:
            raise RuntimeError(f"the search service answered HTTP {resp.status}")
        body = json.loads(await resp.text())
    results = body.get("results") if isinstance(body, dict) else None
    return [{"title": r.get("title"), "url": r.get("url"), "snippet": r.get("content")}
            for r in (results or [])[: cfg.max_results] if isinstance(r, dict)]


@tool(
    "web_search",
    "Search the internet: the first results' titles, addresses and snippets. Read a result with web_fetch.",
    {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to search for."}},
        "required": ["query"],
    },
    toolset="internet",
    check_enabled=lambda config: bool(config.web_search.url),
    disabled_reason=lambda _c: "no search service is configured (tools.web_search.url)",
    progress=lambda args: f"searching for {short(args.get('query', ''), 60)}",
)
def web_search(args: dict[str, Any], ctx: ToolContext) -> Any:
    query = str(args.get("query") or "").strip()
    if not query:
        return error("query is empty")
    try:
        results = asyncio.run(search(query, ctx.config.web_search))
    except Exception as exc:
        why = "no answer in time" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
        _audit(ctx, "web_search", query, "failed", why)
        return error(f"the search failed: {why}")
    _audit(ctx, "web_search", query, "searched", f"{len(results)} result(s)")
    return {"query": query, "results": results}
