"""The daily commands in process (the real runner with the QA channel and the fake model): /retry, /undo,
/title, /sessions, /resume, /search, /model, /reasoning, /personality, and what survives a restart."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest
from sqlalchemy import select

from gateway.session.history import History
from gateway.storage.tables import inbox, messages, sessions
from tests.fakes.llm import FakeLLM, Reply, ToolCall, message_text
from tests.support.polling import wait_until


def conversation(request: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], message_text(m)) for m in request["messages"] if m["role"] in ("user", "assistant")]


async def rows(runner: Any, table: Any, *where: Any) -> list[dict[str, Any]]:
    stmt = select(table).where(*where).order_by(table.c[next(iter(table.c.keys()))])
    return await runner.store.run_read(lambda conn: [dict(r._mapping) for r in conn.execute(stmt)])


async def titled(runner: Any, key: str = "qa:dm:c1") -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        row = await runner.store.sessions.active(key)
        return row if row and row["title"] else None

    # Titled after the reply went out.
    return await wait_until(probe, what=f"a title for {key}")


async def ask(qa: Any, text: str, expect: str, chat_id: str = "c1", user_id: str = "u1", chat_type: str = "dm",
              ) -> list[str]:
    """Say ``text``; the chat's texts once one sent after it contains ``expect``."""
    before = len(qa.texts(chat_id))
    await qa.say(text, chat_id=chat_id, user_id=user_id, chat_type=chat_type)
    return await qa.wait_for(lambda texts: any(expect in t for t in texts[before:]), chat_id=chat_id)


async def answer(qa: Any, text: str, expect: str, **kw: Any) -> str:
    """The newest text containing ``expect`` after saying ``text``."""
    return next(t for t in reversed(await ask(qa, text, expect, **kw)) if expect in t)


# ---- /retry and /undo --------------------------------------------------------------------------------


async def test_retry_asks_again_without_the_old_answer_and_keeps_it_stored(make_runner, fake_llm: FakeLLM):
    runner, qa = await make_runner()
    fake_llm.script(Reply("first answer"))
    await ask(qa, "what is the capital of Peru?", "first answer")
    fake_llm.script(Reply("second answer"))
    await ask(qa, "/retry", "second answer")
    retried = fake_llm.requests[-1]
    assert conversation(retried) == [("user", "what is the capital of Peru?")]
    texts = qa.texts()
    assert texts.count("second answer") == 1 and texts.count("first answer") == 1
    assert any(t.startswith("🔁") and "capital of Peru" in t for t in texts)
    # The old exchange is still stored, marked; the retry is an inbox row of its own, answered once.
    stored = await rows(runner, messages)
    old = [m for m in stored if m["hidden_by"] == "retry"]
    assert [(m["role"], m["content"]) for m in old] == [("user", "what is the capital of Peru?"),
                                                        ("assistant", "first answer")]
    async def retry_done() -> dict[str, Any] | None:
        (row,) = await rows(runner, inbox, inbox.c.platform_message_id.like("%:retry"))
        return row if row["status"] == "done" else None

    # The row is marked done right after the answer is sent: the chat may see the answer a moment before.
    row = await wait_until(retry_done, what="the /retry row marked done")
    assert row["reply"] == "second answer"
    # The next turn sees the retried exchange only.
    fake_llm.script(Reply("third"))
    await ask(qa, "and of Chile?", "third")
    assert conversation(fake_llm.requests[-1]) == [
        ("user", "what is the capital of Peru?"), ("assistant", "second answer"), ("user", "and of Chile?")]


