"""Nothing secret leaves: health endpoints show error classes, stored and delivered errors are redacted."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from gateway.kernel.health import kind_of, public_status
from gateway.kernel.logs import REDACTED, add_secret
from gateway.platforms.base import PermanentError
from tests.support.qa_channel import QAAdapter

BOT_TOKEN = "7000000001:" + "AAFakeTokenForExposureTests0123456789"  # invented; shaped like a real one
CONFIGURED = "cfg-secret-Zp41"  # a configured secret's value: no built-in pattern knows its shape


class InvalidToken(Exception):
    """Named like python-telegram-bot's: the class is what /readyz may show."""


class LeakyStart(QAAdapter):
    """Fails to connect with an error whose text quotes the token, like an SDK's URL error."""

    name = "leaky"

    async def start(self) -> None:
        self.start_calls += 1
        raise InvalidToken(f"GET https://api.telegram.org/bot{BOT_TOKEN}/getMe rejected; key {CONFIGURED}")


async def wait_state(adapter: Any, state: str) -> None:
    for _ in range(200):
        if adapter.state == state:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{adapter.name} never reached {state!r} (is {adapter.state!r})")


@pytest.fixture
def web_on() -> dict[str, Any]:
    return {"platforms": {"web": {"enabled": True}}}


async def test_readyz_shows_the_error_class_and_a_hint_never_the_text(make_runner, web_on, monkeypatch):
    monkeypatch.setattr("gateway.inbound.supervisor.random.random", lambda: 0.0)
    add_secret(CONFIGURED)
    runner, leaky = await make_runner(web_on, adapters=[LeakyStart])
    await wait_state(leaky, "retrying")
    base = f"http://127.0.0.1:{runner.http_port}"
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base}/readyz") as resp:
            raw = await resp.text()
            body = await resp.json()
        assert resp.status == 503
        assert body["adapters"]["leaky"] == {
            "state": "retrying", "error": "InvalidToken",
            "hint": "the platform rejected the bot token: check the variable its *_env key names",
        }
        assert BOT_TOKEN not in raw and CONFIGURED not in raw and "api.telegram.org" not in raw
        async with http.get(f"{base}/healthz") as resp:
            assert BOT_TOKEN not in await resp.text()

        # The detail is for whoever holds the web token, and even then redacted.
        async with http.get(f"{base}/api/v1/status") as resp:
            assert resp.status == 401
        token = runner.adapters["web"].token  # type: ignore[attr-defined]
        async with http.get(f"{base}/api/v1/status", headers={"Authorization": f"Bearer {token}"}) as resp:
            raw = await resp.text()
            status = await resp.json()
        assert resp.status == 200
        detail = status["adapters"]["leaky"]
        assert detail["error"] == "InvalidToken"
        assert detail["last_error"] == (
            f"InvalidToken: GET https://api.telegram.org/bot{REDACTED}/getMe rejected; key {REDACTED}"
        )
        assert BOT_TOKEN not in raw and CONFIGURED not in raw
        assert status["adapters"]["web"] == {"state": "connected"}
    # Stored redacted, not only shown redacted.
    assert BOT_TOKEN not in (leaky.last_error or "") and leaky.error_kind == "InvalidToken"


async def test_last_error_set_by_an_adapter_itself_is_stored_redacted(make_runner):
    _runner, qa = await make_runner()
    qa.last_error = f"NetworkError: POST https://api.telegram.org/bot{BOT_TOKEN}/getUpdates timed out"
    assert qa.last_error == f"NetworkError: POST https://api.telegram.org/bot{REDACTED}/getUpdates timed out"
    qa.state = "retrying"
    assert public_status(qa) == {"state": "retrying", "error": "NetworkError",
                                 "hint": "cannot reach the platform; retrying"}
    qa.last_error = None
    assert qa.error_kind is None and public_status(qa) == {"state": "retrying"}


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (ConnectionError("x"), "ConnectionError"),
        ("RetryAfter: flood control", "RetryAfter"),
        ("Conflict", "Conflict"),
        (f"https://api.telegram.org/bot{BOT_TOKEN}/getMe: 404", "Error"),  # no class prefix: nothing of the text
        ("connection closed", "Error"),
        ("Hunter2Secret: leaked first", "Error"),  # a word at the start is not taken for a class name
        ("BadRequestError: chat not found", "BadRequestError"),
        (None, None),
    ],
)
def test_only_a_class_name_is_taken_as_the_error_kind(error: Any, kind: str | None) -> None:
    assert kind_of(error) == kind


