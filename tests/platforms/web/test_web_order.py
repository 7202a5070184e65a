"""The web chat keeps a conversation in causal order whatever the scheduling: the user's message first,
then everything it caused (a command's answer, the "queued" notice, the reply).

``accept`` starts a command's task (and sends the "queued" notice) before it returns. Under load the POST
handler can lose the loop right after ``accept`` for as long as the command takes; the adapter here is
made to do exactly that, so a message logged after ``accept`` shows below its own answer, every time (the
browser test, tests/e2e/test_web_browser.py::test_the_web_chat_in_a_browser, checks the same through the
real process — ``/status`` sent during a running turn is answered below itself — where the race is rarely
lost).
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from tests.fakes.llm import last_user_message, message_text
from tests.support.polling import wait_until


async def _web(make_runner: Any) -> tuple[Any, Any, aiohttp.ClientSession, str]:
    runner, _qa = await make_runner({"platforms": {"web": {"enabled": True}}})
    web = runner.adapters["web"]
    accept = web.accept

    async def accept_then_lose_the_loop(msg: Any) -> Any:
        result = await accept(msg)
        await asyncio.sleep(0.3)  # long enough for a command to answer, or the lane to say "queued"
        return result

    web.accept = accept_then_lose_the_loop
    http = aiohttp.ClientSession(headers={"Authorization": f"Bearer {web.token}"})
    return runner, web, http, f"http://127.0.0.1:{runner.http_port}"


async def _post(http: aiohttp.ClientSession, base: str, chat: str, text: str) -> None:
    async with http.post(f"{base}/api/v1/messages", json={"chat_id": chat, "user_id": "owner", "text": text}) as r:
        assert r.status == 202, await r.text()


async def _wait(http: aiohttp.ClientSession, base: str, chat: str, done: Any) -> list[tuple[str, str]]:
    msgs: list[tuple[str, str]] = []

    async def met() -> Any:
        async with http.get(f"{base}/api/v1/chats/{chat}/messages") as r:
            msgs[:] = [(m["role"], m["text"]) for m in (await r.json())["messages"]]
        return done(msgs)

    await wait_until(met, what=lambda: f"a condition on chat {chat!r} (it has: {msgs})", interval=0.05)
    return msgs


def _before(msgs: list[tuple[str, str]], cause: str, effect: Any) -> None:
    asked = msgs.index(("user", cause))
    answered = next(i for i, (role, text) in enumerate(msgs) if role == "assistant" and effect(text))
    assert asked < answered, msgs


async def test_a_commands_answer_is_below_the_command(make_runner: Any) -> None:
    _runner, _web_adapter, http, base = await _web(make_runner)
    async with http:
        await _post(http, base, "c", "/status")
        msgs = await _wait(http, base, "c", lambda m: len(m) >= 2)
    assert msgs[0] == ("user", "/status")
    assert msgs[1][0] == "assistant" and msgs[1][1].startswith("Idle")


async def test_queued_notice_and_a_command_during_a_turn_are_below_their_message(make_runner: Any,
                                                                                fake_llm: Any) -> None:
    _runner, _web_adapter, http, base = await _web(make_runner)
    async with http:
        await _post(http, base, "c", "[sleep=1.5] first")
        for _ in range(100):
            if any("first" in message_text(last_user_message(r)) for r in fake_llm.requests):
                break
            await asyncio.sleep(0.02)
        await _post(http, base, "c", "second")
        await _post(http, base, "c", "/status")
        msgs = await _wait(http, base, "c", lambda m: ("assistant", "echo: second") in m)
    _before(msgs, "second", lambda t: t.startswith("⏳ Queued"))
    _before(msgs, "/status", lambda t: t.startswith("Busy"))
    _before(msgs, "second", lambda t: t == "echo: second")
