"""The web chat as a client of many chats, through its HTTP API: the list (titles from the first message or a
rename, last activity, newest first), rename, delete (refused while a turn runs; the chat's log, its messages
and its place in the search gone), search over every chat, files uploaded with a message (capped, copied to the
agent's media folder before the turn, served back at a signed address, inline only when they are images), and
files the agent sends (``send_file``), logged once whatever the retries."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.platforms.base import Attachment, OutboundMessage
from tests.fakes.llm import Reply, last_user_message, message_text
from tests.support.polling import wait_until


def png(width: int = 4, height: int = 3) -> bytes:
    """A small valid PNG (red pixels), made by hand: no imaging library needed."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


class Client:
    def __init__(self, http: aiohttp.ClientSession, base: str) -> None:
        self.http, self.base = http, base

    async def call(self, method: str, path: str, **kw: Any) -> tuple[int, Any]:
        async with self.http.request(method, self.base + path, **kw) as r:
            body = await r.json() if r.content_type == "application/json" else await r.read()
            return r.status, body

    async def say(self, chat: str, text: str) -> None:
        status, body = await self.call("POST", "/api/v1/messages", json={"chat_id": chat, "user_id": "owner",
                                                                         "text": text})
        assert status == 202, body

    async def messages(self, chat: str) -> list[dict[str, Any]]:
        return (await self.call("GET", f"/api/v1/chats/{chat}/messages"))[1]["messages"]

    async def answered(self, chat: str, n: int = 1) -> list[dict[str, Any]]:
        async def met() -> list[dict[str, Any]] | None:
            msgs = await self.messages(chat)
            return msgs if sum(m["role"] == "assistant" for m in msgs) >= n else None

        return await wait_until(met, what=f"{n} answer(s) in {chat}", interval=0.05)

    async def chats(self) -> list[dict[str, Any]]:
        return (await self.call("GET", "/api/v1/chats"))[1]["chats"]


@pytest.fixture
async def web(make_runner: Any) -> Any:
    runner, _qa = await make_runner({"platforms": {"web": {"enabled": True, "max_upload_mb": 0.01}}})
    adapter = runner.adapters["web"]
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {adapter.token}"}) as http:
        yield runner, adapter, Client(http, f"http://127.0.0.1:{runner.http_port}")


async def test_the_list_rename_and_search(web: Any) -> None:
    _runner, _adapter, api = web
    await api.say("a", "Where is the lighthouse keeper tonight?")
    await api.answered("a")
    await api.say("b", "A recipe for plum dumplings, please")
    await api.answered("b")
    listed = await api.chats()
    assert [(c["id"], c["title"]) for c in listed] == [("b", "A recipe for plum dumplings, please"),
                                                       ("a", "Where is the lighthouse keeper tonight?")]
    assert listed[0]["last_activity"] >= listed[1]["last_activity"] > 0

    status, body = await api.call("PATCH", "/api/v1/chats/a", json={"title": "  The\nlighthouse  "})
    assert (status, body) == (200, {"id": "a", "title": "The lighthouse"})
    assert {c["id"]: c["title"] for c in await api.chats()}["a"] == "The lighthouse"
    await api.say("a", "/title")  # the chat's command sees the same title
    assert (await api.answered("a", 2))[-1]["text"].startswith("Title: The lighthouse.")
    assert (await api.call("PATCH", "/api/v1/chats/nochat", json={"title": "x"}))[0] == 404
    assert (await api.call("PATCH", "/api/v1/chats/a", json={"title": ""}))[0] == 400

    status, body = await api.call("GET", "/api/v1/search?q=DUMPLINGS")
    assert status == 200
    hits = body["results"]
    assert {(h["chat_id"], h["title"]) for h in hits} == {("b", "A recipe for plum dumplings, please")}
    assert {h["role"] for h in hits} == {"user", "assistant"} and all("dumplings" in h["snippet"] for h in hits)
    assert (await api.call("GET", "/api/v1/search?q=lighthouse+dumplings"))[1]["results"] == []
    assert (await api.call("GET", "/api/v1/search?q="))[1]["results"] == []
    assert (await api.call("GET", "/api/v1/search?q=" + "x" * 501))[0] == 400


async def test_delete_removes_the_chat_and_refuses_while_a_turn_runs(web: Any, fake_llm: Any) -> None:
    runner, _adapter, api = web
    await api.say("gone", "the secret word is marmalade")
    await api.answered("gone")
    await api.say("kept", "marmalade again")
    await api.answered("kept")

    fake_llm.script(Reply("slow", delay=1.5))
    await api.say("gone", "one more")
    key = "web:dm:gone"
    await wait_until(lambda: runner.lanes.busy(key), what="the turn running")
    status, body = await api.call("DELETE", "/api/v1/chats/gone")
    assert status == 409 and "running" in body["error"]
    await api.answered("gone", 2)
    await wait_until(lambda: runner.lanes.busy(key) is None and not runner.lanes.queued(key), what="the turn done")

    assert (await api.call("DELETE", "/api/v1/chats/gone"))[0] == 200
    assert [c["id"] for c in await api.chats()] == ["kept"]
    assert await api.messages("gone") == []
    hits = (await api.call("GET", "/api/v1/search?q=marmalade"))[1]["results"]
    assert [h["chat_id"] for h in hits] == ["kept", "kept"]
    # Writing there again starts afresh: the old conversation is not the model's history any more.
    fake_llm.requests.clear()
    await api.say("gone", "hello again")
    await api.answered("gone")
    sent = fake_llm.requests[-1]["messages"]
    assert not any("marmalade" in str(m.get("content")) for m in sent)


