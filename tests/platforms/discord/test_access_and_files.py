"""Discord: where the bot listens (``allowed_channels``), files that share a name or lie about their size, a slash
command acknowledged before anything that may wait, and an approval prompt that expires."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from gateway.platforms.discord.inbound import DiscordInbound
from tests.fakes.discord_api import CHANNEL, THREAD
from tests.fakes.llm import last_user_message, message_text
from tests.platforms.discord.conftest import ALICE, answered, model_calls, wait_until
from tests.support.media import image_bytes

LISTED = 700_000_000_000_000_111
LISTED_THREAD = 700_000_000_000_000_211
DISCORD_WINDOW = 3.0  # an interaction not answered by then fails on the user's screen


async def test_allowed_channels_hears_only_the_listed_channel_and_its_threads_and_still_dms(
        start_dc, fake_dc, fake_llm):
    fake_dc.add_channel(LISTED, "listed")
    fake_dc.add_thread(LISTED_THREAD, LISTED)
    runner = await start_dc(allowed_channels=[str(LISTED)])
    fake_dc.user_message(CHANNEL, ALICE, "in a channel not on the list", mention=True)
    fake_dc.user_message(THREAD, ALICE, "in its thread", mention=True)
    fake_dc.user_message(LISTED_THREAD, ALICE, "in the listed channel's thread", mention=True)
    fake_dc.user_message(fake_dc.dm(ALICE), ALICE, "in a DM")
    await fake_dc.wait_sent(lambda s: answered(fake_dc, "echo: in the listed channel's thread")(s)
                            and answered(fake_dc, "echo: in a DM")(s))
    await asyncio.sleep(0.3)
    assert model_calls(fake_llm, "in a channel not on the list") == 0 and model_calls(fake_llm, "in its thread") == 0
    assert not fake_dc.sent_in(CHANNEL) and not fake_dc.sent_in(THREAD)
    assert runner.counters.messages_denied == 2


async def test_two_files_of_one_name_are_both_kept(start_dc, fake_dc, fake_llm):
    await start_dc()
    # Real images: a file named .png whose bytes are no image would be refused (gateway/media/inbound.py).
    one, two = image_bytes(color=(1, 2, 3)), image_bytes(color=(4, 5, 6))
    first, second = fake_dc.attachment("image.png", one), fake_dc.attachment("image.png", two)
    fake_dc.user_message(fake_dc.dm(ALICE), ALICE, "two pasted images", attachments=[first, second])
    await fake_dc.wait_sent(lambda s: any(m.content.startswith("echo: two pasted images") for m in s))
    content = message_text(last_user_message(fake_llm.requests[-1]))
    paths = [line[2:] for line in content.splitlines() if line.startswith("- ")]
    assert len(set(paths)) == 2
    assert [Path(p).read_bytes() for p in paths] == [one, two]  # noqa: ASYNC240


async def test_a_file_bigger_than_it_said_is_cut_off_at_the_cap(start_dc, fake_dc, fake_llm, home):
    await start_dc(max_media_mb=0.001)  # about 1 KB
    liar = fake_dc.attachment("small.bin", b"x" * 50_000, size=10)  # declares 10 bytes
    fake_dc.user_message(fake_dc.dm(ALICE), ALICE, "a small file", attachments=[liar])
    sent = await fake_dc.wait_sent(lambda s: any(m.content.startswith("echo: a small file") for m in s))
    assert "could not download" in sent[0].content and "small.bin" in sent[0].content
    assert "bigger than the 0.001 MB limit" in message_text(last_user_message(fake_llm.requests[-1]))
    media = home / "workspace" / "attachments"
    assert not media.exists() or list(media.iterdir()) == []


@pytest.mark.slow
async def test_a_slash_command_is_deferred_before_building_its_message_waits_for_discord(
        start_dc, fake_dc, monkeypatch: pytest.MonkeyPatch):
    # A channel discord.py has not cached is looked up over REST while the command's message is built; here
    # Discord takes 4 s to answer that lookup.
    place = DiscordInbound.place
    monkeypatch.setattr(DiscordInbound, "place", lambda self, _channel, channel_id, guild_id:
                        place(self, None, channel_id, guild_id))
    fake_dc.delay("GET", f"channels/{THREAD}", 4.0)
    await start_dc()
    status = fake_dc.slash(THREAD, ALICE, "status")
    await wait_until(lambda: status.callback is not None, timeout=10)
    assert status.callback["type"] == 5  # type: ignore[index]
    assert status.callback_at - status.dispatched < DISCORD_WINDOW  # type: ignore[operator]
    await wait_until(lambda: status.original is not None and "Model: fake-model." in status.original.content,
                     timeout=15)


async def test_an_approval_prompt_left_unanswered_is_edited_to_say_it_expired(start_dc, fake_dc, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    await start_dc(extra={"tools": {"terminal": {"cwd": str(tmp_path)}}, "approvals": {"timeout_seconds": 1}})
    fake_dc.user_message(fake_dc.dm(ALICE), ALICE, "[tool=terminal:" + json.dumps({"command": f"rm -rf {victim}"})
                         + "]")
    await fake_dc.wait_sent(lambda s: any(m.buttons for m in s))
    prompt = next(m for m in fake_dc.sent if m.buttons)
    await wait_until(lambda: prompt.edits > 0, timeout=15)
    assert prompt.content.startswith("⌛ Expired") and prompt.buttons == []
    await fake_dc.wait_sent(lambda s: any(m.content.startswith("tool said:") for m in s))
    assert victim.exists()
