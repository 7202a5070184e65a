"""The fault ledger: each fault counted and logged once; a lasting one makes /readyz not ready, with its reason."""

from __future__ import annotations

import pytest
import structlog

from gateway.kernel.faults import Faults
from gateway.kernel.metrics import Metrics


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _count(metrics: Metrics, fault: str) -> float:
    return metrics.registry.get_sample_value("herald_faults_total", {"fault": fault}) or 0.0


def test_a_fault_is_counted_and_logged_once_by_class() -> None:
    metrics = Metrics()
    faults = Faults(metrics)
    with structlog.testing.capture_logs() as logs:
        faults.record("model_rate_limited", attempt=1)
        faults.record("model_rate_limited", attempt=2)
    assert _count(metrics, "model_rate_limited") == 2
    events = [e for e in logs if e["event"] == "fault"]
    assert [e["fault"] for e in events] == ["model_rate_limited"] * 2
    assert faults.recent() == {"model_rate_limited": 2}


def test_unknown_classes_are_refused() -> None:
    with pytest.raises(ValueError):
        Faults().record("something_else")


def test_a_condition_is_recorded_once_and_clears() -> None:
    metrics = Metrics()
    clock = Clock()
    faults = Faults(metrics, clock=clock)
    assert faults.begin("database", "database_unavailable", "database unavailable")
    clock.now += 5
    assert not faults.begin("database", "database_unavailable", "database unavailable")
    assert _count(metrics, "database_unavailable") == 1
    assert faults.conditions() == {"database": {"fault": "database_unavailable",
                                                "reason": "database unavailable", "seconds": 5.0}}
    assert faults.end("database") and not faults.end("database")
    assert faults.conditions() == {}


def test_recent_counts_forget_old_faults() -> None:
    clock = Clock()
    faults = Faults(clock=clock)
    faults.record("platform_unavailable")
    clock.now += 400
    faults.record("bad_request")
    assert faults.recent() == {"bad_request": 1}


async def test_readyz_degrades_with_the_reason_and_recovers(make_runner: object) -> None:
    import aiohttp

    runner, _qa = await make_runner({})  # type: ignore[operator]
    url = f"http://127.0.0.1:{runner.http_port}/readyz"
    async with aiohttp.ClientSession() as http:
        async with http.get(url) as resp:
            assert resp.status == 200
        runner.faults.begin("database", "database_unavailable", "database unavailable")
        runner.faults.record("bad_request", door="web")
        async with http.get(url) as resp:
            body = await resp.json()
            assert resp.status == 503 and body["ready"] is False
            assert body["conditions"]["database"]["reason"] == "database unavailable"
            assert body["recent_faults"] == {"database_unavailable": 1, "bad_request": 1}
        runner.faults.end("database")
        async with http.get(url) as resp:
            assert resp.status == 200


@pytest.mark.slow
async def test_reads_over_http_answer_503_at_once_while_taken_work_waits_for_the_database(make_runner: object) -> None:
    """While the database is down, a GET (a chat's history, the dashboard) is answered 503 with a reason at once
    instead of hanging; an open dashboard stream outlives the outage; work the daemon already took keeps waiting
    and finishes once the database is back."""
    import asyncio

    import aiohttp

    runner, _qa = await make_runner({"platforms": {"web": {"enabled": True}}})  # type: ignore[operator]
    db = runner.store
    real = db._read_once
    down = True

    async def read_once(op):  # the server refuses connections while ``down``
        if down:
            raise OSError(111, "Connection refused")
        return await real(op)

    headers = {"Authorization": f"Bearer {runner.adapters['web'].token}"}
    base = f"http://127.0.0.1:{runner.http_port}"
    async with aiohttp.ClientSession(headers=headers) as http:
        stream = await http.get(base + "/api/v1/dashboard/events")  # a dashboard left open through the outage
        assert (await asyncio.wait_for(stream.content.readline(), 10)).startswith(b"event: view")
        while (await asyncio.wait_for(stream.content.readline(), 10)).strip():
            pass  # the rest of the first frame, to its blank line
        db._read_once = read_once
        waiting = asyncio.create_task(runner.store.sessions.active("web:dm:other"))  # taken work: waits
        # The open dashboard renders again every second meanwhile: it keeps what it shows and stays open (no
        # frame, no end of the stream).
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(stream.content.readline(), 2.5)
        for path in ("/api/v1/chats/c/messages", "/api/v1/dashboard/view"):
            async with asyncio.timeout(5), http.get(base + path) as resp:
                body = await resp.json()
                assert resp.status == 503 and resp.headers["Retry-After"] == "5", (path, body)
                assert "database unavailable" in body["error"] and "try again" in body["error"]
        assert not waiting.done()
        # Something for the dashboard to show once it can read again (the message is stored: writes still work).
        async with http.post(base + "/api/v1/messages", json={"chat_id": "c", "user_id": "owner",
                                                                "text": "hello"}) as resp:
            assert resp.status == 202
        down = False
        async with http.get(base + "/api/v1/chats/c/messages") as resp:
            assert resp.status == 200
        async with asyncio.timeout(10):  # the open dashboard shows it: its stream outlived the outage
            while not (await stream.content.readline()).startswith(b"event: view"):
                pass
        stream.close()
    assert await asyncio.wait_for(waiting, 10) is None  # no such session: the read came back with its answer


def test_faults_per_class_over_the_last_hour_and_day_are_counted_whole() -> None:
    clock = Clock()
    faults = Faults(clock=clock)
    for _ in range(5000):  # more than the recent events kept: the per-minute counts miss none
        faults.record("bad_request")
    clock.now += 2 * 3600
    faults.record("model_timeout")
    clock.now += 59
    faults.record("model_timeout")
    assert faults.per_class(3600) == {"model_timeout": 2}
    assert faults.per_class(86_400) == {"bad_request": 5000, "model_timeout": 2}
    clock.now += 86_400
    assert faults.per_class(86_400) == {}
