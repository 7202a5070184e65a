"""The per-user memory: the agent's memory tool, the snapshot in the next session's system prompt (not the
current one), one user's notes never in another's prompt, /memory and /forget."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.turns.memory import PROMPT_HEADER, MemoryRefused, apply
from tests.fakes.llm import Reply, ToolCall


def remember(fake: Any, content: str, action: str = "add", **more: str) -> None:
    fake.script(ToolCall("memory", {"action": action, "content": content, **more}), Reply("noted"))


def tool_result(fake: Any) -> dict[str, Any]:
    """The memory tool's answer, as the model got it in the last request."""
    return json.loads(fake.requests[-1]["messages"][-1]["content"])


def system_prompt(fake: Any) -> str:
    return fake.requests[-1]["messages"][0]["content"]


async def turn(qa: Any, text: str, **where: Any) -> None:
    before = len(qa.texts())
    await qa.say(text, **where)
    await qa.wait_for(lambda t: len(t) > before)


async def test_a_note_shows_from_the_next_session_not_the_current_one(make_runner, fake_llm):
    _runner, qa = await make_runner()
    await turn(qa, "hello")
    first_prompt = system_prompt(fake_llm)
    assert PROMPT_HEADER not in first_prompt
    remember(fake_llm, "Prefers answers in French")
    await turn(qa, "remember: I prefer French")
    assert tool_result(fake_llm)["result"] == "added"
    await turn(qa, "and now?")
    # The current session keeps its prompt byte for byte (the provider's cache).
    assert system_prompt(fake_llm) == first_prompt
    await turn(qa, "/new")
    await turn(qa, "bonjour")
    prompt = system_prompt(fake_llm)
    assert prompt.startswith(first_prompt) and PROMPT_HEADER in prompt and "- Prefers answers in French" in prompt
    await turn(qa, "again")
    assert system_prompt(fake_llm) == prompt


async def test_one_users_memory_never_reaches_another_users_session(make_runner, fake_llm):
    _runner, qa = await make_runner()
    remember(fake_llm, "Secret project: Bluebird")
    await turn(qa, "remember this", chat_id="alice", user_id="alice")
    await turn(qa, "/new", chat_id="alice", user_id="alice")
    await turn(qa, "hi", chat_id="alice", user_id="alice")
    assert "Bluebird" in system_prompt(fake_llm)
    await turn(qa, "hi", chat_id="bob", user_id="bob")
    assert "Bluebird" not in system_prompt(fake_llm) and PROMPT_HEADER not in system_prompt(fake_llm)
    # In a group each member has a session of their own: alice's notes in hers, none in bob's.
    await turn(qa, "hi all", chat_id="g", user_id="bob", chat_type="group")
    assert "Bluebird" not in system_prompt(fake_llm)
    await turn(qa, "hi all", chat_id="g", user_id="alice", chat_type="group")
    assert "Bluebird" in system_prompt(fake_llm)


async def test_a_shared_group_session_gets_no_ones_memory_and_the_tool_refuses(make_runner, fake_llm):
    _runner, qa = await make_runner({"sessions": {"per_user_in_groups": False}})
    remember(fake_llm, "Likes tea")
    await turn(qa, "remember", chat_id="alice", user_id="alice")
    await turn(qa, "hello", chat_id="g", user_id="alice", chat_type="group")
    assert "Likes tea" not in system_prompt(fake_llm)
    remember(fake_llm, "Bob is bad at chess")
    await turn(qa, "remember that about bob", chat_id="g", user_id="alice", chat_type="group")
    assert "shared by the group" in tool_result(fake_llm)["error"]


async def test_memory_and_forget(make_runner, fake_llm, db_url):
    _runner, qa = await make_runner(db_url=db_url)
    await turn(qa, "/memory")
    assert "don't remember anything" in qa.texts()[-1]
    remember(fake_llm, "Name: Ada")
    await turn(qa, "I am Ada")
    remember(fake_llm, "Uses `vim` ``` and <@everyone>")
    await turn(qa, "I use vim")
    await turn(qa, "/memory")
    shown = qa.texts()[-1]
    assert "1. Name: Ada" in shown and "2. Uses `vim`" in shown
    assert shown.count("```") == 2  # one code block: the note's own fence cannot close it
    # In a group the notes are not shown to everyone there.
    await turn(qa, "/memory", chat_id="g", chat_type="group")
    assert "Ada" not in qa.texts()[-1] and "2 note(s)" in qa.texts()[-1]
    await turn(qa, "/forget")
    assert "Forgot 2 note(s)" in qa.texts()[-1]
    await turn(qa, "/memory")
    assert "don't remember anything" in qa.texts()[-1]
    await turn(qa, "/new")
    await turn(qa, "who am I?")
    assert "Ada" not in system_prompt(fake_llm)


async def test_the_memory_is_capped(make_runner, fake_llm, db_url):
    _runner, qa = await make_runner({"agent": {"memory_max_chars": 30}}, db_url=db_url)
    remember(fake_llm, "a" * 20)
    await turn(qa, "one")
    remember(fake_llm, "b" * 20)
    await turn(qa, "two")
    assert "memory is full" in tool_result(fake_llm)["error"]
    remember(fake_llm, "b" * 20, action="replace", old_text="aaa")
    await turn(qa, "three")
    assert tool_result(fake_llm)["entries"] == ["b" * 20]


async def test_memory_off(make_runner, fake_llm):
    _runner, qa = await make_runner({"agent": {"memory_max_chars": 0}})
    await turn(qa, "hello")
    assert "memory" not in [t["function"]["name"] for t in fake_llm.requests[-1]["tools"]]
    await turn(qa, "/memory")
    assert "Memory is off" in qa.texts()[-1]


def test_replace_and_remove_need_exactly_one_entry() -> None:
    entries = ["likes tea", "likes coffee", "lives in Oslo"]
    assert apply(entries, "remove", "", "Oslo", 100) == (["likes tea", "likes coffee"], "removed")
    assert apply(entries, "replace", "likes green tea", "tea", 100)[0][0] == "likes green tea"
    with pytest.raises(MemoryRefused, match="2 entries"):
        apply(entries, "remove", "", "likes", 100)
    with pytest.raises(MemoryRefused, match="no entry"):
        apply(entries, "remove", "", "Paris", 100)
    assert apply(entries, "add", "likes tea", "", 100) == (entries, "already remembered")
    with pytest.raises(MemoryRefused, match="action"):
        apply(entries, "drop", "", "", 100)
