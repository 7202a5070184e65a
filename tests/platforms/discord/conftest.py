"""Fixtures and helpers of the Discord tests: the fake Discord (REST and gateway) and a runner factory."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.config import parse_config, resolve_paths
from gateway.platforms.discord.adapter import DiscordAdapter
from gateway.runner import GatewayRunner
from tests.fakes.discord_api import FakeDiscord, Sent
from tests.fakes.llm import FakeLLM, last_user_message, message_text
from tests.support.polling import wait_until

ALICE, BOB, HELPER, STRANGER, OTHER_BOT = (111_000_000_000_000_001, 222_000_000_000_000_002,
                                           333_000_000_000_000_003, 999_000_000_000_000_009,
                                           888_000_000_000_000_008)

Factory = Callable[..., Awaitable[GatewayRunner]]


@pytest.fixture
async def fake_dc() -> AsyncIterator[FakeDiscord]:
    fake = FakeDiscord()
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture
async def start_dc(home: Path, tmp_path: Path, fake_llm: FakeLLM, fake_dc: FakeDiscord,
                   monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Factory]:
    monkeypatch.setenv("DISCORD_BOT_TOKEN", fake_dc.token)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    runners: list[GatewayRunner] = []

    async def factory(connect: bool = True, http_port: int = 0, extra: dict[str, Any] | None = None,
                      **discord: Any) -> GatewayRunner:
        dc = {"enabled": True, "api_base_url": fake_dc.api_url, "gateway_url": fake_dc.gateway_url,
              "allowed_users": [ALICE, str(BOB)]}
        dc.update(discord)
        cfg = parse_config({
            "http": {"port": http_port},
            "model": {"base_url": fake_llm.base_url, "name": "fake-model", "max_retries": 0},
            "platforms": {"web": {"enabled": False}, "discord": dc},
            **(extra or {}),
        })
        runner = GatewayRunner(cfg, resolve_paths())
        await runner.start()
        runners.append(runner)
        if connect:
            await wait_until(lambda: runner.adapters["discord"].state == "connected")
        return runner

    yield factory
    for runner in runners:
        await runner.shutdown()


def adapter(runner: GatewayRunner) -> DiscordAdapter:
    a = runner.adapters["discord"]
    assert isinstance(a, DiscordAdapter)
    return a


def answered(fake: FakeDiscord, text: str) -> Callable[[list[Sent]], bool]:
    return lambda sent: any(m.content == text for m in sent)


def model_calls(llm: FakeLLM, text: str) -> int:
    return sum(message_text(last_user_message(r)) == text for r in llm.requests)