async def test_a_retry_finishes_its_command_in_the_transaction_that_stores_it(make_runner, fake_llm: FakeLLM):
    """/retry's own inbox row is done when the retried message is stored, not a step later: a restart between
    the two would find the command unfinished and tell its sender it was not run, while the retry is answered."""
    runner, qa = await make_runner()
    await ask(qa, "what is the capital of Peru?", "echo:")
    session = await runner.store.sessions.active("qa:dm:c1")
    history = History(runner.store)
    exchange = await history.last_exchange(session["id"])
    command_id = await runner.store.inbox.add("qa", "m-retry", "qa:dm:c1", {"text": "/retry"})
    now = time.time()
    row = {"platform": "qa", "platform_message_id": "m-retry:retry", "session_key": "qa:dm:c1",
           "payload": {"text": exchange.text}, "status": "pending", "created_at": now, "updated_at": now}
    retry_id = await history.retry(session["id"], exchange, row, "m-retry")
    statuses = {r["id"]: r["status"] for r in await rows(runner, inbox, inbox.c.id.in_([command_id, retry_id]))}
    assert statuses == {command_id: "done", retry_id: "pending"}


async def test_retry_after_a_tool_turn_drops_the_calls_too(make_runner, fake_llm: FakeLLM):
    _runner, qa = await make_runner()
    fake_llm.script(ToolCall("read_file", {"path": "nothing-here.txt"}), Reply("no such file"))
    await ask(qa, "read it", "no such file")
    fake_llm.script(Reply("retried answer"))
    await ask(qa, "/retry", "retried answer")
    request = fake_llm.requests[-1]
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    assert not any(m.get("tool_calls") for m in request["messages"])


async def test_undo_takes_the_last_exchange_out_and_says_what(make_runner, fake_llm: FakeLLM):
    runner, qa = await make_runner()
    await ask(qa, "one", "echo: one")
    await ask(qa, "two", "echo: two")
    said = await answer(qa, "/undo", "Undone")
    assert "“two”" in said and "“echo: two”" in said
    await ask(qa, "three", "echo: three")
    assert conversation(fake_llm.requests[-1]) == [("user", "one"), ("assistant", "echo: one"), ("user", "three")]
    # Undo again and again: then there is nothing left.
    await ask(qa, "/undo", "“three”")
    await ask(qa, "/undo", "“one”")
    await ask(qa, "/undo", "Nothing to undo")
    stored = await rows(runner, messages)
    assert len(stored) == 6 and all(m["hidden_by"] == "undo" for m in stored)


async def test_retry_and_undo_wait_for_a_running_turn(make_runner, fake_llm: FakeLLM):
    runner, qa = await make_runner()
    await qa.say("slow [sleep=1.5]")
    # Polled: the lane turning busy is no message, so qa.wait_for (woken by sends) could sleep past it.
    async with asyncio.timeout(10):
        while runner.lanes.busy("qa:dm:c1") is None:  # noqa: ASYNC110 (no event to wait on)
            await asyncio.sleep(0.01)
    await ask(qa, "/retry", "still answering")
    await ask(qa, "/undo", "still answering")
    await qa.wait_for(lambda texts: "echo: slow [sleep=1.5]" in texts)
    assert not [m for m in await rows(runner, messages) if m["hidden_at"] is not None]


async def test_nothing_to_retry_in_a_new_chat(make_runner, fake_llm: FakeLLM):
    _runner, qa = await make_runner()
    await ask(qa, "/retry", "Nothing to retry")
    assert fake_llm.requests == []


# ---- titles, /sessions, /resume ------------------------------------------------------------------------


async def test_title_is_taken_from_the_first_message_and_can_be_set(make_runner, fake_llm: FakeLLM):
    runner, qa = await make_runner()
    await ask(qa, "/title", "No title yet")
    await ask(qa, "Plan   a weekend\nin Lisbon with the kids, cheap flights and a museum or two please", "echo:")
    session = await titled(runner)
    assert session["title"] == "Plan a weekend in Lisbon with the kids, cheap flights and a…"
    await ask(qa, "more", "echo: more")
    assert (await runner.store.sessions.active("qa:dm:c1"))["title"] == session["title"]  # only the first
    await ask(qa, "/title Lisbon *trip*", "🏷")
    await ask(qa, "/title", "Title: Lisbon \\*trip\\*")
    assert (await runner.store.sessions.active("qa:dm:c1"))["title"] == "Lisbon *trip*"


