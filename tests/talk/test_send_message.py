"""send_message and `herald send`, end to end in-process: the real runner, agent core and approvals, two QA
platforms (or the web chat for the CLI), the scripted model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import select
from typer.testing import CliRunner

from gateway.storage.tables import approvals, audit_events, outbox, outgoing
from tests.fakes.llm import ToolCall
from tests.support.polling import wait_until
from tests.support.qa_channel import QAAdapter


class OtherQA(QAAdapter):
    """A second platform, with a home chat of its own."""

    name = "qa3"


def tool_results(texts: list[str]) -> list[dict[str, Any]]:
    return [json.loads(t[len("tool said: "):]) for t in texts if t.startswith("tool said: ")]


async def the_result(qa: Any) -> dict[str, Any]:
    texts = await qa.wait_for(lambda t: bool(tool_results(t)))
    return tool_results(texts)[0]


async def rows(runner: Any, table: Any) -> list[dict[str, Any]]:
    return await runner.store.run_read(lambda c: [dict(r._mapping) for r in c.execute(select(table))])


def approval_prompts(qa: Any) -> list[Any]:
    return [s for s in qa.sent if s.message.buttons and s.message.buttons[0].id.startswith("ap:")]


async def two_platforms(make_runner: Any) -> tuple[Any, QAAdapter, QAAdapter]:
    runner, qa = await make_runner(adapters=[QAAdapter, OtherQA])
    other = runner.adapters["qa3"]
    await other.say("/sethome", chat_id="home3")  # the home chat of qa3 (the QA channel's senders are admins)
    await other.wait_for(lambda t: any("home chat" in x for x in t), chat_id="home3")
    return runner, qa, other


async def test_to_the_origin_chat_without_asking(make_runner, fake_llm):
    runner, qa = await make_runner()
    fake_llm.script(ToolCall("send_message", {"target": "qa:c1", "text": "a note for this chat"}))
    await qa.say("put a note here")
    result = await the_result(qa)
    assert result["sent"] is True
    assert qa.texts("c1").count("a note for this chat") == 1
    assert approval_prompts(qa) == [] and await rows(runner, approvals) == []
    (row,) = await rows(runner, outgoing)
    assert (row["status"], row["via"], row["session_key"]) == ("sent", "agent", "qa:dm:c1")


async def test_to_another_platforms_home_chat_approved_is_delivered_once(make_runner, fake_llm):
    runner, qa, other = await two_platforms(make_runner)
    fake_llm.script(ToolCall("send_message", {"target": "qa3", "text": "Deploy finished: **all green**"}))
    await qa.say("tell the ops channel")
    await qa.wait_for(lambda _t: bool(approval_prompts(qa)))
    (prompt,) = approval_prompts(qa)
    assert "qa3:home3" in prompt.text and "Deploy finished: **all green**" in prompt.text
    assert [b.label for b in prompt.message.buttons] == ["Send it", "Don't send"]
    assert not any("Deploy finished" in t for t in other.texts("home3")), "sent before anyone approved"

    assert await qa.click(prompt.message.buttons[0].id) == "Approved: it will be sent."
    result = await the_result(qa)
    assert result["sent"] is True and result["to"] == "qa3:home3"
    assert other.texts("home3").count("Deploy finished: **all green**") == 1
    (row,) = await rows(runner, outgoing)
    assert (row["status"], row["platform"], row["chat_id"]) == ("sent", "qa3", "home3")
    assert row["approval_id"] == prompt.message.buttons[0].id.split(":")[1]
    chunks = [r for r in await rows(runner, outbox) if r["ref"] == f"send:{row['id']}"]
    assert [c["status"] for c in chunks] == ["sent"]
    await wait_until(lambda: _audited(runner, "sent"), what="the audit row")
    # A poll of the queue afterwards sends nothing again.
    assert await runner.messenger.poll() == 0
    assert other.texts("home3").count("Deploy finished: **all green**") == 1


async def _audited(runner: Any, outcome: str) -> bool:
    return any(r["kind"] == "send_message" and r["outcome"] == outcome and r["session_key"] == "qa:dm:c1"
               for r in await rows(runner, audit_events))


async def test_to_another_platforms_home_chat_denied_is_not_sent(make_runner, fake_llm):
    runner, qa, other = await two_platforms(make_runner)
    fake_llm.script(ToolCall("send_message", {"target": "qa3", "text": "Deploy finished"}))
    await qa.say("tell the ops channel")
    await qa.wait_for(lambda _t: bool(approval_prompts(qa)))
    (prompt,) = approval_prompts(qa)
    assert await qa.click(prompt.message.buttons[1].id) == "Denied."
    result = await the_result(qa)
    assert result["sent"] is False and "denied" in result["error"]
    assert not any("Deploy finished" in t for t in other.texts())
    assert await rows(runner, outgoing) == []
    await wait_until(lambda: _audited(runner, "denied"), what="the audit row")


async def test_to_a_chat_the_bot_has_no_conversation_in_is_refused(make_runner, fake_llm):
    runner, qa, other = await two_platforms(make_runner)
    fake_llm.script(ToolCall("send_message", {"target": "qa3:someone-else", "text": "hi"}))
    await qa.say("message them")
    result = await the_result(qa)
    assert result["sent"] is False and "no conversation" in result["error"]
    assert approval_prompts(qa) == [] and other.texts("someone-else") == []
    await wait_until(lambda: _audited(runner, "refused"), what="the audit row")


def write_config(home: Path, cfg: dict[str, Any]) -> None:
    """The profile's config.yaml, for the CLI (the runner under test is built from the same values)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump(cfg))


