"""Discord end to end: the real runner + discord.py against the fake Discord (REST and gateway) and the fake model."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from sqlalchemy import select

from gateway.platforms.base import Button, ButtonPress, OutboundMessage
from gateway.storage.tables import inbox
from tests.fakes.discord_api import (
    CHANNEL,
    EPHEMERAL,
    GUILD,
    INTENT_MESSAGE_CONTENT,
    ROLE_HELPERS,
    THREAD,
    utf16_len,
)
from tests.fakes.llm import Reply, last_user_message, message_text
from tests.platforms.discord.conftest import (
    ALICE,
    BOB,
    HELPER,
    OTHER_BOT,
    STRANGER,
    adapter,
    answered,
    model_calls,
    wait_until,
)

# ---------------------------------------------------------------------------------------------- DMs, servers


async def test_dm_is_answered_with_the_message_content_intent_and_slash_commands_registered(start_dc, fake_dc):
    await start_dc()
    assert fake_dc.identified[0]["intents"] & INTENT_MESSAGE_CONTENT
    commands = {c["name"]: c for c in fake_dc.commands["global"]}
    assert {"help", "status", "approve", "deny", "new", "stop", "sethome"} <= set(commands)
    assert commands["approve"]["options"][0]["name"] == "args"
    dm = fake_dc.dm(ALICE)
    msg = fake_dc.user_message(dm, ALICE, "hello there")
    sent = await fake_dc.wait_sent(answered(fake_dc, "echo: hello there"))
    assert sent[-1].channel_id == dm and sent[-1].reply_to == int(msg["id"])


async def test_guild_ids_make_the_commands_server_commands(start_dc, fake_dc):
    await start_dc(guild_ids=[GUILD])
    assert {c["name"] for c in fake_dc.commands[str(GUILD)]} >= {"status", "approve"}
    assert fake_dc.commands["global"] == []  # not listed twice


async def test_a_server_channel_needs_a_mention_a_reply_or_a_command(start_dc, fake_dc, fake_llm):
    await start_dc()
    fake_dc.user_message(CHANNEL, BOB, "just chatting among ourselves")
    fake_dc.user_message(CHANNEL, BOB, "/etc is full, says the log")  # no command: prose, not addressed
    fake_dc.user_message(CHANNEL, BOB, "hi there", mention=True)
    await fake_dc.wait_sent(answered(fake_dc, "echo: hi there"))
    assert model_calls(fake_llm, "hi there") == 1  # the mention is not part of what the model reads
    reply = fake_dc.sent_in(CHANNEL)[-1]
    fake_dc.user_message(CHANNEL, BOB, "and one more thing", reply_to=reply.id)
    await fake_dc.wait_sent(answered(fake_dc, "echo: and one more thing"))
    fake_dc.user_message(CHANNEL, BOB, "by my role", role_mention=True)
    await fake_dc.wait_sent(answered(fake_dc, "echo: by my role"))
    fake_dc.user_message(CHANNEL, BOB, "/status")
    await fake_dc.wait_sent(lambda s: any("Model: fake-model." in m.content for m in s))
    assert not any("chatting" in json.dumps(r["messages"]) or "/etc" in json.dumps(r["messages"])
                   for r in fake_llm.requests)


async def test_without_require_mention_every_server_message_is_taken(start_dc, fake_dc):
    await start_dc(require_mention=False)
    fake_dc.user_message(CHANNEL, BOB, "no mention needed")
    await fake_dc.wait_sent(answered(fake_dc, "echo: no mention needed"))


async def test_a_thread_is_its_own_session_and_answers_go_into_it(start_dc, fake_dc, fake_llm):
    runner = await start_dc()
    fake_dc.user_message(CHANNEL, ALICE, "said in the channel", mention=True)
    await fake_dc.wait_sent(answered(fake_dc, "echo: said in the channel"))
    fake_dc.user_message(THREAD, ALICE, "said in the thread", mention=True)
    sent = await fake_dc.wait_sent(answered(fake_dc, "echo: said in the thread"))
    assert sent[-1].channel_id == THREAD
    # The thread's turn did not see the channel's conversation: another session.
    assert "said in the channel" not in json.dumps(fake_llm.requests[-1]["messages"])
    rows = await runner.store.run_read(lambda c: [dict(r._mapping) for r in c.execute(select(inbox))])
    keys = {r["payload"]["text"]: r["session_key"] for r in rows}
    assert keys["said in the channel"] == f"discord:s{GUILD}:group:{CHANNEL}:u{ALICE}"
    assert keys["said in the thread"] == f"discord:s{GUILD}:group:{CHANNEL}:t{THREAD}:u{ALICE}"


async def test_other_bots_and_the_bot_itself_are_ignored(start_dc, fake_dc, fake_llm):
    await start_dc()
    fake_dc.user_message(CHANNEL, OTHER_BOT, "I am a bot, answer me", mention=True, bot=True)
    fake_dc.user_message(fake_dc.dm(ALICE), ALICE, "a person")
    await fake_dc.wait_sent(answered(fake_dc, "echo: a person"))
    await asyncio.sleep(0.3)  # the bot's own answer came back over the gateway too
    assert [message_text(last_user_message(r)) for r in fake_llm.requests] == ["a person"]


async def test_typing_is_shown_while_a_turn_runs(start_dc, fake_dc):
    await start_dc()
    dm = fake_dc.dm(ALICE)
    fake_dc.user_message(dm, ALICE, "think first [sleep=1.2]")
    sent = await fake_dc.wait_sent(answered(fake_dc, "echo: think first [sleep=1.2]"))
    assert any(channel == dm and at < sent[-1].monotonic for channel, at in fake_dc.typing)


# ---------------------------------------------------------------------------------------------- formatting


async def test_a_long_answer_is_split_at_2000_with_fences_intact_and_a_table_shown_as_one(start_dc, fake_dc,
                                                                                          fake_llm):
    await start_dc()
    code = [f"    value_{i} = compute({i})  # é" for i in range(120)]
    answer = ("| name | score |\n|---|---:|\n| ada | 10 |\n| bob | 7 |\n\n#### Details\n\n"
              + " ".join(f"word{i}" for i in range(300)) + "\n\n```python\n" + "\n".join(code) + "\n```\nDone.")
    fake_llm.script(Reply(answer))
    dm = fake_dc.dm(ALICE)
    fake_dc.user_message(dm, ALICE, "report, please")
    await fake_dc.wait_sent(lambda s: any(m.content.endswith("Done.") for m in s), timeout=20)
    parts = [m.content for m in fake_dc.sent_in(dm)]
    assert len(parts) >= 3 and all(utf16_len(p) <= 2000 for p in parts)
    assert all(p.count("```") % 2 == 0 for p in parts)  # every piece closes what it opens
    assert parts[0].startswith("```\nname | score\n-----+------\nada  | 10\nbob  | 7\n```")
    assert "**Details**" in parts[0] and "####" not in "".join(parts)
    lines = [ln for p in parts for ln in p.split("\n") if ln.startswith("    value_")]
    assert lines == code  # the code block, cut and reopened, lost nothing
    assert [m.reply_to is not None for m in fake_dc.sent_in(dm)] == [True] + [False] * (len(parts) - 1)


# ---------------------------------------------------------------------------------------------- buttons


async def test_buttons_are_components_a_press_is_acknowledged_at_once_and_answered_ephemerally(start_dc, fake_dc):
    runner = await start_dc()
    pressed: list[ButtonPress] = []

    async def handler(_adapter: Any, press: ButtonPress) -> str:
        pressed.append(press)
        await asyncio.sleep(1.0)  # slower than an acknowledgement may be
        return "Noted."

    runner.inbound.buttons["pick"] = handler
    long_id = "pick:" + "x" * 120
    dm = fake_dc.dm(ALICE)
    await runner.delivery.deliver(adapter(runner), str(dm), OutboundMessage("Choose:", buttons=[
        Button("pick:yes", "Yes", "primary"), Button("pick:no", "No", "danger"), Button(long_id, "Long one")]))
    sent = fake_dc.sent_in(dm)[-1]
    assert [(b["custom_id"], b["style"]) for b in sent.buttons][:2] == [("pick:yes", 1), ("pick:no", 4)]
    assert sent.buttons[2]["style"] == 2 and len(sent.buttons[2]["custom_id"]) <= 100
    record = fake_dc.press(sent.id, ALICE, sent.buttons[2]["custom_id"])
    await wait_until(lambda: record.callback_at is not None)
    assert record.callback["type"] == 6 and record.callback_at - record.dispatched < 0.5  # type: ignore[operator]
    await wait_until(lambda: record.followups)
    assert [(f.content, f.ephemeral) for f in record.followups] == [("Noted.", True)]
    assert pressed[0].button_id == long_id and pressed[0].message_id == str(sent.id)
    stranger = fake_dc.press(sent.id, STRANGER, "pick:yes")
    await wait_until(lambda: stranger.followups)
    assert "not allowed" in stranger.followups[0].content and stranger.followups[0].ephemeral and len(pressed) == 1
    await adapter(runner).edit(str(dm), str(sent.id), None, [])
    assert fake_dc.by_id[sent.id].buttons == []


async def test_a_button_pressed_after_a_restart_still_resolves(start_dc, fake_dc):
    first = await start_dc()
    dm = fake_dc.dm(ALICE)
    await first.delivery.deliver(adapter(first), str(dm), OutboundMessage("Choose:", buttons=[
        Button("later:1", "Later")]))
    sent = fake_dc.sent_in(dm)[-1]
    await first.shutdown()
    second = await start_dc()
    seen: list[str] = []

    async def later(_adapter: Any, press: ButtonPress) -> str:
        seen.append(press.button_id)
        return "Still here."

    second.inbound.buttons["later"] = later
    record = fake_dc.press(sent.id, ALICE, "later:1")
    await wait_until(lambda: record.followups)
    assert seen == ["later:1"] and record.followups[0].content == "Still here."
    # A digest of a long id from before the restart is unknown now: the presser hears so, at once.
    stale = fake_dc.press(sent.id, ALICE, "~" + "0" * 40)
    await wait_until(lambda: stale.callback is not None)
    assert stale.callback["type"] == 4 and stale.callback["data"]["flags"] & EPHEMERAL  # type: ignore[index]
    assert "no longer active" in stale.callback["data"]["content"]  # type: ignore[index]


# ---------------------------------------------------------------------------------------------- approvals


async def test_approval_buttons_only_the_requester_decides_and_the_prompt_says_who(start_dc, fake_dc,
                                                                                  tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    await start_dc(extra={"tools": {"terminal": {"cwd": str(tmp_path)}}})
    command = json.dumps({"command": f"rm -rf {victim}"})
    fake_dc.user_message(CHANNEL, ALICE, f"[tool=terminal:{command}]", mention=True)
    await fake_dc.wait_sent(lambda s: any(m.buttons for m in s))
    prompt = next(m for m in fake_dc.sent_in(CHANNEL) if m.buttons)
    styles = {b["label"]: b["style"] for b in prompt.buttons}
    assert styles["Approve once"] == 1 and styles["Deny"] == 4
    deny = next(b["custom_id"] for b in prompt.buttons if b["custom_id"].endswith(":d"))
    bob = fake_dc.press(prompt.id, BOB, deny)  # allowed to talk, but neither the requester nor an approver
    await wait_until(lambda: bob.followups)
    assert "can't answer this approval" in bob.followups[0].content and bob.followups[0].ephemeral
    assert prompt.edits == 0
    alice = fake_dc.press(prompt.id, ALICE, deny)
    await wait_until(lambda: prompt.edits > 0)
    assert prompt.content.startswith("🚫 Denied by") and prompt.buttons == []
    await fake_dc.wait_sent(lambda s: any(m.content.startswith("tool said:") for m in s))
    assert victim.exists() and alice.followups[0].content == "Denied."


async def test_approve_and_deny_work_as_slash_commands_and_as_text(start_dc, fake_dc, tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    await start_dc(extra={"tools": {"terminal": {"cwd": str(tmp_path)}}})
    dm = fake_dc.dm(ALICE)
    fake_dc.user_message(dm, ALICE, "[tool=terminal:" + json.dumps({"command": f"rm -rf {first}"}) + "]")
    await fake_dc.wait_sent(lambda s: sum(bool(m.buttons) for m in s) == 1)
    slash = fake_dc.slash(dm, ALICE, "approve")
    await wait_until(lambda: slash.original is not None and slash.original.content != "…")
    assert slash.callback["type"] == 5 and slash.original.ephemeral  # type: ignore[index,union-attr]
    assert slash.original.content.startswith("Approved once")  # type: ignore[union-attr]
    await wait_until(lambda: not first.exists())
    fake_dc.user_message(dm, ALICE, "[tool=terminal:" + json.dumps({"command": f"rm -rf {second}"}) + "]")
    await fake_dc.wait_sent(lambda s: any(m.buttons for m in s))  # the first prompt lost its buttons
    fake_dc.user_message(dm, ALICE, "/deny")
    await fake_dc.wait_sent(lambda s: sum(m.content.startswith("🚫 Denied by") for m in s) == 1)
    assert second.exists()


async def test_slash_commands_answer_ephemerally_and_strangers_are_refused(start_dc, fake_dc):
    await start_dc()
    status = fake_dc.slash(THREAD, ALICE, "status")
    await wait_until(lambda: status.original is not None and "Model: fake-model." in status.original.content)
    assert status.original.ephemeral and status.original.channel_id == THREAD  # type: ignore[union-attr]
    unknown = fake_dc.slash(CHANNEL, ALICE, "nosuch")
    await wait_until(lambda: unknown.original is not None and "Unknown command /nosuch" in unknown.original.content)
    stranger = fake_dc.slash(CHANNEL, STRANGER, "status")
    # Deferred like any command (first thing, before anything that may wait), then the refusal replaces
    # "thinking…", seen only by the stranger.
    await wait_until(lambda: stranger.original is not None and "not allowed" in stranger.original.content)
    assert stranger.callback["type"] == 5 and stranger.original.ephemeral  # type: ignore[index,union-attr]
    assert all(i.callback_at - i.dispatched < 0.5 for i in (status, unknown, stranger))  # type: ignore[operator]


async def test_allowed_roles_admit_members_in_servers(start_dc, fake_dc, fake_llm):
    await start_dc(allowed_roles=[ROLE_HELPERS])
    fake_dc.member_roles[HELPER] = [ROLE_HELPERS]
    fake_dc.user_message(CHANNEL, HELPER, "a helper asks", mention=True)
    await fake_dc.wait_sent(answered(fake_dc, "echo: a helper asks"))
    fake_dc.user_message(CHANNEL, STRANGER, "someone else asks", mention=True)
    helper_dm = fake_dc.dm(HELPER)
    fake_dc.user_message(helper_dm, HELPER, "and in a DM")  # a DM carries no roles: pairing, not the model
    await fake_dc.wait_sent(lambda s: any("pairing code" in m.content for m in s if m.channel_id == helper_dm))
    assert [message_text(last_user_message(r)) for r in fake_llm.requests] == ["a helper asks"]
