"""/metrics (prometheus_client, a registry per runner, parsed by prometheus_client's own parser) and the log
lines an operator sees at the default level: no per-message lines, cron runs with their own context."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog
from prometheus_client.parser import text_string_to_metric_families

from gateway.kernel.logs import close_logging, configure_logging
from gateway.kernel.metrics import Metrics
from tests.cron.test_cron import Clock, create, settle, start_cron


async def scrape(runner: Any) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{runner.http_port}/metrics") as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = await r.text()
    # The library's own parser: what Prometheus accepts. It raises on malformed text.
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for family in families.values():
        assert family.documentation, f"{family.name} has no HELP"
        assert family.type in ("counter", "gauge", "histogram"), family
    # A family announced without a single sample is what made the old text invalid.
    assert all(f.samples for f in families.values()), [n for n, f in families.items() if not f.samples]
    return families


def value(families: dict[str, Any], sample: str, **labels: str) -> float:
    for family in families.values():
        for s in family.samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    raise AssertionError(f"no sample {sample} {labels}")


async def test_metrics_are_valid_prometheus_text_with_every_figure(make_runner: Any, fake_llm: Any) -> None:
    runner, qa = await make_runner()
    other, _ = await make_runner()  # a second runner in the same process: its own registry, no clash
    await qa.say("hello")
    await qa.wait_for(lambda t: "echo: hello" in t)
    await asyncio.sleep(0.1)
    families = await scrape(runner)
    for name in ("herald_turn_duration_seconds", "herald_turn_queue_wait_seconds", "herald_loop_lag_seconds",
                 "herald_llm_request_duration_seconds", "herald_llm_errors", "herald_deliveries", "herald_approvals",
                 "herald_cron_runs", "herald_messages", "herald_turns", "herald_turns_running", "herald_queue_depth",
                 "herald_adapter_up", "herald_adapter_state", "herald_loop_lag_p99_seconds", "herald_tasks"):
        assert name in families, name
    assert value(families, "herald_messages_total", outcome="accepted") == 1
    assert value(families, "herald_turns_total", outcome="ok") == 1
    assert value(families, "herald_turn_duration_seconds_count") == 1
    assert value(families, "herald_turn_queue_wait_seconds_count") == 1
    assert value(families, "herald_llm_request_duration_seconds_count", outcome="ok") == 1
    assert value(families, "herald_deliveries_total", platform="qa", outcome="sent") == 1
    assert value(families, "herald_adapter_up", platform="qa") == 1
    assert value(families, "herald_adapter_state", platform="qa", state="connected") == 1
    assert value(families, "herald_loop_lag_seconds_count") > 0
    assert value(families, "herald_queue_depth") == 0
    assert value(families, "herald_tasks") >= 1  # the adapter's, the loop-lag probe's, ... and the scrape's own
    theirs = await scrape(other)
    assert value(theirs, "herald_messages_total", outcome="accepted") == 0


async def test_llm_errors_are_counted_by_kind(make_runner: Any, fake_llm: Any) -> None:
    runner, qa = await make_runner()
    await qa.say("boom [error=500]")
    await qa.wait_for(lambda t: len(t) >= 1)
    families = await scrape(runner)
    assert value(families, "herald_llm_errors_total", kind="server") == 1
    assert value(families, "herald_llm_request_duration_seconds_count", outcome="error") == 1


def test_approvals_and_cron_runs_by_outcome() -> None:
    m = Metrics()
    m.approval("approved")
    m.approval("denied")
    m.cron_run("ok")
    m.delivered("telegram", False)
    families = {f.name: f for f in text_string_to_metric_families(m.render().decode())}
    assert value(families, "herald_approvals_total", outcome="approved") == 1
    assert value(families, "herald_approvals_total", outcome="denied") == 1
    assert value(families, "herald_approvals_total", outcome="expired") == 0
    assert value(families, "herald_cron_runs_total", status="ok") == 1
    assert value(families, "herald_deliveries_total", platform="telegram", outcome="failed") == 1


# ---- logs ---------------------------------------------------------------------------------------------------


@pytest.fixture
def log_file(tmp_path: Path) -> Any:
    configure_logging(tmp_path / "logs", "info", console=False)
    yield tmp_path / "logs" / "herald.log"
    close_logging()


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_the_default_level_has_no_line_per_message(make_runner: Any, fake_llm: Any, log_file: Path) -> None:
    _runner, qa = await make_runner()
    for i in range(3):
        await qa.say(f"message {i}")
        await qa.wait_for(lambda t, i=i: f"echo: message {i}" in t)
    await asyncio.sleep(0.1)
    per_message = [e for e in events(log_file) if e.get("session_key")]
    assert per_message == [], per_message


async def test_a_cron_run_logs_with_its_own_context_not_the_turn_that_woke_it(make_runner: Any,
                                                                             log_file: Path) -> None:
    clock = Clock()
    runner, _qa, sched = await start_cron(make_runner, clock)
    job = await create(sched, schedule="every 1h", prompt="p", name="n")
    await settle(sched)  # the tick creating the job started, so the one below is the one that runs it
    clock.t += 3600
    # As the cronjob tool or /cron do: wake the scheduler from inside a chat turn's log context.
    structlog.contextvars.bind_contextvars(session_key="qa:dm:c9", turn_id="turn-of-someone-else", platform="qa")
    try:
        sched.wake()
    finally:
        structlog.contextvars.unbind_contextvars("session_key", "turn_id", "platform")
    await asyncio.sleep(0.05)
    await settle(sched)
    cron_lines = [e for e in events(log_file) if e["event"].startswith("cron_run")]
    assert {e["event"] for e in cron_lines} >= {"cron_run_started", "cron_run_finished"}
    for e in cron_lines:
        assert e.get("job_id") == job["id"] and e.get("run_id")
        assert "turn_id" not in e and "session_key" not in e, e
    families = await scrape(runner)
    assert value(families, "herald_cron_runs_total", status="ok") == 1


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_logging_format(tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    from gateway.config import parse_config

    cfg = parse_config({"logging": {"format": fmt}})
    configure_logging(tmp_path / "logs", cfg.logging.level, console=cfg.logging.format == "console")
    try:
        structlog.get_logger("herald.test").info("hello_there", n=1)
    finally:
        close_logging()
    line = capsys.readouterr().err.strip().splitlines()[-1]
    if fmt == "json":
        assert json.loads(line)["event"] == "hello_there"
    else:
        assert "hello_there" in line and not line.startswith("{") and "\x1b[" not in line  # no colour off a TTY
    assert json.loads((tmp_path / "logs" / "herald.log").read_text().splitlines()[-1])["event"] == "hello_there"
