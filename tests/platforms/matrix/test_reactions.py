"""Reactions as buttons (approvals: ✅ once, 🔁 session, ♾️ always, ❌ deny; any other button numbered) and as the
"working" indicator, against the fake homeserver."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway.platforms.base import Button, ButtonPress, OutboundMessage
from tests.fakes.matrix_api import BOT, FakeMatrix, Sent
from tests.platforms.matrix.conftest import ALICE, BOB, Factory, answered
from tests.support.polling import wait_until


def rm(path: Path) -> str:
    return "[tool=terminal:" + json.dumps({"command": f"rm -rf {path}"}) + "]"


async def prompt_in(fake: FakeMatrix, room: str) -> Sent:
    sent = await fake.wait_sent(lambda s: any(m.room_id == room and m.buttons for m in s))
    return next(m for m in sent if m.room_id == room and m.buttons)


def keys_on(fake: FakeMatrix, event_id: str) -> set[str]:
    """The reactions the bot has standing on ``event_id``."""
    return {key for target, key in fake.bot_reactions.values() if target == event_id}


async def test_an_approval_is_answered_by_reaction_from_the_requester_only(start_mx: Factory, fake_mx: FakeMatrix,
                                                                         tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    room = fake_mx.room([ALICE, BOB, BOT], name="ops")
    await start_mx(extra={"tools": {"terminal": {"cwd": str(tmp_path)}}})
    fake_mx.user_message(room, ALICE, rm(victim), mention=True)
    prompt = await prompt_in(fake_mx, room)
    keys = {b["key"]: b["id"] for b in prompt.buttons}
    assert list(keys) == ["✅", "🔁", "♾️", "❌"] and all(i.startswith("ap:") for i in keys.values())
    assert [i[-1] for i in keys.values()] == ["o", "s", "a", "d"]
    assert prompt.text.endswith("React with ✅ Approve once · 🔁 Approve for this session · ♾️ Always approve · "
                                "❌ Deny")
    await wait_until(lambda: keys_on(fake_mx, prompt.event_id) == set(keys), what="the bot's own key reactions")
    fake_mx.react(room, BOB, prompt.event_id, "✅")  # Bob did not ask: his reaction decides nothing
    await fake_mx.wait_sent(lambda s: any("can't answer this approval" in m.text for m in s))
    assert victim.exists() and prompt.edits == 0
    fake_mx.react(room, ALICE, prompt.event_id, "❌")
    await wait_until(lambda: prompt.text.startswith("🚫 Denied by"), what="the prompt edited")
    assert not prompt.buttons and "React with" not in prompt.text
    await wait_until(lambda: not keys_on(fake_mx, prompt.event_id), what="the bot's key reactions taken back")
    await fake_mx.wait_sent(lambda s: any(m.text.startswith("tool said:") for m in s))
    assert victim.exists()


async def test_approve_once_by_reaction_runs_the_command_also_without_the_emoji_selector(
        start_mx: Factory, fake_mx: FakeMatrix, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    room = fake_mx.dm(ALICE)
    await start_mx(extra={"tools": {"terminal": {"cwd": str(tmp_path)}}})
    fake_mx.user_message(room, ALICE, rm(victim))
    prompt = await prompt_in(fake_mx, room)
    fake_mx.react(room, ALICE, prompt.event_id, "♾")  # some clients send ♾ without U+FE0F
    await wait_until(lambda: not victim.exists(), what="the command ran")
    await wait_until(lambda: prompt.text.startswith("✅ Always approved by"), what="the prompt edited")


async def test_a_typed_command_answers_an_approval_too(start_mx: Factory, fake_mx: FakeMatrix, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    room = fake_mx.dm(ALICE)
    await start_mx(extra={"tools": {"terminal": {"cwd": str(tmp_path)}}})
    fake_mx.user_message(room, ALICE, rm(victim))
    prompt = await prompt_in(fake_mx, room)
    assert "!approve" in prompt.text  # the prompt names the typed command as Matrix users type it
    fake_mx.user_message(room, ALICE, "!deny")
    await wait_until(lambda: prompt.text.startswith("🚫 Denied by"), what="the prompt edited")
    assert victim.exists()


async def test_a_reaction_on_buttons_sent_before_a_restart_still_presses_them(start_mx: Factory,
                                                                            fake_mx: FakeMatrix) -> None:
    room = fake_mx.dm(ALICE)
    first = await start_mx()
    await first.delivery.deliver(first.adapters["matrix"], room, OutboundMessage(
        "Pick one:", buttons=[Button("pick:tea", "Tea"), Button("pick:coffee", "Coffee")]))
    menu = await prompt_in(fake_mx, room)
    assert [(b["key"], b["id"]) for b in menu.buttons] == [("1️⃣", "pick:tea"), ("2️⃣", "pick:coffee")]
    await first.shutdown()
    second = await start_mx()
    pressed: list[ButtonPress] = []

    async def handler(_adapter: Any, press: ButtonPress) -> str:
        pressed.append(press)
        return f"You picked {press.button_id.partition(':')[2]}."

    second.inbound.buttons["pick"] = handler
    fake_mx.react(room, ALICE, menu.event_id, "👍")  # not one of its keys: no press
    fake_mx.react(room, ALICE, menu.event_id, "2️⃣")
    await fake_mx.wait_sent(answered("You picked coffee."))
    assert [(p.button_id, p.source.user_id, p.message_id) for p in pressed] == [("pick:coffee", ALICE, menu.event_id)]


async def test_a_working_reaction_sits_on_the_message_while_its_turn_runs(start_mx: Factory,
                                                                        fake_mx: FakeMatrix) -> None:
    room = fake_mx.dm(ALICE)
    await start_mx()
    asked = fake_mx.user_message(room, ALICE, "take your time [sleep=2]")
    await wait_until(lambda: keys_on(fake_mx, asked["event_id"]) == {"⏳"}, what="the working reaction")
    await fake_mx.wait_sent(answered("echo: take your time [sleep=2]"))
    await wait_until(lambda: not keys_on(fake_mx, asked["event_id"]), what="the working reaction taken back")
    fake_mx.user_message(room, ALICE, "quick")
    await fake_mx.wait_sent(answered("echo: quick"))
    assert not keys_on(fake_mx, asked["event_id"])
    assert [m.text for m in fake_mx.sent] == ["echo: take your time [sleep=2]", "echo: quick"]
