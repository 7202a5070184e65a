"""The web chat's files through the media pipeline: a screenshot the owner uploads with a message reaches a
vision model as an image; files the agent sends come back as the chat's files (their addresses signed with the
token), once — also when the delivery is resumed after a crash that fell between storing the file's message
and recording it in the outbox (the web chat de-duplicates under the same key)."""

from __future__ import annotations

from typing import Any

import aiohttp
from sqlalchemy import update

from gateway.media.outgoing import files_sent
from gateway.platforms.base import OutboundMessage
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
    form = aiohttp.FormData()
    form.add_field("user_id", "owner")
    form.add_field("text", "what does this say?")
    form.add_field("file", image_bytes(), filename="screenshot.png", content_type="image/png")
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.post(f"{base}/api/v1/chats/c/messages", data=form) as r:
            assert r.status == 202, await r.text()
        await wait_until(lambda: fake_llm.requests, what="the model asked")
    [url] = image_parts(fake_llm.requests[0])
    assert url.startswith("data:image/")


async def test_send_file_is_a_file_of_the_chat_shown_once(make_runner: Any, fake_llm: Any) -> None:
    runner, web, base, headers = await _start(make_runner)
    workspace_with(runner, {"data.csv": b"a,b\n1,2\n", "pic.png": image_bytes(30, 20)})
    fake_llm.script(ToolCall("send_file", {"path": "data.csv"}),
                    ToolCall("send_file", {"path": "pic.png", "caption": "a *pic*"}), Reply("Both files."))
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.post(f"{base}/api/v1/messages", json={"chat_id": "c", "user_id": "owner",
                                                              "text": "files please"}) as r:
            assert r.status == 202

        async def shown() -> list[dict[str, Any]] | None:
            msgs = [m for m in await _messages(http, base, "c") if m["role"] == "assistant"]
            return msgs if sum(bool(m.get("files")) for m in msgs) == 2 else None

        answer, csv, pic = await wait_until(shown, what="the answer and two files")
        assert answer["text"] == "Both files."
        assert csv["files"][0]["name"] == "data.csv" and pic["files"][0]["name"] == "pic.png"
        assert pic["text"] == "a *pic*"
        async with http.get(base + pic["files"][0]["url"]) as r:
            assert r.status == 200 and await r.read() == image_bytes(30, 20)
        # A crash between the file's message and its outbox record: delivery sends it again under its key.
        inbox_id = await runner.store.run_read(lambda c: c.execute(inbox.select()).first().id)
        await runner.store.run_write(lambda c: c.execute(update(outbox).where(outbox.c.chunk_index >= 10_000)
                                                         .values(status="sending")))
        await runner.store.run_write(lambda c: c.execute(update(inbox).values(status="replied")))
        files = files_sent(await runner.store.messages.turn_messages(inbox_id))
        await runner.delivery.deliver(web, "c", OutboundMessage("Both files.", attachments=files), inbox_id,
                                      resume=True, finish_inbox=True)
        after = [m for m in await _messages(http, base, "c") if m["role"] == "assistant"]
        assert [m["id"] for m in after] == [answer["id"], csv["id"], pic["id"]]  # nothing twice, no notice
