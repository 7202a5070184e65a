"""Discord while the store cannot take messages (its database out of reach, tests/faults/outages.py): a message is
not lost — it is read back from its channel's history once the store is back, a first message in a channel the
bot never talked in included — and its sender is told so, once per chat and outage; a slash command, which
Discord never sends again, is refused in place of "thinking…" and must be sent again. The other platforms are in
tests/faults/test_outage_notices.py."""

from __future__ import annotations

from tests.faults.outages import database_down
from tests.platforms.discord.conftest import ALICE, adapter, answered, wait_until

READ_BACK = "I'll read your message back and answer it once this is fixed, if that is within 1 hour"


def told(fake_dc, channel: int) -> int:
    return sum(READ_BACK in m.content for m in fake_dc.sent_in(channel))


async def test_messages_are_read_back_after_the_outage_and_their_chat_told_once(start_dc, fake_dc, fake_llm):
    runner = await start_dc()
    dm = fake_dc.dm(ALICE)  # a channel the bot has never talked in: no cursor yet
    history_reads = sum(1 for method, path in fake_dc.requests if method == "GET" and "/messages" in path)
    with database_down(runner.store):
        fake_dc.user_message(dm, ALICE, "during one")
        await fake_dc.wait_sent(lambda _s: told(fake_dc, dm) == 1)
        fake_dc.user_message(dm, ALICE, "during two")
        # Read back, refused, again and again while it lasts (every couple of seconds).
        await wait_until(lambda: sum(1 for method, path in fake_dc.requests
                                     if method == "GET" and "/messages" in path) >= history_reads + 2, timeout=20)
    await fake_dc.wait_sent(answered(fake_dc, "echo: during two"), timeout=20)
    answers = [m.content for m in fake_dc.sent_in(dm) if m.content.startswith("echo: ")]
    assert answers == ["echo: during one", "echo: during two"]
    assert told(fake_dc, dm) == 1
    assert adapter(runner).channels.read_back == 2


async def test_a_slash_command_is_refused_in_place_of_thinking(start_dc, fake_dc):
    runner = await start_dc()
    dm = fake_dc.dm(ALICE)
    with database_down(runner.store):
        status = fake_dc.slash(dm, ALICE, "status")
        await wait_until(lambda: status.original is not None and "please send it again" in status.original.content)
    assert status.original.ephemeral and "cannot take this right now (database unavailable)" in status.original.content
    assert status.followups == []  # said once, where only its sender sees it
