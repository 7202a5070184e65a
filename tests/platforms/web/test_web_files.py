"""The web chat's files: the owner uploads (a pasted screenshot) and the model sees the image; files the agent
sends are links behind the token (an image shown inline by the page), once — also when the delivery is
resumed after a crash that fell between storing the file's message and recording it in the outbox."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from sqlalchemy import update

from gateway.storage.tables import inbox, outbox
from tests.fakes.llm import Reply, ToolCall
from tests.support.media import image_bytes, image_parts, workspace_with
from tests.support.polling import wait_until


async def _start(make_runner: Any, **model: Any) -> tuple[Any, Any, str, dict[str, str]]:
    runner, _ = await make_runner({"platforms": {"web": {"enabled": True}}, "model": model})
    web = runner.adapters["web"]
    return runner, web, f"http://127.0.0.1:{runner.http_port}", {"Authorization": f"Bearer {web.token}"}


async def _messages(http: aiohttp.ClientSession, base: str, chat: str) -> list[dict[str, Any]]:
    async with http.get(f"{base}/api/v1/chats/{chat}/messages") as r:
        return (await r.json())["messages"]


async def test_an_uploaded_screenshot_reaches_a_vision_model(make_runner: Any, fake_llm: Any) -> None:
    _runner, _web, base, headers = await _start(make_runner, vision=True)
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.post(f"{base}/api/v1/uploads?name=screen shot.png", data=image_bytes()) as r:
            assert r.status == 201
            upload = await r.json()
        assert upload["name"] == "screen_shot.png"
        async with http.post(f"{base}/api/v1/messages", json={"chat_id": "c", "user_id": "owner", "text": "",
                                                              "files": [upload["file"]]}) as r:
            assert r.status == 202
        await wait_until(lambda: fake_llm.requests, what="the model asked")
        [url] = image_parts(fake_llm.requests[0])
        assert url.startswith("data:image/")
        msgs = await wait_until(lambda: _messages(http, base, "c"), what="the chat log")
        assert msgs[0]["text"] == "📎 screen_shot.png"
        async with http.post(f"{base}/api/v1/messages", json={"chat_id": "c", "user_id": "owner", "text": "x",
                                                              "files": ["../../etc/passwd"]}) as r:
            assert r.status == 400
    async with aiohttp.ClientSession() as anonymous, anonymous.post(f"{base}/api/v1/uploads?name=a.png",
                                                                   data=b"x") as r:
        assert r.status == 401


async def test_send_file_is_a_link_behind_the_token_and_shown_once(make_runner: Any, fake_llm: Any) -> None:
    runner, web, base, headers = await _start(make_runner)
    workspace_with(runner, {"data.csv": b"a,b\n1,2\n", "pic.png": image_bytes(30, 20)})
    fake_llm.script(ToolCall("send_file", {"path": "data.csv"}), ToolCall("send_file", {"path": "pic.png",
                                                                                      "caption": "a *pic*"}),
                    Reply("Both files."))
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.post(f"{base}/api/v1/messages", json={"chat_id": "c", "user_id": "owner",
                                                              "text": "files please"}) as r:
            assert r.status == 202
        msgs = await wait_until(lambda: _files_shown(http, base, 2), what="two files in the chat")
        texts = [m["text"] for m in msgs if m["role"] == "assistant"]
        assert texts[0] == "Both files."
        assert texts[1].startswith("📎 [data.csv](/api/v1/files/") and texts[1].endswith("(8 bytes)")
        assert texts[2].startswith("🖼 [pic.png](/api/v1/files/") and texts[2].endswith("a *pic*")
        link = texts[2].split("](", 1)[1].split(")", 1)[0]
        async with http.get(base + link) as r:
            assert r.status == 200 and r.content_type == "image/png" and await r.read() == image_bytes(30, 20)
        csv = texts[1].split("](", 1)[1].split(")", 1)[0]
        async with http.get(base + csv) as r:
            assert r.content_type == "application/octet-stream" and "attachment" in r.headers["Content-Disposition"]
        # A crash between the file's message and its outbox record: delivery sends it again under its key.
        inbox_id = await runner.store.run_read(lambda c: c.execute(inbox.select()).first().id)
        await runner.store.run_write(lambda c: c.execute(update(outbox).where(outbox.c.chunk_index >= 10_000)
                                                         .values(status="sending")))
        await runner.store.run_write(lambda c: c.execute(update(inbox).values(status="replied")))
        from gateway.media.outgoing import files_sent
        from gateway.platforms.base import OutboundMessage

        files = files_sent(await runner.store.messages.turn_messages(inbox_id))
        await runner.delivery.deliver(web, "c", OutboundMessage("Both files.", attachments=files), inbox_id,
                                      resume=True, finish_inbox=True)
        after = [m["text"] for m in await _messages(http, base, "c") if m["role"] == "assistant"]
        assert after == texts  # nothing shown twice, no "may repeat" notice: the web chat de-duplicates
    async with aiohttp.ClientSession() as anonymous, anonymous.get(base + link) as r:
        assert r.status == 401


async def _files_shown(http: aiohttp.ClientSession, base: str, n: int) -> list[dict[str, Any]] | None:
    msgs = await _messages(http, base, "c")
    shown = [m for m in msgs if m["role"] == "assistant" and "/api/v1/files/" in m["text"]]
    await asyncio.sleep(0)
    return msgs if len(shown) >= n else None
