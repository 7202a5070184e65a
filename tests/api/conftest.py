"""The OpenAI-compatible API driven by the real ``openai`` SDK against the real runner (in-process), answered by
the fake model: what any client of the API would see."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from openai import AsyncOpenAI
from sqlalchemy import select

from gateway.runner import GatewayRunner
from gateway.storage.api_keys import ApiKeyStore
from gateway.storage.tables import inbox, messages, sessions


@dataclass
class Api:
    runner: GatewayRunner
    qa: Any
    key: str
    client: AsyncOpenAI
    opened: list[AsyncOpenAI]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.runner.http_port}/v1"

    def client_with(self, key: str, **kw: Any) -> AsyncOpenAI:
        client = AsyncOpenAI(base_url=self.base_url, api_key=key, max_retries=0, **kw)
        self.opened.append(client)
        return client

    async def rows(self, table: Any, *where: Any) -> list[dict[str, Any]]:
        stmt = select(table).where(*where) if where else select(table)
        return await self.runner.store.run_read(lambda c: [dict(r._mapping) for r in c.execute(stmt)])

    async def inbox(self) -> list[dict[str, Any]]:
        return await self.rows(inbox, inbox.c.platform == "api")

    async def sessions(self) -> list[dict[str, Any]]:
        return sorted(await self.rows(sessions, sessions.c.platform == "api"), key=lambda r: r["created_at"])

    async def said(self, session_id: str) -> list[tuple[str, str]]:
        """(role, text) of a session's user and assistant messages with text, in order."""
        rows = sorted(await self.rows(messages, messages.c.session_id == session_id), key=lambda r: r["id"])
        return [(r["role"], r["content"] if isinstance(r["content"], str) else json.dumps(r["content"]))
                for r in rows if r["role"] in ("user", "assistant") and r["content"] and r["hidden_at"] is None]


Start = Callable[..., Awaitable[Api]]


@pytest.fixture
async def start_api(make_runner: Any, tmp_path: Any) -> AsyncIterator[Start]:
    clients: list[AsyncOpenAI] = []  # closed at the end, whichever test made them

    async def start(db_url: str | None = None, **sections: Any) -> Api:
        (tmp_path / "work").mkdir(exist_ok=True)
        config: dict[str, Any] = {"api": {"enabled": True, "requests_per_minute": 10_000},
                                  "display": {"streaming": True}, "gateway": {"drain_seconds": 0.5},
                                  "tools": {"terminal": {"cwd": str(tmp_path / "work")}}}
        for section, values in sections.items():
            config.setdefault(section, {}).update(values)
        runner, qa = await make_runner(config, db_url=db_url)
        key = await ApiKeyStore(runner.store).create("tester")
        api = Api(runner, qa, key, None, clients)  # type: ignore[arg-type]
        api.client = api.client_with(key)
        return api

    yield start
    for client in clients:
        await client.close()