async def test_sessions_lists_this_chat_and_resume_brings_one_back(make_runner, fake_llm: FakeLLM):
    runner, qa = await make_runner()
    await ask(qa, "alpha topic", "echo: alpha topic")
    first = await runner.store.sessions.active("qa:dm:c1")
    await ask(qa, "/new", "fresh")
    await ask(qa, "beta topic", "echo: beta topic")
    await ask(qa, "elsewhere", "echo: elsewhere", chat_id="c2")  # another chat: not listed here
    await ask(qa, "/new", "fresh")  # an empty session is listed only while it is the current one
    texts = await ask(qa, "/sessions", "newest first")
    listing = texts[-1].splitlines()
    assert listing[1].startswith("1. untitled") and listing[1].endswith("← current")
    assert listing[2].startswith("2. beta topic") and listing[3].startswith("3. alpha topic")
    assert len(listing) == 5 and "elsewhere" not in texts[-1]
    await ask(qa, "/resume 3", "Back to alpha topic (2 messages)")
    active = await runner.store.sessions.active("qa:dm:c1")
    assert active["id"] == first["id"]
    await ask(qa, "and more", "echo: and more")
    assert conversation(fake_llm.requests[-1]) == [("user", "alpha topic"), ("assistant", "echo: alpha topic"),
                                                   ("user", "and more")]
    ended = await rows(runner, sessions, sessions.c.key == "qa:dm:c1", sessions.c.end_reason == "resumed")
    assert len(ended) == 1 and ended[0]["ended_at"] is not None
    # Lineage is kept: the sessions begun by /new still point at their parents.
    all_rows = await rows(runner, sessions, sessions.c.key == "qa:dm:c1")
    assert sum(1 for r in all_rows if r["parent_id"]) == 2
    await ask(qa, "/resume 9", "Which one?")
    await ask(qa, "/resume 1", "current conversation already")


# ---- /search -----------------------------------------------------------------------------------------


async def test_search_finds_only_the_senders_own_messages(make_runner, fake_llm: FakeLLM, db_url: str):
    _runner, qa = await make_runner(db_url=db_url)
    await ask(qa, "my zebra is called Stripes", "echo:", chat_id="alice", user_id="alice")
    await ask(qa, "the zebra secret of bob is Ünïcode", "echo:", chat_id="bob", user_id="bob")
    # Her own session in a group (each member has one by default) and a DM in another chat of Alice's.
    await ask(qa, "zebra in the group", "echo:", chat_id="g1", user_id="alice", chat_type="group")
    await ask(qa, "zebras again, café", "echo:", chat_id="alice-2", user_id="alice")
    found = await answer(qa, "/search zebra", "🔎", chat_id="alice", user_id="alice")
    assert "Stripes" in found and "bob" not in found and "Ünïcode" not in found
    # Both sides of her two conversations that say "zebra" ("zebras" is another word: no stemming).
    assert found.count("• ") == 4 and found.count(": you: ") == 0 and found.count(", you: ") == 2
    found = await answer(qa, "/search café", "🔎", chat_id="alice", user_id="alice")
    assert "zebras again" in found and found.count("• ") == 2
    found = await answer(qa, "/search secret", "🔎", chat_id="alice", user_id="alice")
    assert "Nothing of yours" in found
    found = await answer(qa, "/search ünïcode", "🔎", chat_id="bob", user_id="bob")
    assert "Ünïcode" in found and "Stripes" not in found
    # What /undo took out is not found any more.
    await ask(qa, "/undo", "Undone", chat_id="alice", user_id="alice")
    found = await answer(qa, "/search stripes", "🔎", chat_id="alice", user_id="alice")
    assert "Nothing of yours" in found


