"""Bad input at every door: each HTTP endpoint the daemon serves, and the Telegram poller.

Malformed JSON, the wrong content type, 1 MB and 10 MB bodies, lone surrogates, NUL characters, JSON nested
100 000 deep, invalid UTF-8, huge and unknown Telegram updates, a reply longer than the platform takes: each
gets a 4xx (or a plain message in the chat), never a 500 or a crash; each refusal is counted as the fault
``bad_request``; and the next normal message is answered.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from gateway.platforms.slack.adapter import EVENTS_PATH
from gateway.runner import GatewayRunner
from tests.fakes.llm import Reply
from tests.faults.storage import ALICE_TG, start  # noqa: F401 - fixtures

ALICE_SLACK = "U0ALICE"  # replaced by the fake's own id where it matters
WEBHOOK = "/telegram/webhook"
COUNTED = (400, 411, 413, 415, 422)  # the statuses that are a bad request of the caller's

NESTED = b"[" * 100_000 + b"]" * 100_000
BODIES: dict[str, tuple[bytes, str]] = {
    "malformed JSON": (b'{"chat_id": "c", "text": ', "application/json"),
    "wrong content type": (b"chat_id=c&user_id=u&text=hi", "application/x-www-form-urlencoded"),
    "plain text": (b"hello", "text/plain"),
    "empty": (b"", "application/json"),
    "1 MB": (json.dumps({"chat_id": "c", "user_id": "u", "text": "x" * 1_000_000, "choice": "o",
                         "key": "k" * 1_000_000}).encode(), "application/json"),
    "10 MB": (b'{"text": "' + b"x" * 10_000_000 + b'"}', "application/json"),
    "lone surrogate": (b'{"chat_id": "c", "user_id": "u", "text": "\\ud800", "key": "\\udfff", "choice": "o"}',
                       "application/json"),
    "NUL": (b'{"chat_id": "c\\u0000", "user_id": "u", "text": "a\\u0000b", "key": "a\\u0000"}', "application/json"),
    "nested 100 000 deep": (NESTED, "application/json"),
    "invalid UTF-8": (b'{"chat_id": "c", "user_id": "u", "text": "\xff\xfe\xc3"}', "application/json"),
    "a JSON array": (b"[1, 2, 3]", "application/json"),
}


def bad_requests(runner: GatewayRunner) -> int:
    return runner.faults.recent().get("bad_request", 0)


def slack_headers(secret: str, body: bytes) -> dict[str, str]:
    ts = str(int(time.time()))
    digest = hmac.new(secret.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}


async def web_roundtrip(http: aiohttp.ClientSession, base: str, token: str, text: str) -> None:
    """A normal message through the web API, answered."""
    auth = {"Authorization": f"Bearer {token}"}
    async with http.post(f"{base}/api/v1/messages", json={"chat_id": "ok", "user_id": "u", "text": text},
                         headers=auth) as resp:
        assert resp.status == 202, await resp.text()

    async def answered() -> bool:
        async with http.get(f"{base}/api/v1/chats/ok/messages", headers=auth) as resp:
            return any(m["text"] == f"echo: {text}" for m in (await resp.json())["messages"])

    deadline = time.monotonic() + 15
    while not await answered():
        assert time.monotonic() < deadline, f"no answer to {text!r}"
        await asyncio.sleep(0.05)


@pytest.mark.timeout(120)
async def test_every_http_door_answers_bad_input_with_a_4xx_and_counts_it(start, fake_tg, fake_slack):  # noqa: F811
    runner = await start("webhook", slack=True)
    base = f"http://127.0.0.1:{runner.http_port}"
    token = runner.adapters["web"].token  # type: ignore[attr-defined]
    tg_secret = hmac.new(fake_tg.token.encode(), b"herald-telegram-webhook", hashlib.sha256).hexdigest()
    bearer = {"Authorization": f"Bearer {token}"}
    doors: dict[str, tuple[str, str, Callable[[bytes], dict[str, str]]]] = {
        "web message": ("POST", "/api/v1/messages", lambda _b: bearer),
        "web button": ("POST", "/api/v1/chats/c/buttons/b", lambda _b: bearer),
        "dashboard approval": ("POST", "/api/v1/dashboard/approvals/a1", lambda _b: bearer),
        "dashboard reset": ("POST", "/api/v1/dashboard/sessions/reset", lambda _b: bearer),
        "telegram webhook": ("POST", WEBHOOK, lambda _b: {"X-Telegram-Bot-Api-Secret-Token": tg_secret}),
        "slack events": ("POST", EVENTS_PATH, lambda b: slack_headers(fake_slack.signing_secret, b)),
        # Doors that take no body: whatever comes with the request must not hurt them either.
        "metrics": ("GET", "/metrics", lambda _b: {}),
        "readyz": ("GET", "/readyz", lambda _b: {}),
        "healthz": ("GET", "/healthz", lambda _b: {}),
        "status": ("GET", "/api/v1/status", lambda _b: bearer),
        "chat history": ("GET", "/api/v1/chats/c/messages", lambda _b: bearer),
        "dashboard view": ("GET", "/api/v1/dashboard/view", lambda _b: bearer),
    }
    before = bad_requests(runner)
    counted = 0
    failures: list[str] = []
    async with aiohttp.ClientSession() as http:
        for door, (method, path, headers) in doors.items():
            for what, (body, ctype) in BODIES.items():
                try:
                    async with http.request(method, base + path, data=body,
                                            headers={"Content-Type": ctype, **headers(body)}) as resp:
                        status, text = resp.status, await resp.text()
                except aiohttp.ClientError as exc:  # the server may close on a body it will not read
                    if what != "10 MB":
                        failures.append(f"{door} / {what}: {type(exc).__name__}")
                    continue
                if status >= 500 or (method == "POST" and status < 400 and what not in ("1 MB",)
                                     and door != "slack events"):
                    failures.append(f"{door} / {what}: {status} {text[:200]}")
                if status in COUNTED:
                    counted += 1
                    if "json" in resp.headers.get("Content-Type", ""):
                        assert json.loads(text).get("error") or json.loads(text).get("ok") is False, text[:200]
        # Odd paths and queries: undecodable escapes, NUL, a lone surrogate's UTF-8, a long query.
        for path in ("/api/v1/chats/%ff%fe/messages", "/api/v1/chats/a%00b/messages",
                     "/api/v1/chats/%ed%a0%80/messages", "/api/v1/dashboard/view?view=" + "%ff" * 10,
                     "/api/v1/dashboard/view?view=cron/%00", "/readyz?" + "a" * 6000):
            async with http.get(base + path, headers=bearer) as resp:
                if resp.status >= 500:
                    failures.append(f"GET {path[:60]}: {resp.status} {(await resp.text())[:200]}")
                if resp.status in COUNTED:
                    counted += 1
        assert not failures, "\n".join(failures)
        assert counted > 0 and bad_requests(runner) - before == counted
        await web_roundtrip(http, base, token, "still here")
    assert all(a.state == "connected" for a in runner.adapters.values())
    print(f"\nfault bad_request (http doors): injected {len(doors) * len(BODIES) + 6}, counted {counted}")


@pytest.mark.timeout(120)
async def test_the_telegram_poller_survives_bad_updates_and_chunks_a_long_reply(start, fake_tg, fake_llm):  # noqa: F811
    runner = await start("polling", slack=False)
    before = bad_requests(runner)

    def push(update: dict[str, Any]) -> None:
        fake_tg._push(update)

    # A message far past what Telegram itself allows, a kind of update Herald never asked for, one whose
    # message is not an object, and text with a lone surrogate and a NUL in it.
    huge = fake_tg.user_message(ALICE_TG, text="h" * 1_000_000)
    push({"some_future_kind": {"id": 1}})
    push({"message": "not an object"})
    fake_tg.user_message(ALICE_TG, text="odd \ud800 and a\x00b")
    fake_tg.user_message(ALICE_TG, text="after the bad ones")
    await fake_tg.wait_sent(lambda sent: any(t == "echo: after the bad ones" for s in sent for t in s.texts),
                            timeout=20)
    texts = fake_tg.texts(ALICE_TG)
    assert any("too long" in t for t in texts), texts  # the huge one: a plain word, not 250 messages
    assert not any(t.startswith("echo: hhhh") for t in texts)
    assert any(t.startswith("echo: odd ") and "\x00" not in t for t in texts), texts
    assert fake_tg.confirmed_offset > huge["update_id"]  # every update was confirmed: nothing wedged
    assert bad_requests(runner) - before >= 3

    # A 5 000-character reply to a platform that takes 4 096: it arrives whole, in chunks that fit.
    long = "word " * 1000
    fake_llm.script(Reply(long))
    fake_tg.user_message(ALICE_TG, text="a long one please")
    sent = await fake_tg.wait_sent(lambda sent: "".join(t for s in sent for t in s.texts).count("word") >= 1000,
                                   timeout=20)
    chunks = [t for s in sent for t in s.texts if "word" in t]
    assert len(chunks) >= 2 and all(len(c) <= 4096 for c in chunks)
    assert " ".join(c.strip() for c in chunks).split() == long.split()
    fake_tg.user_message(ALICE_TG, text="and then")
    await fake_tg.wait_sent(lambda sent: any(t == "echo: and then" for s in sent for t in s.texts))
    assert runner.adapters["telegram"].state == "connected"
    print(f"\nfault bad_request (telegram poller): injected 4, counted {bad_requests(runner) - before}")