async def test_a_failed_delivery_is_stored_and_reported_redacted(make_runner):
    runner, qa = await make_runner()
    qa.send_hook = lambda _chat, _text: PermanentError(f"Forbidden: https://api.telegram.org/bot{BOT_TOKEN}/send")
    from gateway.platforms.base import OutboundMessage

    report = await runner.delivery.deliver(qa, "c1", OutboundMessage("hi"))
    assert report.failed and report.error == f"Forbidden: https://api.telegram.org/bot{REDACTED}/send"
    async with runner.store.engine.connect() as conn:
        from sqlalchemy import text

        rows = (await conn.execute(text("SELECT error FROM outbox"))).all()
    assert rows and all(BOT_TOKEN not in (r[0] or "") for r in rows)


async def test_a_failed_command_stores_its_error_redacted(make_runner):
    runner, qa = await make_runner()

    async def boom(_ctx: Any) -> str:
        raise RuntimeError(f"upstream said no to https://u:{CONFIGURED}@h/x")

    from gateway.commands.registry import Command

    runner.commands.add(Command("boom", "explodes", boom))
    add_secret(CONFIGURED)
    await qa.say("/boom")
    await qa.wait_for(lambda texts: any("/boom failed: RuntimeError" in t for t in texts))
    async with runner.store.engine.connect() as conn:
        from sqlalchemy import text

        errors = [r[0] for r in (await conn.execute(text("SELECT error FROM inbox WHERE status='failed'"))).all()]
    assert errors == [f"upstream said no to https://{REDACTED}@h/x"]


async def test_a_cron_run_delivers_and_stores_its_error_redacted(make_runner, monkeypatch):
    from tests.cron.test_cron import Clock, create, runs, settle, start_cron

    add_secret(CONFIGURED)
    clock = Clock()
    runner, qa, sched = await start_cron(make_runner, clock)
    # The script's environment is an allowlist, but it may still print a secret it can read (here from a
    # file in the workspace): its stderr tail and stdout go into the chat.
    await asyncio.to_thread((runner.sandbox.workspace / "token.txt").write_text, CONFIGURED)
    job = await create(sched, schedule="10m", no_agent=True,
                       script=f'echo "out $(cat token.txt)"; echo "GET https://api.telegram.org/bot{BOT_TOKEN}/x '
                              f'failed" >&2; exit 3')
    clock.t += 600
    await sched.tick()
    await settle(sched)
    [run] = await runs(sched, job["id"])
    assert run["status"] == "failed"
    assert f"bot{REDACTED}/x failed" in run["error"] and BOT_TOKEN not in run["error"]
    assert run["output"].strip() == f"out {REDACTED}"
    [delivered] = qa.texts("c1")
    assert BOT_TOKEN not in delivered and CONFIGURED not in delivered and REDACTED in delivered


def test_configured_secrets_are_the_env_values_and_the_database_password(monkeypatch):
    from gateway.config import configured_secrets, parse_config

    monkeypatch.setenv("EXPOSURE_MODEL_KEY", "model-key-1")
    cfg = parse_config({"model": {"base_url": "http://m", "name": "x", "api_key_env": "EXPOSURE_MODEL_KEY"},
                        "database": {"url": "postgresql+asyncpg://herald:p%40ss-w0rd@db.internal/herald"}})
    assert set(configured_secrets(cfg)) == {"model-key-1", "p%40ss-w0rd", "p@ss-w0rd"}
    assert configured_secrets(parse_config({})) == []
