"""The daily commands end to end: the real `herald run` process driven through the web chat's API, the fake
model's request log showing what the model was sent, the chat log showing what the person saw."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e.conftest import Herald
from tests.fakes.llm import FakeLLMThread, Hang, Reply, message_text
from tests.support.polling import wait_until_sync

pytestmark = pytest.mark.e2e


def conversation(request: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], message_text(m)) for m in request["messages"] if m["role"] in ("user", "assistant")]


def reply_to(herald: Herald, chat: str, text: str, marker: str, user: str = "tester") -> str:
    """Post ``text`` and return the first assistant message after it that contains ``marker``."""
    before = len(herald.replies(chat))

    def found(msgs: list[dict[str, Any]]) -> str | None:
        replies = [m["text"] for m in msgs if m["role"] == "assistant"][before:]
        return next((t for t in replies if marker in t), None)

    herald.post(text, chat_id=chat, user_id=user)
    return found(herald.wait_for(chat, found, timeout=20)) or ""


def test_retry_is_asked_without_the_old_answer_and_answered_once_across_a_crash(
        make_herald: Callable[..., Herald], fake_llm: FakeLLMThread) -> None:
    herald = make_herald()
    fake_llm.script(Reply("Lima, I think"))
    reply_to(herald, "r", "what is the capital of Peru?", "Lima")
    # The retried turn hangs; the daemon dies in it; the next one answers the retry from its inbox row.
    fake_llm.script(Hang(60), Reply("Lima, certainly"))
    herald.post("/retry", chat_id="r")
    wait_until_sync(lambda: len(fake_llm.requests) >= 2, timeout=20, what="the retried turn asked the model")
    # The kill lands in the retried turn once /retry itself has answered: a command's reply is sent once, after
    # the command is done, and a crash before it goes out loses it (the retry is still answered). The turn can
    # reach the model before that reply is out.
    herald.wait_for_replies("r", 1, match=lambda t: t.startswith("🔁"), timeout=20)
    assert herald.proc is not None
    herald.proc.send_signal(signal.SIGKILL)
    herald.proc.wait(10)
    herald.start()
    herald.wait_for_replies("r", 1, match=lambda t: t == "Lima, certainly", timeout=20)
    replies = herald.replies("r")
    assert replies.count("Lima, certainly") == 1 and replies.count("Lima, I think") == 1
    assert sum(t.startswith("🔁 Asking again: “what is the capital of Peru?”") for t in replies) == 1
    # Before and after the crash the model was asked the question alone, never shown the old answer.
    assert len(fake_llm.requests) == 3
    for request in fake_llm.requests[1:]:
        assert conversation(request) == [("user", "what is the capital of Peru?")]
    users = [m["text"] for m in herald.messages("r") if m["role"] == "user"]
    assert users == ["what is the capital of Peru?", "/retry"]
    reply_to(herald, "r", "and Chile?", "echo: and Chile?")
    assert conversation(fake_llm.requests[-1]) == [
        ("user", "what is the capital of Peru?"), ("assistant", "Lima, certainly"), ("user", "and Chile?")]


def test_undo_drops_the_last_exchange(herald: Herald, fake_llm: FakeLLMThread) -> None:
    reply_to(herald, "u", "one", "echo: one")
    reply_to(herald, "u", "two", "echo: two")
    said = reply_to(herald, "u", "/undo", "Undone")
    assert said == "↩️ Undone: your message “two” and my answer “echo: two”. I won't see them any more."
    reply_to(herald, "u", "three", "echo: three")
    assert conversation(fake_llm.requests[-1]) == [("user", "one"), ("assistant", "echo: one"), ("user", "three")]


def test_sessions_and_resume(herald: Herald, fake_llm: FakeLLMThread) -> None:
    reply_to(herald, "s", "about alpacas", "echo: about alpacas")
    reply_to(herald, "s", "/new", "fresh")
    reply_to(herald, "s", "about bees", "echo: about bees")
    listing = reply_to(herald, "s", "/sessions", "newest first").splitlines()
    assert listing[1].startswith("1. about bees") and listing[1].endswith("← current")
    assert listing[2].startswith("2. about alpacas")
    assert reply_to(herald, "s", "/resume 2", "Back to") == "▶️ Back to about alpacas (2 messages)."
    reply_to(herald, "s", "go on", "echo: go on")
    assert conversation(fake_llm.requests[-1]) == [("user", "about alpacas"), ("assistant", "echo: about alpacas"),
                                                   ("user", "go on")]


def test_search_shows_only_the_senders_messages(herald: Herald) -> None:
    reply_to(herald, "alice-chat", "my password hint is pineapple", "echo:", user="alice")
    reply_to(herald, "bob-chat", "bob likes pineapple pizza", "echo:", user="bob")
    found = reply_to(herald, "alice-chat", "/search pineapple", "🔎", user="alice")
    assert "password hint" in found and "pizza" not in found and found.count("• ") == 2
    found = reply_to(herald, "bob-chat", "/search hint", "🔎", user="bob")
    assert found == "🔎 Nothing of yours mentions “hint”."


def test_model_is_per_session_checked_and_kept_across_a_restart(make_herald: Callable[..., Herald],
                                                                  fake_llm: FakeLLMThread) -> None:
    herald = make_herald({"model": {"choices": ["fake-large"]}})
    shown = reply_to(herald, "m", "/model", "Choices")
    assert "`fake-model` (the default)" in shown and "`fake-large`" in shown
    assert "not one of the models" in reply_to(herald, "m", "/model gpt-9", "nothing changed")
    reply_to(herald, "m", "/model fake-large", "now uses")
    reply_to(herald, "m", "hello", "echo: hello")
    assert fake_llm.requests[-1]["model"] == "fake-large"
    reply_to(herald, "other", "elsewhere", "echo: elsewhere")
    assert fake_llm.requests[-1]["model"] == "fake-model"
    assert herald.stop() == 0
    herald.start()
    reply_to(herald, "m", "after the restart", "echo: after the restart")
    assert fake_llm.requests[-1]["model"] == "fake-large"
