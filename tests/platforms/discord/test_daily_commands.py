"""The daily commands on Discord: registered as application commands, and /retry run as one answers in the
channel (the command's own reply stays ephemeral)."""

from __future__ import annotations

from tests.fakes.llm import Reply, message_text
from tests.platforms.discord.conftest import ALICE, answered, wait_until

DAILY = {"retry", "undo", "title", "sessions", "resume", "search", "model", "personality", "reasoning"}


async def test_daily_commands_are_application_commands_and_a_slash_retry_answers_in_the_channel(
        start_dc, fake_dc, fake_llm):
    await start_dc()
    commands = {c["name"]: c for c in fake_dc.commands["global"]}
    assert set(commands) >= DAILY
    assert commands["search"]["options"][0]["name"] == "args"
    dm = fake_dc.dm(ALICE)
    fake_llm.script(Reply("first take"))
    fake_dc.user_message(dm, ALICE, "a question")
    await fake_dc.wait_sent(answered(fake_dc, "first take"))
    fake_llm.script(Reply("second take"))
    retry = fake_dc.slash(dm, ALICE, "retry")
    sent = await fake_dc.wait_sent(answered(fake_dc, "second take"))
    await wait_until(lambda: retry.original is not None and retry.original.content.startswith("🔁"))
    assert retry.original.ephemeral  # type: ignore[union-attr]
    (answer,) = [m for m in sent if m.content == "second take"]
    # Posted into the channel like any answer, not through the command's interaction (whose token lives 15
    # minutes and whose first answer is ephemeral).
    assert not answer.ephemeral and answer.channel_id == dm and answer.interaction is None
    assert [message_text(m) for m in fake_llm.requests[-1]["messages"][1:]] == ["a question"]