async def test_herald_send_delivers_once(make_runner, home: Path):
    write_config(home, {"http": {"port": 0}, "platforms": {"web": {"enabled": True}}})
    runner, _qa = await make_runner({"platforms": {"web": {"enabled": True}}})
    from gateway.cli import app

    def send(*args: str) -> Any:
        return CliRunner().invoke(app, ["send", "web:owner", *args], catch_exceptions=False)

    first = await asyncio.to_thread(send, "disk 91% full on db1", "--key", "disk-db1-0900")
    assert first.exit_code == 0, first.output
    assert first.output.startswith("sent to web:owner")
    again = await asyncio.to_thread(send, "disk 91% full on db1", "--key", "disk-db1-0900")
    assert again.exit_code == 0 and again.output == first.output  # the same message, not a second one

    log = await runner.store.chat_log.recent("web", "owner")
    assert [r["text"] for r in log if "disk 91%" in r["text"]] == ["disk 91% full on db1"]
    (row,) = await rows(runner, outgoing)
    assert (row["via"], row["status"], row["key"]) == ("cli", "sent", "disk-db1-0900")
    chunks = [r for r in await rows(runner, outbox) if r["ref"] == f"send:{row['id']}"]
    assert [c["status"] for c in chunks] == ["sent"]
    # The dashboard's audit view shows it.
    html = await dashboard_view(runner)
    assert 'id="audit"' in html and "send_message" in html and "disk 91% full on db1" in html


async def dashboard_view(runner: Any) -> str:
    import aiohttp

    await wait_until(lambda: _audited_any(runner), what="the audit row")
    headers = {"Authorization": f"Bearer {runner.adapters['web'].token}"}
    async with aiohttp.ClientSession(headers=headers) as http, \
            http.get(f"http://127.0.0.1:{runner.http_port}/api/v1/dashboard/view") as resp:
        assert resp.status == 200
        return str((await resp.json())["html"])


async def _audited_any(runner: Any) -> bool:
    return bool(await rows(runner, audit_events))


async def test_herald_send_without_a_daemon_queues_for_the_next_start(make_runner, home: Path):
    write_config(home, {"platforms": {"web": {"enabled": True}}})
    from gateway.cli import app

    result = await asyncio.to_thread(CliRunner().invoke, app, ["send", "web:owner", "while you were away"])
    assert result.exit_code == 1 and "Herald is not running" in result.output
    runner, _qa = await make_runner({"platforms": {"web": {"enabled": True}}})
    await wait_until(lambda: _sent_once(runner, "while you were away"), what="the queued message sent at start")


async def _sent_once(runner: Any, text: str) -> bool:
    log = await runner.store.chat_log.recent("web", "owner")
    return [r["text"] for r in log if text in r["text"]] == [text]
