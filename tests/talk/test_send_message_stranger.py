"""send_message to a stranger's chat: the real runner, agent core and access control, two QA platforms (one
trusted, where the agent talks; one whose senders go through the allowlist), the scripted model."""

from __future__ import annotations

from typing import Any

from gateway.storage.tables import approvals, inbox, outbox, outgoing
from tests.fakes.llm import ToolCall
from tests.support.polling import wait_until
from tests.support.qa_channel import QAAdapter, UntrustedQAAdapter
from tests.talk.test_send_message import _audited, approval_prompts, rows, the_result


async def test_to_a_strangers_chat_is_refused_and_nothing_is_sent(make_runner, fake_llm):
    runner, qa = await make_runner({"access": {"allowed_users": ["qa2:friend"]}},
                                   adapters=[QAAdapter, UntrustedQAAdapter])
    other = runner.adapters["qa2"]
    # A stranger wrote to the bot on qa2: the bot has a conversation there, but nobody in it may talk to it.
    await other.say("hello bot", chat_id="s1", user_id="stranger")
    await wait_until(lambda: _inbox_from(runner, "stranger"), what="the stranger's message recorded")
    await other.wait_for(lambda t: any("pairing code" in x for x in t), chat_id="s1")
    texts_before = other.texts("s1")

    fake_llm.script(ToolCall("send_message", {"target": "qa2:s1", "text": "hi there"}))
    await qa.say("message that person")
    result = await the_result(qa)
    assert result["sent"] is False and "stranger's chat" in result["error"] and "qa2:s1" in result["error"]
    assert other.texts("s1") == texts_before and not any("hi there" in t for t in other.texts())
    assert approval_prompts(qa) == [] and await rows(runner, approvals) == []  # refused outright, not asked
    assert await rows(runner, outgoing) == []
    assert not any(r["ref"].startswith("send:") for r in await rows(runner, outbox) if r["ref"])
    await wait_until(lambda: _audited(runner, "refused"), what="the audit row")


async def _inbox_from(runner: Any, user_id: str) -> bool:
    return any((r["payload"] or {}).get("source", {}).get("user_id") == user_id for r in await rows(runner, inbox))