async def test_search_in_shared_group_sessions_finds_nothing_of_others(make_runner, fake_llm: FakeLLM, db_url: str):
    _runner, qa = await make_runner({"sessions": {"per_user_in_groups": False}}, db_url=db_url)
    await qa.say("a walrus in the group", chat_id="g", user_id="alice", chat_type="group")
    await qa.say("another walrus here", chat_id="g", user_id="bob", chat_type="group")
    await qa.wait_for(lambda texts: len([t for t in texts if t.startswith("echo:")]) == 2, chat_id="g")
    found = await answer(qa, "/search walrus", "🔎", chat_id="g", user_id="bob", chat_type="group")
    assert "Nothing of yours" in found


async def test_search_input_is_never_query_syntax(make_runner, fake_llm: FakeLLM, db_url: str):
    _runner, qa = await make_runner(db_url=db_url)
    await ask(qa, 'he said "NEAR(x y)" AND -not OR * ^', "echo:")
    for query in ['"NEAR(x', "AND", "-not", "*", '" OR "', "(", "x:y"]:
        said = await answer(qa, f"/search {query}", "")
        assert said.startswith(("🔎", "Search for what")), (query, said)
    found = await answer(qa, '/search "near', "🔎")
    assert found.count("• ") == 2


# ---- /model, /reasoning, /personality -----------------------------------------------------------------


@pytest.fixture
def choices() -> dict[str, Any]:
    return {"model": {"choices": ["big-model", "thinker"], "reasoning": ["thinker"]},
            "agent": {"personalities": {"Pirate": "Talk like a pirate.", "terse": "Answer in five words."}}}


async def test_model_switches_per_session_and_refuses_others(make_runner, fake_llm: FakeLLM, choices):
    _runner, qa = await make_runner(choices)
    said = await ask(qa, "/model", "Choices")
    assert "`fake-model` (the default)" in said[-1] and "`big-model`" in said[-1]
    await ask(qa, "/model nope", "not one of the models")
    await ask(qa, "/model big-model", "now uses `big-model`")
    await ask(qa, "hi", "echo: hi")
    assert fake_llm.requests[-1]["model"] == "big-model"
    assert "reasoning_effort" not in fake_llm.requests[-1]
    await ask(qa, "other chat", "echo: other chat", chat_id="c2")  # another session: the default
    assert fake_llm.requests[-1]["model"] == "fake-model"
    await ask(qa, "/model default", "now uses `fake-model`")
    await ask(qa, "hi again", "echo: hi again")
    assert fake_llm.requests[-1]["model"] == "fake-model"


async def test_reasoning_only_where_the_model_takes_it(make_runner, fake_llm: FakeLLM, choices):
    runner, qa = await make_runner(choices)
    await ask(qa, "/reasoning high", "does not take a reasoning effort")
    assert (await runner.store.sessions.active("qa:dm:c1") or {}).get("reasoning_effort") is None
    await ask(qa, "/model thinker", "now uses `thinker`")
    await ask(qa, "/reasoning extreme", "Use /reasoning low")
    await ask(qa, "/reasoning high", "Reasoning effort: high")
    await ask(qa, "think", "echo: think")
    assert fake_llm.requests[-1]["model"] == "thinker" and fake_llm.requests[-1]["reasoning_effort"] == "high"
    await ask(qa, "/model big-model", "is not sent to it")
    await ask(qa, "plain", "echo: plain")
    assert fake_llm.requests[-1]["model"] == "big-model" and "reasoning_effort" not in fake_llm.requests[-1]


