"""Model faults on purpose: the fake model answers 429 with Retry-After, 500s, hangs past the timeout, cuts its
stream half-way (dropped, or closed cleanly between two events) or writes malformed tool-call JSON, for a
stretch. A turn retries within its budget (``model.max_retries``), goes to ``model.fallbacks`` when the
primary keeps failing, and otherwise tells the user plainly that it gave up; other chats are answered
meanwhile; nothing half-written is stored, and the chat's next message works. Every fault the model served
is counted in ``herald_faults_total`` under its class.

Short run: one turn meets the outage (the outage ends once it gave up). ``HERALD_FAULTS_LONG=1``: the outage
lasts a minute and the chat keeps writing through it.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from gateway.platforms.base import Source
from tests.fakes.llm import Error, Hang, Reply, ToolCall, last_user_message, message_text
from tests.faults.conftest import scale
from tests.faults.outages import (
    TRACE_MARKS,
    consistent,
    fault_counts,
    faults_since,
    shown_in,
    stored_history,
    until,
)

# Answers are awaited by polling what the chat shows (``until``), not with ``qa.wait_for``: a turn slower than a
# second is streamed, and its answer arrives as an edit, which does not wake ``wait_for``.
SECRET = "sk-faults-test-0123456789abcdef"
VICTIM, OTHERS = "victim", [f"other{n}" for n in range(4)]
RETRIES = 2


def for_victim(body: dict[str, Any]) -> bool:
    return "[victim]" in message_text(last_user_message(body))


def model_cfg(fake_llm: Any, **extra: Any) -> dict[str, Any]:
    return {"model": {"base_url": fake_llm.base_url, "name": "fake-model", "max_retries": RETRIES,
                      "timeout_seconds": 0.6, "api_key_env": "FAULTS_MODEL_KEY", **extra},
            "display": {"streaming": True}}


# (fault class, what the outage serves, words the user is told)
OUTAGES = {
    "rate_limited": ("model_rate_limited", Error(429, retry_after=1), "rate-limiting"),
    "server_error": ("model_error", Error(500), "server error"),
    "hang": ("model_timeout", Hang(3.0), "did not answer in time"),
    # Slow enough that the chat shows the fragment (gateway/outbound/streaming/live.py OPEN_AFTER) before it is cut.
    "stream_dropped": ("model_stream_cut", Reply.streamed(["zorp ", "an ", "answer ", "that ", "never ends"], 0.45,
                                                          cut_after=4), "cut off"),
    "stream_closed": ("model_stream_cut", Reply.streamed(["zorp ", "an ", "answer ", "never ends"], 0.05,
                                                         cut_after=2, cut_clean=True), "cut off"),
}


@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", list(OUTAGES))
async def test_a_model_outage_gives_up_plainly_within_budget_while_other_chats_are_served(
        name: str, make_runner: Any, fake_llm: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fault, step, words = OUTAGES[name]
    monkeypatch.setenv("FAULTS_MODEL_KEY", SECRET)
    runner, qa = await make_runner(model_cfg(fake_llm))
    before = fault_counts(runner)
    outage = fake_llm.outage(step, 600, match=for_victim)
    stretch_ends = time.monotonic() + scale(0, 60)
    turns = 0
    gave_up = 0
    while True:
        turns += 1
        served_before, shown_before = outage.served, len(shown_in(qa, VICTIM))
        await qa.say(f"[victim] question {turns}", chat_id=VICTIM)
        if turns == 1:
            # The victim's turn is in trouble: every other chat is answered before it gives up.
            await until(lambda: outage.served >= 1, what="the outage to meet the victim's turn")
            for chat in OTHERS:
                await qa.say(f"hello from {chat}", chat_id=chat)
            await until(lambda: all(f"echo: hello from {c}" in shown_in(qa, c) for c in OTHERS), timeout=30,
                        what="the other chats' answers")
            assert not any(words in t for t in shown_in(qa, VICTIM)[shown_before:]), \
                "the victim's turn gave up before the others were served"
        await until(lambda start=shown_before: any(words in t for t in shown_in(qa, VICTIM)[start:]), timeout=30,
                    what="the victim to be told")
        gave_up += 1
        # Within its budget: the first attempt and model.max_retries more, no more.
        assert outage.served - served_before == RETRIES + 1
        if time.monotonic() >= stretch_ends:
            break
    outage.end()

    told = shown_in(qa, VICTIM)
    assert all(not any(mark in text for mark in TRACE_MARKS) for text in told), told
    if name == "stream_dropped":
        assert any("zorp" in (text or "") for _c, _m, text in qa.edits) or any(
            "zorp" in s.text for s in qa.sent), "the fragment was never shown: the check below proves nothing"
    assert not any("zorp" in text for text in told)  # a cut stream's fragment is not left on show
    assert all(SECRET not in text for text in shown_in(qa, VICTIM) + [s.text for s in qa.sent])
    assert faults_since(runner, before) == {fault: outage.served}

    victim = Source("qa", VICTIM, "u1")
    history = await stored_history(runner, victim)
    assert [m["role"] for m in history] == ["user"] * turns  # the questions, and no half-written answer
    assert not any("zorp" in str(m.get("content")) for m in history)

    await qa.say("[victim] and now?", chat_id=VICTIM)
    await until(lambda: "echo: [victim] and now?" in shown_in(qa, VICTIM), timeout=30, what="the next answer")
    history = await stored_history(runner, victim)
    assert consistent(history) == []
    assert history[-1] == {"role": "assistant", "content": "echo: [victim] and now?"}
    print(f"\n{name}: {fault} injected {outage.served} times over {turns} turns ({gave_up} gave up); "
          "lost 0, doubled 0")


@pytest.mark.timeout(180)
async def test_the_fallback_model_answers_when_the_primary_keeps_failing(make_runner: Any, fake_llm: Any) -> None:
    # A timeout of its own: under load a 0.6 s one is met now and then, and this test counts only 500s.
    runner, qa = await make_runner(model_cfg(fake_llm, timeout_seconds=10, fallbacks=[
        {"base_url": fake_llm.base_url, "name": "backup-model"}]))
    before = fault_counts(runner)
    outage = fake_llm.outage(Error(500, retry_after=0), 600, match=lambda body: body.get("model") == "fake-model")
    stretch_ends = time.monotonic() + scale(0, 60)
    for n in itertools.count(1):
        asked = len(fake_llm.requests)
        await qa.say(f"question {n}", chat_id="c1")
        await until(lambda n=n: f"echo: question {n}" in shown_in(qa, "c1"), timeout=30, what="the answer")
        # The primary got its budget, then the fallback answered.
        assert [r["model"] for r in fake_llm.requests[asked:]] == ["fake-model"] * (RETRIES + 1) + ["backup-model"]
        if time.monotonic() >= stretch_ends:
            break
    outage.end()
    assert faults_since(runner, before) == {"model_error": outage.served}
    history = await stored_history(runner, Source("qa", "c1", "u1"))
    assert consistent(history) == [] and [m["role"] for m in history] == ["user", "assistant"] * n
    print(f"\nfallback: model_error injected {outage.served} times over {n} turns; lost 0, doubled 0")


@pytest.mark.timeout(180)
async def test_malformed_tool_call_json_is_repaired_or_refused_and_never_stored_malformed(
        make_runner: Any, fake_llm: Any) -> None:
    runner, qa = await make_runner(model_cfg(fake_llm, timeout_seconds=10))
    before = fault_counts(runner)
    broken = itertools.cycle(['{"path": "missing.txt"', "{'path': 'missing.txt',}", "not json at all", "[1, 2"])

    def misbehave(body: dict[str, Any]) -> Any:
        last = (body.get("messages") or [{}])[-1]
        if last.get("role") == "tool":
            return Reply("tool said: " + message_text(last)[:40])
        return ToolCall("read_file", next(broken))

    outage = fake_llm.outage(misbehave, 600)
    stretch_ends = time.monotonic() + scale(0, 60)
    for n in itertools.count(1):
        await qa.say(f"read it {n}", chat_id="c1")
        await until(lambda n=n: len([t for t in shown_in(qa, "c1") if t.startswith("tool said")]) >= n,
                    timeout=30, what="the answer")
        if n >= 4 and time.monotonic() >= stretch_ends:
            break
    outage.end()
    malformed = sum(1 for r in fake_llm.requests if r["messages"][-1]["role"] == "user")
    assert faults_since(runner, before) == {"model_bad_output": malformed}
    history = await stored_history(runner, Source("qa", "c1", "u1"))
    assert consistent(history) == []  # every stored call's arguments are a JSON object, every call answered
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"] * n
    print(f"\nbad output: model_bad_output injected {malformed} times over {n} turns; lost 0, doubled 0")
