"""A dangerous command asked for through the API: its prompt goes where ``api.approvals_to`` says (a Telegram chat,
through the real python-telegram-bot against the fake Bot API, or the dashboard), the streaming client is told it
waits and what was decided, and the answer goes on — or ends in a plain sentence."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from gateway.storage.tables import approvals
from tests.api.conftest import Api
from tests.fakes.telegram_api import FakeTelegram
from tests.support.polling import wait_until

OWNER = 424242


def ask(command: str) -> str:
    """A user message that makes the fake model call the terminal tool with ``command``."""
    return f"[tool=terminal:{json.dumps({'command': command})}]"


@pytest.fixture
async def start_with_telegram(start_api, fake_tg: FakeTelegram, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", fake_tg.token)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))

    async def start(**approvals_cfg: Any) -> Api:
        api = await start_api(
            api={"approvals_to": f"telegram:{OWNER}"}, approvals=approvals_cfg,
            platforms={"telegram": {"enabled": True, "base_url": fake_tg.base_url, "allowed_users": [OWNER]}})
        await wait_until(lambda: api.runner.adapters["telegram"].state == "connected", what="telegram connected")
        return api

    return start


async def read_stream(stream: Any, into: list[str]) -> str:
    async for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            into.append(chunk.choices[0].delta.content)
    return "".join(into)


def victim(tmp_path: Path) -> Path:
    folder = tmp_path / "work" / "victim"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "precious.txt").write_text("keep me")
    return folder


async def test_a_dangerous_command_is_approved_in_telegram_and_the_api_answer_continues(
        start_with_telegram, fake_tg, tmp_path):
    api = await start_with_telegram()
    target = victim(tmp_path)
    shown: list[str] = []
    stream = await api.client.chat.completions.create(
        model="herald", messages=[{"role": "user", "content": ask(f"rm -rf {target}")}], stream=True)
    reading = asyncio.create_task(read_stream(stream, shown))
    sent = await fake_tg.wait_sent(lambda s: any(m.chat_id == OWNER and m.buttons for m in s))
    prompt = next(m for m in sent if m.chat_id == OWNER and m.buttons)
    assert f"rm -rf {target}" in prompt.text
    await wait_until(lambda: "Waiting for approval in Telegram" in "".join(shown), what="the client told it waits")
    assert target.exists(), "ran before anyone approved"

    approve = next(b["callback_data"] for b in prompt.buttons if b["text"] == "Approve once")
    fake_tg.press(OWNER, OWNER, prompt.message_id, approve)
    text = await asyncio.wait_for(reading, 20)
    assert not target.exists()
    assert "Approved in Telegram" in text
    assert text.rstrip().splitlines()[-1].startswith("tool said: ")  # the agent went on after the approval
    (row,) = await api.rows(approvals)
    # The audit trail: asked in the Telegram chat, for the API key's holder, decided there by the owner.
    assert (row["platform"], row["chat_id"], row["requested_by"]) == ("telegram", str(OWNER), "api:tester")
    assert (row["status"], row["decided_by"], row["decided_via"]) == ("approved", str(OWNER), "button")


async def test_a_denied_command_ends_the_answer_with_a_plain_sentence(start_with_telegram, fake_tg, tmp_path):
    api = await start_with_telegram()
    target = victim(tmp_path)
    stream = await api.client.chat.completions.create(
        model="herald", messages=[{"role": "user", "content": ask(f"rm -rf {target}")}], stream=True)
    reading = asyncio.create_task(read_stream(stream, []))
    sent = await fake_tg.wait_sent(lambda s: any(m.chat_id == OWNER and m.buttons for m in s))
    prompt = next(m for m in sent if m.chat_id == OWNER and m.buttons)
    deny = next(b["callback_data"] for b in prompt.buttons if b["text"] == "Deny")
    fake_tg.press(OWNER, OWNER, prompt.message_id, deny)
    text = await asyncio.wait_for(reading, 20)
    assert target.exists()
    assert "Denied in Telegram" in text and "was not run" in text


async def test_nobody_answering_ends_the_non_streamed_answer_too(start_with_telegram, fake_tg, tmp_path):
    api = await start_with_telegram(timeout_seconds=0.5)
    target = victim(tmp_path)
    answer = await api.client.chat.completions.create(
        model="herald", messages=[{"role": "user", "content": ask(f"rm -rf {target}")}])
    assert target.exists()
    result = json.loads(answer.choices[0].message.content.removeprefix("tool said: "))
    assert result["status"] == "expired"  # what the model was told; it answers the client in its own words


async def test_approvals_on_the_dashboard_wait_there(start_api, tmp_path):
    api = await start_api(api={"approvals_to": "dashboard"})
    target = victim(tmp_path)
    shown: list[str] = []
    stream = await api.client.chat.completions.create(
        model="herald", messages=[{"role": "user", "content": ask(f"rm -rf {target}")}], stream=True)
    reading = asyncio.create_task(read_stream(stream, shown))
    broker = api.runner.approvals
    await wait_until(lambda: broker.pending, what="a pending approval")
    await wait_until(lambda: "Waiting for approval on the dashboard" in "".join(shown), what="the client told")
    assert api.qa.sent == []  # no chat got a prompt
    (approval_id,) = list(broker.pending)
    assert await broker.decide_as_operator(approval_id, "o") == "Approved once."
    text = await asyncio.wait_for(reading, 20)
    assert "Approved on the dashboard" in text and not target.exists()