async def test_personality_starts_a_fresh_session_with_its_prompt(make_runner, fake_llm: FakeLLM, choices):
    _runner, qa = await make_runner(choices)
    await ask(qa, "before", "echo: before")
    default_prompt = fake_llm.requests[-1]["messages"][0]["content"]
    said = await ask(qa, "/personality", "Personalities")
    assert "pirate, terse; default (current)" in said[-1]
    await ask(qa, "/personality nobody", "no personality")
    await ask(qa, "/personality PIRATE", "Personality pirate: started a fresh conversation")
    await ask(qa, "ahoy", "echo: ahoy")
    request = fake_llm.requests[-1]
    assert request["messages"][0]["content"] == default_prompt + "\n\nTalk like a pirate."
    assert conversation(request) == [("user", "ahoy")]
    await ask(qa, "/personality pirate", "Already pirate")
    # The prompt is the session's, byte for byte; /new keeps the chat's personality.
    await ask(qa, "/new", "fresh")
    await ask(qa, "again", "echo: again")
    assert fake_llm.requests[-1]["messages"][0]["content"] == default_prompt + "\n\nTalk like a pirate."
    await ask(qa, "/personality default", "Default personality")
    await ask(qa, "plain", "echo: plain")
    assert fake_llm.requests[-1]["messages"][0]["content"] == default_prompt


async def test_settings_survive_a_restart_and_carry_over_to_new(make_runner, fake_llm: FakeLLM, choices, tmp_path):
    db = f"sqlite+aiosqlite:///{tmp_path / 'kept.db'}"

    async def restarted(overrides: dict[str, Any], run: int) -> tuple[Any, Any]:
        runner, qa = await make_runner(overrides, db_url=db)
        qa._ids = itertools.count(1000 * run)  # message ids of their own: the inbox has the earlier ones
        return runner, qa

    runner, qa = await restarted(choices, 0)
    await ask(qa, "/model thinker", "now uses")
    await ask(qa, "/reasoning low", "low")
    await ask(qa, "/title Kept", "🏷")
    await runner.shutdown()
    runner, qa = await restarted(choices, 1)
    await ask(qa, "after restart", "echo: after restart")
    assert (fake_llm.requests[-1]["model"], fake_llm.requests[-1]["reasoning_effort"]) == ("thinker", "low")
    await ask(qa, "/title", "Title: Kept")
    await ask(qa, "/new", "fresh")
    await ask(qa, "/title", "No title yet")  # the title is the conversation's own
    await ask(qa, "new one", "echo: new one")
    assert (fake_llm.requests[-1]["model"], fake_llm.requests[-1]["reasoning_effort"]) == ("thinker", "low")
    # A model taken out of the config since falls back to the default (nothing carried that is not allowed).
    await runner.shutdown()
    runner, qa = await restarted({**choices, "model": {"choices": [], "reasoning": False}}, 2)
    await ask(qa, "fewer models", "echo: fewer models")
    assert fake_llm.requests[-1]["model"] == "fake-model" and "reasoning_effort" not in fake_llm.requests[-1]


async def test_the_commands_are_in_help_and_every_menu(make_runner, fake_llm: FakeLLM):
    runner, qa = await make_runner()
    names = {name for name, _ in runner.command_menu("qa")}
    daily = {"retry", "undo", "title", "sessions", "resume", "search", "model", "personality", "reasoning"}
    assert daily <= names
    said = await ask(qa, "/help", "Commands:")
    assert all(f"/{name}" in said[-1] for name in daily)


def test_a_person_is_told_apart_by_scope_and_shared_sessions_have_no_owner():
    from gateway.platforms.base import Source
    from gateway.session.keys import person_id, session_owner

    a = Source("slack", "D1", "U1", scope="T1")
    assert person_id(a) != person_id(Source("slack", "D1", "U1", scope="T2"))
    assert person_id(Source("x", "c", "T1:U1")) != person_id(a)  # an id holding ":" is encoded
    group = Source("slack", "C1", "U1", chat_type="group", scope="T1")
    assert session_owner(group, per_user_in_groups=True) == person_id(a)
    assert session_owner(group, per_user_in_groups=False) is None
    assert session_owner(a, per_user_in_groups=False) == person_id(a)  # a DM is always its person's
