"""WhatsApp end to end: the real runner against the fake Cloud API (tests/fakes/whatsapp_api.py), which POSTs
signed webhooks to the daemon's /whatsapp/webhook as Meta does, and the fake model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.config import parse_config, resolve_paths
from gateway.platforms.whatsapp.adapter import WEBHOOK_PATH
from gateway.runner import GatewayRunner
from tests.fakes.llm import FakeLLM
from tests.fakes.whatsapp_api import FakeWhatsApp
from tests.platforms.conformance.telegram_driver import free_port
from tests.support.polling import wait_until

ALICE, BOB, STRANGER = "+15551230001", "+15551230002", "+15559990000"

Factory = Callable[..., Awaitable[GatewayRunner]]


@pytest.fixture
async def fake_whatsapp() -> AsyncIterator[FakeWhatsApp]:
    fake = FakeWhatsApp()
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture
async def start_whatsapp(home: Path, tmp_path: Path, fake_llm: FakeLLM, fake_whatsapp: FakeWhatsApp,
                         monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Factory]:
    for name, value in fake_whatsapp.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    runners: list[GatewayRunner] = []

    async def factory(overrides: dict[str, Any] | None = None, **whatsapp: Any) -> GatewayRunner:
        section = {"enabled": True, "api_base_url": fake_whatsapp.api_url, "allowed_users": [ALICE, "15551230002"],
                   "phone_number_id": fake_whatsapp.phone_number_id}
        section.update(whatsapp)
        raw: dict[str, Any] = {
            "http": {"port": free_port()},
            "model": {"base_url": fake_llm.base_url, "name": "fake-model", "max_retries": 0},
            "platforms": {"web": {"enabled": False}, "whatsapp": section},
        }
        for key, value in (overrides or {}).items():
            raw[key] = {**raw.get(key, {}), **value}
        runner = GatewayRunner(parse_config(raw), resolve_paths())
        await runner.start()
        runners.append(runner)
        await wait_until(lambda: runner.adapters["whatsapp"].state == "connected", what="whatsapp connected")
        fake_whatsapp.webhook_url = url(runner)
        return runner

    yield factory
    for runner in runners:
        await runner.shutdown()


def url(runner: GatewayRunner) -> str:
    return f"http://127.0.0.1:{runner.http_port}{WEBHOOK_PATH}"
