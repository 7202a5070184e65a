"""Adapter conformance: what every platform adapter must do, run against each through its fake platform.

Each test is one behaviour of the adapter contract (gateway/platforms/base.py) seen from the platform's
side of the wire; the drivers (conftest.DRIVERS) say how a user acts on each platform and what it saw.
A new adapter lands once its driver passes all of them.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlalchemy import select

from gateway.platforms.base import Button, ButtonPress, OutboundMessage
from gateway.storage.tables import inbox
from tests.fakes.llm import FakeLLM, Reply, last_user_message, message_text
from tests.platforms.conformance.driver import PLATFORM_ACK_LIMIT, PlatformDriver, holder, wait_until


def model_calls(llm: FakeLLM, text: str) -> int:
    """How many model requests were made to answer ``text`` (later turns carry it in their history)."""
    return sum(message_text(last_user_message(r)) == text for r in llm.requests)


def model_saw(llm: FakeLLM, needle: str) -> bool:
    return any(needle in json.dumps(r["messages"], ensure_ascii=False) for r in llm.requests)


async def inbox_rows(driver: PlatformDriver) -> list[dict[str, Any]]:
    return await driver.runner.store.run_read(
        lambda c: [dict(r._mapping) for r in c.execute(select(inbox).where(inbox.c.platform == driver.platform))])


# ---- 1. a redelivered event is answered once --------------------------------------------------------------


async def test_a_redelivered_event_is_answered_once(driver: PlatformDriver, fake_llm: FakeLLM) -> None:
    await driver.start()
    event = await driver.send("only once")
    await driver.wait_text(driver.chat, "echo: only once")
    await driver.redeliver(event)
    # The platform delivers in order: once the next message is answered, the copy has been dealt with.
    await driver.send("after the copy")
    await driver.wait_text(driver.chat, "echo: after the copy")
    await asyncio.sleep(0.2)
    assert [m.text for m in driver.messages(driver.chat)].count("echo: only once") == 1
    assert model_calls(fake_llm, "only once") == 1
    assert driver.runner.counters.messages_duplicate == 1


# ---- 2. the platform is acknowledged before a slow dispatch ------------------------------------------------


@pytest.mark.slow
async def test_the_platform_is_acknowledged_before_a_slow_dispatch(driver: PlatformDriver) -> None:
    await driver.start()
    event = await driver.send("take your time [sleep=2]")
    ack = await driver.ack(event)
    assert ack.seconds < PLATFORM_ACK_LIMIT
    reply = await driver.wait_text(driver.chat, "echo: take your time [sleep=2]", timeout=20)
    assert ack.at < reply.at


@pytest.mark.slow
async def test_a_message_with_a_slow_file_is_acknowledged_at_once_and_its_turn_gets_the_file(
        driver: PlatformDriver, fake_llm: FakeLLM) -> None:
    if not driver.files:
        pytest.skip(f"{driver.name} takes no files")
    await driver.start()
    # The download takes 4 s, past Slack's and Discord's 3 s: it must come after the acknowledgement.
    event = await driver.send_file("read the report", "report.txt", b"the numbers", delay=4.0)
    ack = await driver.ack(event, timeout=20)
    assert ack.seconds < PLATFORM_ACK_LIMIT  # under the download's 4 s: it did not wait for the file
    # The chat's next message waits for the file's turn (the lane is held, not the ack).
    after = await driver.send("and then this")
    after_ack = await driver.ack(after, timeout=20)
    assert after_ack.seconds < PLATFORM_ACK_LIMIT
    found = await driver.wait_messages(driver.chat, lambda ms: any(m.text == "echo: and then this" for m in ms),
                                       timeout=30)
    texts = [m.text for m in found]
    first = next(i for i, t in enumerate(texts) if t.startswith("echo: read the report"))
    assert first < texts.index("echo: and then this")
    assert ack.at < found[first].at and after_ack.at < found[first].at
    # The turn had the file: its path in the user's message, with what the user sent in it.
    [asked] = [last_user_message(r) for r in fake_llm.requests
               if message_text(last_user_message(r)).startswith("read the report")]
    paths = [line[2:] for line in message_text(asked).splitlines() if line.startswith("- ")]
    assert len(paths) == 1 and Path(paths[0]).read_bytes() == b"the numbers"  # noqa: ASYNC240
    assert all("could not download" not in t for t in texts)


# ---- 3. chunking at the limit --------------------------------------------------------------------------------


async def test_a_reply_over_the_limit_arrives_whole_in_pieces_that_fit_with_code_intact(
        driver: PlatformDriver, fake_llm: FakeLLM) -> None:
    await driver.start()
    # Prose of about the limit, then a code block longer than the limit on its own; characters outside the
    # BMP count twice in UTF-16.
    words = [f"word{i}" for i in range(driver.limit // 8)]
    code = [f"line_{i} = {i} * 2  # ü 😀" for i in range(driver.limit // 20)]
    answer = "# Report\n\n{}\n\n```python\n{}\n```\n\nThat is all, **really**.".format(" ".join(words), "\n".join(code))
    fake_llm.script(Reply(answer))
    await driver.send("a long one, please")
    parts = await driver.wait_messages(driver.chat, lambda ms: any("That is all" in m.text for m in ms), timeout=30)
    assert len(parts) >= 3
    assert all(driver.length(p) <= driver.limit for p in parts), [driver.length(p) for p in parts]
    blocks = [block for p in parts for block in driver.code_blocks(p)]
    assert len(blocks) >= 2  # the code block was cut, and every piece of it shows as code
    assert {language for language, _lines in blocks} == ({"python"} if driver.shows_code_language else {None})
    assert [line for _language, lines in blocks for line in lines] == code
    assert re.findall(r"word\d+", "\n".join(p.text for p in parts)) == words
    assert all(p.reply_to is None for p in parts[1:])  # only the first piece answers the question


async def test_links_and_emphasis_split_at_the_limit_arrive_whole(driver: PlatformDriver, fake_llm: FakeLLM) -> None:
    """Chunking works on the rendered text (``<url|label>``, ``*bold*`` on Slack): no piece ends inside a link
    or an emphasis span, so every label and every bold phrase shows whole, in one message."""
    await driver.start()
    units = [(f"the page number {i} of the docs", f"some bold words {i} end") for i in range(driver.limit // 40)]
    answer = " ".join(f"see [{label}](https://example.org/docs/{i}) and **{bold}** then"
                      for i, (label, bold) in enumerate(units))
    fake_llm.script(Reply(answer))
    await driver.send("links, please")
    last = units[-1][1]
    parts = await driver.wait_messages(driver.chat, lambda ms: any(last in m.text for m in ms), timeout=30)
    parts = [p for p in parts if "the page number" in p.text]
    assert len(parts) >= 2
    assert all(driver.length(p) <= driver.limit for p in parts), [driver.length(p) for p in parts]
    for label, bold in units:
        assert sum(label in p.text for p in parts) == 1, label
        assert sum(bold in p.text for p in parts) == 1, bold


# ---- 4. an edit in a thread ----------------------------------------------------------------------------------


async def test_a_prompt_in_a_thread_is_edited_after_the_decision(driver: PlatformDriver, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    await driver.start({"tools": {"terminal": {"cwd": str(tmp_path)}}})
    # Without threads (the web chat) the same happens in the chat itself.
    chat, thread = driver.thread_chat() if driver.threads else (driver.chat, None)
    command = json.dumps({"command": f"rm -rf {victim}"})
    await driver.send(f"[tool=terminal:{command}]", chat=chat, thread=thread)
    found = await driver.wait_messages(chat, lambda ms: any(m.buttons for m in ms))
    prompt = next(m for m in found if m.buttons)
    assert prompt.thread == thread
    deny = next(b for b in prompt.buttons if b.endswith(":d"))
    press = await driver.press(prompt, deny)
    if driver.edits:
        found = await driver.wait_messages(chat, lambda ms: any(m.id == prompt.id and m.edits for m in ms))
        edited = next(m for m in found if m.id == prompt.id)
        assert edited.text.startswith("🚫 Denied by") and edited.buttons == []
        assert edited.thread == thread
    else:  # the prompt stays as it was; the decision is said below it
        await wait_until(lambda: any("Denied" in notice for notice in driver.notices(press)), what="the decision")
    # The model heard the answer, in the same thread; nothing ran.
    found = await driver.wait_messages(chat, lambda ms: any(m.text.startswith("tool said:") for m in ms))
    assert all(m.thread == thread for m in found)
    assert victim.exists()


@pytest.mark.slow
async def test_a_reply_written_slowly_is_one_message_edited_in_place_in_its_thread(
        driver: PlatformDriver, fake_llm: FakeLLM) -> None:
    """Streaming by edit on every platform: the answer shows while it is written, in one message (in the
    question's thread where there is one), edited as it grows, and ends as the whole answer."""
    await driver.start()
    chat, thread = driver.thread_chat() if driver.threads else (driver.chat, None)
    words = [f"piece{i} " for i in range(13)] + ["piece13."]
    fake_llm.script(Reply.streamed(words, 0.25))
    await driver.send("write slowly", chat=chat, thread=thread)
    answer = "".join(words)
    await driver.wait_messages(chat, lambda ms: any(m.text == answer for m in ms), timeout=20)
    await asyncio.sleep(0.3)
    replies = [m for m in driver.messages(chat) if "piece0" in m.text]
    # Without edits, no half-written reply shows: the whole answer comes once.
    assert [m.text for m in replies] == [answer] and (replies[0].edits >= 1 or not driver.edits)
    assert replies[0].thread == thread


# ---- 5. a button press is acknowledged at once ----------------------------------------------------------------


@pytest.mark.slow
async def test_a_button_press_is_acknowledged_at_once_even_when_its_handler_is_slow(
        driver: PlatformDriver) -> None:
    runner = await driver.start()
    pressed: list[ButtonPress] = []

    async def quick(_adapter: Any, press: ButtonPress) -> str:
        pressed.append(press)
        return "Quick."

    slow_done: list[float] = []

    async def slow(_adapter: Any, press: ButtonPress) -> str:
        pressed.append(press)
        await asyncio.sleep(2)
        slow_done.append(time.monotonic())
        return "Slow, but done."

    runner.inbound.buttons["quick"] = quick
    runner.inbound.buttons["slow"] = slow
    await runner.delivery.deliver(driver.adapter(), driver.chat, OutboundMessage(
        "Pick one:", buttons=[Button("quick:1", "Quick"), Button("slow:1", "Slow", "primary")]))
    message = await driver.wait_text(driver.chat, "Pick one:")
    assert message.buttons == ["quick:1", "slow:1"]

    for button, notice in (("quick:1", "Quick."), ("slow:1", "Slow, but done.")):
        press = await driver.press(message, button)
        ack = await driver.ack(press)
        assert ack.seconds < PLATFORM_ACK_LIMIT, button
        if button == "slow:1":  # not after its handler
            assert not slow_done or ack.at < slow_done[0]
        # The handler's notice still reaches whoever pressed, however it got there.
        await wait_until(lambda notice=notice, press=press: notice in driver.notices(press),
                         what=f"the notice of {button}")
    assert [p.button_id for p in pressed] == ["quick:1", "slow:1"]
    assert all(p.source.user_id == driver.user and p.source.chat_id == driver.chat for p in pressed)


# ---- 6. a command ---------------------------------------------------------------------------------------------


async def test_a_command_is_answered_by_the_gateway_and_prose_with_a_slash_reaches_the_model(
        driver: PlatformDriver, fake_llm: FakeLLM) -> None:
    await driver.start()
    chat, thread = driver.thread_chat() if driver.threads else (driver.chat, None)
    await driver.command("status", chat=chat, thread=thread)
    found = await driver.wait_messages(chat, lambda ms: any("Model: fake-model." in m.text for m in ms))
    status = next(m for m in found if "Model: fake-model." in m.text)
    assert status.thread == thread
    assert fake_llm.requests == []
    for prose in ("/var/log is full, why?", "/etc is full, why?"):
        await driver.send(prose)
        await driver.wait_text(driver.chat, f"echo: {prose}")
        assert model_calls(fake_llm, prose) == 1


# ---- 7. a stranger -------------------------------------------------------------------------------------------


async def test_a_stranger_gets_nothing_from_the_model(driver: PlatformDriver, fake_llm: FakeLLM) -> None:
    runner = await driver.start()
    stranger = await driver.send_as_stranger("let me in, I am a stranger")
    # Events are taken in order: once the known user's message is answered, the stranger's was judged.
    await driver.send("and now someone known")
    await driver.wait_text(driver.chat, "echo: and now someone known")
    await asyncio.sleep(0.2)
    if driver.adapter().trusted:
        # The adapter authenticates senders itself (the web API's bearer token): a stranger is refused at the door.
        assert stranger.status == 401
    assert not model_saw(fake_llm, "I am a stranger")
    assert all("I am a stranger" not in m.text for m in driver.messages(stranger.chat))  # at most a pairing code
    assert runner.counters.messages_accepted == 1
    # Nothing of the stranger's is taken in: at most a row marked denied (an unauthenticated request: none).
    taken = [r for r in await inbox_rows(driver) if "I am a stranger" in json.dumps(r["payload"])]
    assert all(r["status"] == "denied" for r in taken)


# ---- 8. the credential lock ----------------------------------------------------------------------------------


@pytest.mark.slow
async def test_a_second_daemon_with_the_same_credential_is_refused_then_takes_over(
        driver: PlatformDriver, tmp_path: Path) -> None:
    first = await driver.start()
    if not driver.credential:
        assert driver.adapter(first).credentials() == []
        pytest.skip(f"{driver.name} connects with no credential of its own: nothing to lock")
    assert driver.adapter(first).credentials()
    second = await driver.start(home=tmp_path / "second-home", connect=False)
    await wait_until(lambda: driver.adapter(second).state == "retrying", what="the second refused")
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{second.http_port}/readyz") as resp:
        body = await resp.json()
    assert resp.status == 503
    assert body["adapters"][driver.platform]["state"] == "retrying"
    assert body["adapters"][driver.platform]["error"] == "CredentialLocked"  # the class only: unauthenticated
    assert holder() in second.readiness(detail=True)[1][driver.platform]["last_error"]

    await driver.send("to the first")
    await driver.wait_text(driver.chat, "echo: to the first")
    assert first.counters.messages_accepted == 1 and driver.adapter(first).state == "connected"

    await driver.stop(first)
    await wait_until(lambda: driver.adapter(second).state == "connected", timeout=15, what="the second took over")
    await driver.send("to the second")
    await driver.wait_text(driver.chat, "echo: to the second")
    assert second.counters.messages_accepted == 1
