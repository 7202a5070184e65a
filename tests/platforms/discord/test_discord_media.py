"""Discord's media end to end (discord.py against the fake REST API and gateway): an image attachment reaches a
vision model as an image, several in one message are one turn; files the agent sends are uploaded (multipart),
once, after the text, and the size limit comes from the server's boost level as the API gives it."""

from __future__ import annotations

from tests.fakes.llm import Reply, ToolCall, last_user_message, message_text
from tests.platforms.discord.conftest import ALICE
from tests.support.media import image_bytes, image_parts, workspace_with


async def test_images_in_one_message_reach_a_vision_model_as_images(start_dc, fake_dc, fake_llm):
    await start_dc(extra={"model": {"base_url": fake_llm.base_url, "name": "fake-model", "max_retries": 0,
                                    "vision": True}})
    files = [fake_dc.attachment(f"shot{n}.png", image_bytes(color=(n * 60, 0, 0))) for n in range(2)]
    fake_dc.user_message(fake_dc.dm(ALICE), ALICE, "compare these", attachments=files)
    await fake_dc.wait_sent(lambda s: any(m.content.startswith("echo: compare these") for m in s))
    assert len(fake_llm.requests) == 1 and len(image_parts(fake_llm.requests[0])) == 2


async def test_send_file_uploads_a_document_and_a_photo_once_after_the_text(start_dc, fake_dc, fake_llm):
    runner = await start_dc()
    workspace_with(runner, {"notes.txt": b"remember the milk\n", "plot.png": image_bytes(120, 80)})
    fake_llm.script(ToolCall("send_file", {"path": "notes.txt", "caption": "your **notes**"}),
                    ToolCall("send_file", {"path": "plot.png"}), Reply("Both are below."))
    channel = fake_dc.dm(ALICE)
    fake_dc.user_message(channel, ALICE, "files please")
    sent = await fake_dc.wait_sent(lambda s: sum(bool(m.files) for m in s) == 2)
    text, doc, photo = [m for m in sent if m.channel_id == channel]
    assert text.content == "Both are below." and not text.files
    assert doc.files == [("notes.txt", b"remember the milk\n")] and doc.content == "your **notes**"
    assert photo.files[0][0] == "plot.png" and photo.files[0][1] == image_bytes(120, 80)
    assert text.id < doc.id < photo.id and doc.nonce and doc.nonce != photo.nonce
    assert len(fake_dc.uploads()) == 2


async def test_the_size_limit_is_the_servers_boost_level_read_from_the_api(start_dc, fake_dc, fake_llm):
    from tests.fakes.discord_gateway import GUILD

    fake_dc.premium_tier = 2  # 50 MB on a level-2 server
    runner = await start_dc()
    adapter = runner.adapters["discord"]
    channel = next(int(c["id"]) for c in fake_dc.channels.values() if c.get("guild_id") == str(GUILD))
    assert await adapter.file_limit(str(channel)) == 50 * 1024 * 1024
    assert fake_dc.guild_reads == 1
    assert await adapter.file_limit(str(channel)) == 50 * 1024 * 1024 and fake_dc.guild_reads == 1  # kept a while
    assert await adapter.file_limit(str(fake_dc.dm(ALICE))) == 10 * 1024 * 1024  # a DM: Discord's default


async def test_a_file_over_the_servers_limit_is_told_not_dropped(start_dc, fake_dc, fake_llm, monkeypatch):
    runner = await start_dc()
    adapter = runner.adapters["discord"]

    async def small(_chat_id: str) -> int:
        return 2048

    monkeypatch.setattr(adapter, "file_limit", small)
    workspace_with(runner, {"dump.bin": b"\x00" * 4096})
    fake_llm.script(ToolCall("send_file", {"path": "dump.bin"}), Reply("done"))
    channel = fake_dc.dm(ALICE)
    fake_dc.user_message(channel, ALICE, "the dump")
    sent = await fake_dc.wait_sent(lambda s: any("dump.bin" in m.content for m in s))
    note = next(m for m in sent if "dump.bin" in m.content)
    assert note.content == "📎 dump.bin is 4.0 KB, more than this chat takes (2.0 KB), so it was not sent."
    assert fake_dc.uploads() == []
    assert message_text(last_user_message(fake_llm.requests[0])) == "the dump"
