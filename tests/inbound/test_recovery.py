"""Durability: accepted messages survive a restart, and nothing is answered twice."""

from __future__ import annotations

import asyncio

from gateway.platforms.base import CommandCall, InboundMessage, Source, parse_text_command
from tests.support.qa_channel import QAAdapter

PART1 = "part one " + "x" * 25
PART2 = "part two " + "y" * 25


def inbound(text: str, mid: str, command: CommandCall | None = None) -> InboundMessage:
    return InboundMessage(Source("qa", "c1", "u1"), text, mid, received_at=1.0, command=command)


def typed(text: str, mid: str) -> InboundMessage:
    """As an adapter stores a typed message: ``command`` filled by syntax alone."""
    parsed = parse_text_command(text)
    return inbound(text, mid, parsed[0] if parsed else None)


async def test_unfinished_messages_are_answered_after_a_restart(make_runner, fake_llm, tmp_path):
    db = f"sqlite+aiosqlite:///{tmp_path / 'r.db'}"
    runner, _qa = await make_runner(db_url=db)
    # What a crash leaves behind: one message never started, one answered but only half delivered. Owned by
    # the running instance, so its own recovery (which may run any moment now) leaves them to the restart.
    owner = {"owner": runner.instance.id, "lease_until": runner.instance.lease()}
    pending = await runner.store.inbox.add("qa", "p1", "qa:dm:c1", inbound("left behind", "p1").to_dict(), **owner)
    replied = await runner.store.inbox.add("qa", "p2", "qa:dm:c1", inbound("half sent", "p2").to_dict(), **owner)
    await runner.store.inbox.mark(replied, "replied", reply=PART1 + "\n\n" + PART2)
    await runner.store.outbox.record(replied, "qa", "c1", 0, "old-m", "sent")
    await runner.shutdown()

    class Tiny(QAAdapter):
        name = "qa"
        capabilities = QAAdapter.capabilities.__class__(max_message_length=60)

    runner2, qa2 = await make_runner(db_url=db, adapters=[Tiny])
    texts = await qa2.wait_for(lambda t: "echo: left behind" in t)
    await asyncio.sleep(0.2)
    # Only the unsent chunk of the half-delivered answer is sent; the old one is not repeated.
    assert PART1 not in qa2.texts()
    assert qa2.texts().count(PART2) == 1
    assert texts.count("echo: left behind") == 1
    assert await runner2.store.inbox.unfinished() == []
    assert (await runner2.store.inbox.get(pending))["status"] == "done"


async def test_shutdown_drains_a_running_turn(make_runner, fake_llm):
    runner, qa = await make_runner({"gateway": {"drain_seconds": 5}})
    await qa.say("finish me [sleep=0.5]")
    await asyncio.sleep(0.1)
    await runner.shutdown()
    assert "echo: finish me [sleep=0.5]" in qa.texts()


async def test_shutdown_cuts_a_long_turn_tells_the_user_and_answers_after_restart(make_runner, fake_llm, tmp_path):
    db = f"sqlite+aiosqlite:///{tmp_path / 'd.db'}"
    runner, qa = await make_runner({"gateway": {"drain_seconds": 0.2}}, db_url=db)
    await qa.say("long [sleep=1]", message_id="L")
    await asyncio.sleep(0.1)
    await runner.shutdown()
    assert any("restarting" in t for t in qa.texts())
    assert "echo: long [sleep=1]" not in qa.texts()
    _runner2, qa2 = await make_runner(db_url=db)
    await qa2.wait_for(lambda t: "echo: long [sleep=1]" in t)
    # The platform redelivering the same message after the restart changes nothing.
    assert not await qa2.say("long [sleep=1]", message_id="L")


async def test_commands_left_unfinished_are_not_replayed_and_their_senders_are_told(make_runner, fake_llm, tmp_path):
    db = f"sqlite+aiosqlite:///{tmp_path / 'c.db'}"
    runner, _qa = await make_runner(db_url=db)
    session = await runner.sessions.get("qa:dm:c1", "qa")
    old = await runner.store.inbox.add("qa", "cmd", "qa:dm:c1", inbound("/new", "cmd").to_dict())  # no command field
    typed_row = await runner.store.inbox.add("qa", "cmd2", "qa:dm:c1", typed("/new please", "cmd2").to_dict())
    native = await runner.store.inbox.add("qa", "cmd3", "qa:dm:c1",
                                          inbound("", "cmd3", CommandCall("frobnicate", native=True)).to_dict())
    await runner.shutdown()
    runner2, qa2 = await make_runner(db_url=db)
    texts = await qa2.wait_for(lambda t: len(t) >= 3)
    await asyncio.sleep(0.2)
    # Not run (the session was not reset), each sender told in one line which command and what to do.
    assert (await runner2.store.sessions.active("qa:dm:c1"))["id"] == session["id"]
    assert texts.count("↻ Herald restarted before it could run /new: it was not run. "
                       "Send it again if you still want it.") == 2
    assert sum("/frobnicate" in t and "not run" in t for t in texts) == 1
    assert len(qa2.texts()) == 3 and fake_llm.requests == []
    for row in (old, typed_row, native):
        assert (await runner2.store.inbox.get(row))["status"] == "cancelled"


