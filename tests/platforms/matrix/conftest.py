"""Fixtures and helpers of the Matrix tests: the fake homeserver and a runner factory."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.config import parse_config, resolve_paths
from gateway.platforms.matrix.adapter import MatrixAdapter
from gateway.runner import GatewayRunner
from tests.fakes.llm import FakeLLM, last_user_message, message_text
from tests.fakes.matrix_api import BOT, FakeMatrix, Sent
from tests.support.polling import wait_until

ALICE, BOB, CAROL, STRANGER = "@alice:fake.test", "@bob:fake.test", "@carol:fake.test", "@stranger:fake.test"

Factory = Callable[..., Awaitable[GatewayRunner]]


@pytest.fixture
async def fake_mx() -> AsyncIterator[FakeMatrix]:
    fake = FakeMatrix()
    await fake.start()
    fake.user(ALICE, "Alice")
    fake.user(BOB, "Bob")
    yield fake
    await fake.stop()


@pytest.fixture
async def start_mx(home: Path, tmp_path: Path, fake_llm: FakeLLM, fake_mx: FakeMatrix,
                   monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Factory]:
    monkeypatch.setenv("MATRIX_ACCESS_TOKEN", fake_mx.bot_token)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    runners: list[GatewayRunner] = []

    async def factory(connect: bool = True, extra: dict[str, Any] | None = None, **matrix: Any) -> GatewayRunner:
        mx = {"enabled": True, "homeserver": fake_mx.url, "user_id": BOT, "allowed_users": [ALICE, BOB]}
        mx.update(matrix)
        cfg = parse_config({
            "http": {"port": 0},
            "model": {"base_url": fake_llm.base_url, "name": "fake-model", "max_retries": 0},
            "platforms": {"web": {"enabled": False}, "matrix": mx},
            "display": {"streaming": False},
            **(extra or {}),
        })
        runner = GatewayRunner(cfg, resolve_paths())
        await runner.start()
        runners.append(runner)
        if connect:
            await wait_until(lambda: runner.adapters["matrix"].state == "connected", what="matrix connected")
        return runner

    yield factory
    for runner in runners:
        await runner.shutdown()


def adapter(runner: GatewayRunner) -> MatrixAdapter:
    a = runner.adapters["matrix"]
    assert isinstance(a, MatrixAdapter)
    return a


def answered(text: str) -> Callable[[list[Sent]], bool]:
    return lambda sent: any(m.text == text for m in sent)


def model_calls(llm: FakeLLM, text: str) -> int:
    return sum(message_text(last_user_message(r)) == text for r in llm.requests)