async def test_a_chat_that_moves_is_told_to_the_streams_of_the_others_that_ask(web: Any) -> None:
    _runner, _adapter, api = web
    async with api.http.get(api.base + "/api/v1/chats/watching/events?activity=1") as stream, \
            api.http.get(api.base + "/api/v1/chats/deaf/events") as deaf:
        await stream.content.readline()  # ": connected"
        await deaf.content.readline()
        await api.say("elsewhere", "hi")
        frames = b""
        while b"event: activity" not in frames:
            frames += await stream.content.readany()
        await api.say("deaf", "and here")  # its own message reaches the stream that did not ask for activity
        heard = b""
        while b"and here" not in heard:
            heard += await deaf.content.readany()
    assert b'"chat_id": "elsewhere"' in frames and b'"role"' not in frames  # that it moved, not what was said
    assert b"activity" not in heard and b"elsewhere" not in heard


async def test_files_uploaded_with_a_message(web: Any, fake_llm: Any) -> None:
    _runner, adapter, api = web
    form = aiohttp.FormData()
    form.add_field("user_id", "owner")
    form.add_field("text", "what is in these?")
    form.add_field("file", png(), filename="photo.png", content_type="application/octet-stream")
    form.add_field("file", b"<svg onload='alert(1)'/>", filename="../../evil.svg", content_type="image/svg+xml")
    status, body = await api.call("POST", "/api/v1/chats/f/messages", data=form)
    assert status == 202, body
    msgs = await api.answered("f")
    user = msgs[0]
    assert user["text"] == "what is in these?"
    photo, evil = user["files"]
    assert (photo["name"], photo["kind"], photo["mime"]) == ("photo.png", "image", "image/png")
    assert (evil["name"], evil["kind"]) == ("evil.svg", "document")  # by its bytes, not its name or declared type
    # The agent got both, copied into the media folder, before its turn.
    asked = message_text(last_user_message(fake_llm.requests[-1]))
    copies = [Path(line[2:]) for line in asked.splitlines() if line.startswith("- /")]
    assert sorted(p.name.split("-", 1)[1] for p in copies) == ["evil.svg", "photo.png"]
    assert next(p for p in copies if p.name.endswith("photo.png")).read_bytes() == png()

    async with api.http.get(api.base + photo["url"]) as r:  # no bearer token needed: the address is signed
        assert r.status == 200 and r.content_type == "image/png" and await r.read() == png()
        assert r.headers["X-Content-Type-Options"] == "nosniff"
    async with aiohttp.ClientSession() as anonymous:
        async with anonymous.get(api.base + evil["url"]) as r:
            assert r.status == 200 and r.content_type == "application/octet-stream"
            assert r.headers["Content-Disposition"].startswith("attachment;")
            assert "sandbox" in r.headers["Content-Security-Policy"]
        forged = photo["url"].rsplit("sig=", 1)[0] + "sig=" + "0" * 32
        async with anonymous.get(api.base + forged) as r:
            assert r.status == 403

    # Over the cap (0.01 MB here): refused whole, nothing kept.
    before = set((adapter.files.dir).iterdir())
    big = aiohttp.FormData()
    big.add_field("user_id", "owner")
    big.add_field("file", b"x" * 20_000, filename="big.bin")
    status, body = await api.call("POST", "/api/v1/chats/f/messages", data=big)
    assert status == 413 and "0.01 MB" in body["error"]
    assert set(adapter.files.dir.iterdir()) == before
    assert (await api.call("POST", "/api/v1/chats/f/messages", json={"text": "x"}))[0] == 415
    empty = aiohttp.FormData(default_to_multipart=True)
    empty.add_field("user_id", "owner")
    empty.add_field("text", "  ")
    assert (await api.call("POST", "/api/v1/chats/f/messages", data=empty))[0] == 400


async def test_a_resent_upload_is_one_message_with_the_first_files(web: Any) -> None:
    _runner, adapter, api = web

    def form() -> aiohttp.FormData:
        f = aiohttp.FormData()
        f.add_field("user_id", "owner")
        f.add_field("message_id", "m1")
        f.add_field("file", png(), filename="a.png")
        return f

    assert (await api.call("POST", "/api/v1/chats/r/messages", data=form()))[1]["duplicate"] is False
    assert (await api.call("POST", "/api/v1/chats/r/messages", data=form()))[1]["duplicate"] is True
    msgs = await api.answered("r")
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    assert len(list(adapter.files.dir.iterdir())) == 1


async def test_the_agent_sends_a_file_once(web: Any, tmp_path: Path) -> None:
    _runner, adapter, api = web
    chart = tmp_path / "chart.png"
    chart.write_bytes(png(8, 8))
    attachment = Attachment(str(chart), "chart.png", "image/png", caption="The **chart**", kind="image")
    ids = await adapter.send_file("s", attachment, OutboundMessage(""), idempotency_key="k1")
    assert await adapter.send_file("s", attachment, OutboundMessage(""), idempotency_key="k1") == ids
    chart.write_bytes(b"changed afterwards")  # the chat keeps what was sent
    (msg,) = await api.messages("s")
    assert msg["id"] == ids[0] and "<strong>chart</strong>" in msg["html"]
    (sent,) = msg["files"]
    assert (sent["name"], sent["kind"], sent["size"]) == ("chart.png", "image", len(png(8, 8)))
    async with api.http.get(api.base + sent["url"]) as r:
        assert await r.read() == png(8, 8)
    assert await adapter.file_limit("s") == int(0.01 * 1024 * 1024)
    link = tmp_path / "link.png"
    link.symlink_to(chart)
    with pytest.raises(Exception, match="cannot be read"):
        await adapter.send_file("s", Attachment(str(link), "link.png", "image/png"), OutboundMessage(""))
