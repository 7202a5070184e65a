from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from gateway.config import Config, parse_config, resolve_paths
from gateway.runner import GatewayRunner
from tests.fakes.llm import FakeLLM
from tests.fakes.slack_api import FakeSlack
from tests.fakes.telegram_api import FakeTelegram
from tests.support.qa_channel import QAAdapter

PG_URL = os.environ.get("HERALD_TEST_DATABASE_URL")


@asynccontextmanager
async def fresh_pg_database() -> AsyncIterator[str]:
    """A PostgreSQL database of its own for one test (xdist-safe), dropped afterwards."""
    import asyncpg

    assert PG_URL
    dsn = PG_URL.replace("postgresql+asyncpg://", "postgresql://")
    name = f"herald_t_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    try:
        yield f"{PG_URL.rpartition('/')[0]}/{name}"
    finally:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    if not PG_URL:
        pytest.skip("HERALD_TEST_DATABASE_URL is not set: PostgreSQL paths are not tested here")
    async with fresh_pg_database() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
async def db_url(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'state.db'}"
        return
    if not PG_URL:
        pytest.skip("HERALD_TEST_DATABASE_URL is not set: PostgreSQL paths are not tested here")
    async with fresh_pg_database() as url:
        yield url


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeLLM]:
    fake = FakeLLM()
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture
def home(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("HERALD_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HERALD_PROFILE", raising=False)
    return tmp_path / "home"


RunnerFactory = Callable[..., Awaitable[tuple[GatewayRunner, QAAdapter]]]


@pytest.fixture
async def make_runner(home: Any, fake_llm: FakeLLM) -> AsyncIterator[RunnerFactory]:
    """Start a real GatewayRunner (web chat off, http on a free port) with the QA channel attached."""
    runners: list[GatewayRunner] = []

    async def factory(overrides: dict[str, Any] | None = None, model: bool = True,
                      adapters: list[Any] | None = None, db_url: str | None = None) -> tuple[GatewayRunner, Any]:
        # Replies are not streamed unless a test says so (tests/outbound/test_streaming.py): a turn that takes over a
        # second on a loaded machine would otherwise show its answer as an edit, not as a message sent.
        data: dict[str, Any] = {"http": {"port": 0}, "platforms": {"web": {"enabled": False}},
                                "display": {"streaming": False}}
        if model:
            data["model"] = {"base_url": fake_llm.base_url, "name": "fake-model", "max_retries": 0}
        if db_url:
            data["database"] = {"url": db_url}
        for section, values in (overrides or {}).items():
            data.setdefault(section, {}).update(values)
        cfg: Config = parse_config(data)
        runner = GatewayRunner(cfg, resolve_paths(), extra_adapters=adapters or [QAAdapter])
        await runner.start()
        runners.append(runner)
        return runner, runner.adapters[(adapters or [QAAdapter])[0].name]

    yield factory
    for runner in runners:
        await runner.shutdown()


# The platform fakes, for every test module that drives a real adapter against them.
@pytest.fixture
async def fake_tg() -> AsyncIterator[FakeTelegram]:
    fake = FakeTelegram()
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    fake = FakeSlack()
    await fake.start()
    yield fake
    await fake.stop()
