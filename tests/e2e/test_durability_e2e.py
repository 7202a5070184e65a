"""Durability across processes: a second daemon on the same PostgreSQL leaves the first one's turn alone,
and a daemon killed after a tool ran resumes the turn without running the tool again."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import Herald
from tests.fakes.llm import FakeLLMThread, Hang, Reply, ToolCall
from tests.support.polling import wait_until_sync

PG_URL = os.environ.get("HERALD_TEST_DATABASE_URL")


def model_calls_about(fake: FakeLLMThread, needle: str) -> int:
    return sum(needle in str(r["messages"][-1].get("content")) for r in fake.requests)


@pytest.mark.skipif(not PG_URL, reason="HERALD_TEST_DATABASE_URL is not set: PostgreSQL paths are not tested here")
async def test_a_second_daemon_on_the_same_postgresql_leaves_a_turn_in_flight_alone(
        make_herald: Callable[..., Herald], fake_llm: FakeLLMThread) -> None:
    from tests.conftest import fresh_pg_database

    async with fresh_pg_database() as url:
        first = make_herald({"database": {"url": url}})
        first.post("[sleep=4] the slow one", chat_id="inflight")
        wait_until_sync(lambda: model_calls_about(fake_llm, "the slow one"), what="the first daemon's turn started")
        second = make_herald({"database": {"url": url}})  # starts (and recovers) while the turn runs
        replies = first.wait_for_replies("inflight", 1, timeout=20)
        await asyncio.sleep(1.5)  # room for a wrong second answer to arrive
        assert replies == ["echo: [sleep=4] the slow one"]
        assert second.replies("inflight") == replies  # one shared chat log: still one answer
        assert model_calls_about(fake_llm, "the slow one") == 1
        assert first.stop() == 0 and second.stop() == 0


def test_a_daemon_killed_after_a_tool_ran_resumes_without_running_it_again(
        make_herald: Callable[..., Herald], fake_llm: FakeLLMThread, tmp_path: Path) -> None:
    herald = make_herald({"approvals": {"mode": "off"}})
    counter = herald.home / "workspace" / "runs.txt"
    fake_llm.script(
        ToolCall("terminal", {"command": "echo ran >> runs.txt"}),
        Hang(60),  # the model call after the tool: the daemon is killed during it
        Reply("the command ran once"),
    )
    herald.post("append a line", chat_id="kill")
    wait_until_sync(lambda: len(fake_llm.requests) >= 2, timeout=20, what="the tool ran and the model was asked again")
    assert counter.read_text() == "ran\n"
    assert herald.proc is not None
    herald.proc.send_signal(signal.SIGKILL)
    herald.proc.wait(10)
    herald.start()
    assert herald.wait_for_replies("kill", 1, timeout=20) == ["the command ran once"]
    assert counter.read_text() == "ran\n"  # the tool did not run a second time
    resumed = fake_llm.requests[-1]["messages"]
    assert [m["role"] for m in resumed][-3:] == ["user", "assistant", "tool"]
    assert sum(m["role"] == "user" for m in resumed) == 1