async def test_prose_that_starts_with_a_path_is_answered_after_a_restart(make_runner, fake_llm, tmp_path):
    """"/etc is full, why?" has ``command`` filled by syntax; it is no command the registry knows, so it is
    prose: after a crash it goes to the model like any message, not cancelled as a command."""
    db = f"sqlite+aiosqlite:///{tmp_path / 'p.db'}"
    runner, _qa = await make_runner(db_url=db)
    stored = typed("/etc is full, why?", "p1")
    assert stored.command is not None and stored.command.name == "etc"
    row = await runner.store.inbox.add("qa", "p1", "qa:dm:c1", stored.to_dict())
    await runner.shutdown()
    runner2, qa2 = await make_runner(db_url=db)
    await qa2.wait_for(lambda t: "echo: /etc is full, why?" in t)
    assert not any("not run" in t for t in qa2.texts())
    await _wait_status(runner2, row, "done")


async def test_a_row_its_adapter_did_not_take_for_a_command_is_prose_after_a_restart(make_runner, fake_llm,
                                                                                      tmp_path):
    """A newer row (it has an owner) whose adapter left ``command`` empty — Slack's typed commands start with
    "!", so a "/new" there is text — goes to the model after a restart, as it would have before."""
    db = f"sqlite+aiosqlite:///{tmp_path / 'n.db'}"
    runner, _qa = await make_runner(db_url=db)
    row = await runner.store.inbox.add("qa", "s1", "qa:dm:c1", inbound("/new is what I typed", "s1").to_dict(),
                                       owner="gone-host:1:1:x", lease_until=1.0)
    await runner.shutdown()
    runner2, qa2 = await make_runner(db_url=db)
    await qa2.wait_for(lambda t: "echo: /new is what I typed" in t)
    await _wait_status(runner2, row, "done")


async def _wait_status(runner, row: int, status: str) -> None:
    for _ in range(200):
        if (await runner.store.inbox.get(row))["status"] == status:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"row {row} is {(await runner.store.inbox.get(row))['status']}, not {status}")


async def test_a_message_left_behind_is_answered_before_one_its_chat_sent_after_the_restart(make_runner, fake_llm,
                                                                                           tmp_path):
    """Found by the kill suite (tests/faults/test_kill.py): a platform hands over new messages as soon as the
    adapter connects, before recovery has read what the killed process left; the chat's newer message was
    answered first. Recovery now goes first in each chat, whatever arrives meanwhile."""
    db = f"sqlite+aiosqlite:///{tmp_path / 'o.db'}"
    runner, _qa = await make_runner(db_url=db)
    owner = {"owner": runner.instance.id, "lease_until": runner.instance.lease()}
    await runner.store.inbox.add("qa", "old", "qa:dm:c1", inbound("left behind", "old").to_dict(), **owner)
    await runner.shutdown()

    class Eager(QAAdapter):
        """Messages waiting at the platform arrive while the adapter connects."""

        async def start(self) -> None:
            await super().start()
            await self.say("sent after the restart", message_id="new")

    _runner2, qa2 = await make_runner(db_url=db, adapters=[Eager])
    texts = await qa2.wait_for(lambda t: "echo: sent after the restart" in t and "echo: left behind" in t)
    assert texts.index("echo: left behind") < texts.index("echo: sent after the restart")


async def test_messages_left_behind_are_answered_even_past_the_queue_bound(make_runner, fake_llm, tmp_path):
    """Found by the kill suite: after a restart, a chat's recovered backlog went through the queue bound
    (gateway.max_queue) as if it were new, and the messages past it were refused — messages the platform had
    been told were taken. The bound is for taking new messages in."""
    db = f"sqlite+aiosqlite:///{tmp_path / 'q.db'}"
    runner, _qa = await make_runner({"gateway": {"max_queue": 2}}, db_url=db)
    owner = {"owner": runner.instance.id, "lease_until": runner.instance.lease()}
    for i in range(6):
        await runner.store.inbox.add("qa", f"b{i}", "qa:dm:c1", inbound(f"backlog {i}", f"b{i}").to_dict(), **owner)
    await runner.shutdown()
    runner2, qa2 = await make_runner({"gateway": {"max_queue": 2}}, db_url=db)
    expected = [f"echo: backlog {i}" for i in range(6)]
    texts = await qa2.wait_for(lambda t: set(expected) <= set(t), timeout=20)
    assert [t for t in texts if t.startswith("echo: ")] == expected
    assert not any("already waiting" in t for t in texts)
    for _ in range(200):  # the last row is marked done just after its answer went out
        if await runner2.store.inbox.unfinished() == []:
            break
        await asyncio.sleep(0.02)
    assert await runner2.store.inbox.unfinished() == []
