"""Edited messages, on every platform whose users can edit what they sent (drivers with ``user_edits``): the edit
reaches the gateway as an edit of that message (InboundMessage.edit_of), once however often it is delivered."""

from __future__ import annotations

import asyncio
import json

import pytest
from sqlalchemy import select

from gateway.storage.tables import inbox
from tests.fakes.llm import FakeLLM, Hang, Reply
from tests.platforms.conformance.driver import PlatformDriver, wait_until
from tests.platforms.conformance.test_conformance import model_calls, model_saw


def needs_edits(driver: PlatformDriver) -> None:
    if not driver.user_edits:
        pytest.skip(f"{driver.name}: its users cannot edit what they sent")


async def row_state(driver: PlatformDriver, text: str, edit: bool) -> str | None:
    """The status of the inbox row of the message (or of its edit) reading ``text``."""
    rows = await driver.runner.store.run_read(lambda c: [dict(r._mapping) for r in c.execute(
        select(inbox).where(inbox.c.platform == driver.platform))])
    for row in rows:
        if (row["payload"].get("edit_of") is not None) == edit and text in json.dumps(row["payload"]):
            return row["status"]
    return None


async def test_an_edit_before_its_turn_starts_changes_the_text_the_model_sees(driver: PlatformDriver,
                                                                              fake_llm: FakeLLM) -> None:
    needs_edits(driver)
    await driver.start()
    answer = asyncio.Event()
    fake_llm.script(Hang(0, then=Reply("first answer"), until=answer))
    await driver.send("first question")
    await wait_until(lambda: len(fake_llm.requests) == 1, what="the first turn's model call")
    second = await driver.send("use SQLite")
    await wait_until(lambda: row_state(driver, "use SQLite", edit=False), what="the second message stored")
    await driver.edit(second, "use PostgreSQL")
    await wait_until(lambda: _is(row_state(driver, "use PostgreSQL", edit=True), "done"), what="the edit taken")
    answer.set()
    await driver.wait_text(driver.chat, "echo: use PostgreSQL")
    assert not model_saw(fake_llm, "use SQLite")
    assert model_calls(fake_llm, "use PostgreSQL") == 1


async def _is(state: object, wanted: str) -> bool:
    return await state == wanted  # type: ignore[misc]


async def test_an_edit_delivered_twice_is_one_edit(driver: PlatformDriver, fake_llm: FakeLLM) -> None:
    needs_edits(driver)
    await driver.start({"gateway": {"on_edit": "new_turn"}})
    event = await driver.send("hello")
    await driver.wait_text(driver.chat, "echo: hello")
    edit = await driver.edit(event, "hello again")
    await driver.wait_messages(driver.chat, lambda ms: any("hello again" in m.text for m in ms))
    await driver.redeliver(edit)
    # The platform delivers in order: once the next message is answered, the copy has been dealt with.
    await driver.send("after the copy")
    await driver.wait_text(driver.chat, "echo: after the copy")
    assert sum("hello again" in m.text for m in driver.messages(driver.chat)) == 1
    assert sum("hello again" in json.dumps(r["messages"][-1]) for r in fake_llm.requests) == 1
    assert driver.runner.counters.messages_duplicate == 1
