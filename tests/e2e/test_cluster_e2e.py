"""Three real ``herald run`` processes on one PostgreSQL database, driven through the web API round-robin (as a
load balancer would): every message answered exactly once, each chat's answers in order, never two turns of
one session at once — also when one instance is killed in the middle."""

from __future__ import annotations

import itertools
import random
import signal
import threading
import time
import urllib.error
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import PG_URL
from tests.e2e.conftest import Herald
from tests.fakes.llm import Reply, message_text

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not PG_URL, reason="HERALD_TEST_DATABASE_URL is not set: PostgreSQL paths are not tested here"),
]


class TurnLog:
    """The model: 50-300 ms per answer; records when it worked on which chat (thread-safe: the fake's thread)."""

    def __init__(self, seed: int = 11) -> None:
        self.spans: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
        self.random = random.Random(seed)
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        text = message_text(request["messages"][-1])
        with self.lock:
            delay = self.random.uniform(0.05, 0.3)
            start = time.monotonic()
            self.spans[text.split()[0]].append((start, start + delay, text))
        return Reply(f"echo: {text}", delay=delay)

    def overlaps(self, ignore: Callable[[float, float], bool] = lambda _s, _e: False) -> list[str]:
        found = []
        with self.lock:
            spans = {chat: sorted(s for s in spans if not ignore(s[0], s[1])) for chat, spans in self.spans.items()}
        for chat, ordered in spans.items():
            for (_, end, a), (start, _, b) in itertools.pairwise(ordered):
                if start < end - 0.01:
                    found.append(f"{chat}: {a!r} and {b!r} at once")
        return found


@pytest.fixture
def pg_database() -> Iterator[str]:
    """A database of its own, dropped afterwards (created with plain asyncpg: the test itself is synchronous)."""
    import asyncio
    import uuid

    import asyncpg

    assert PG_URL
    dsn = PG_URL.replace("postgresql+asyncpg://", "postgresql://")
    name = f"herald_t_{uuid.uuid4().hex[:12]}"

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    try:
        yield f"{PG_URL.rpartition('/')[0]}/{name}"
    finally:
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def cluster(make_herald: Callable[..., Herald], url: str, n: int = 3, **sections: Any) -> list[Herald]:
    config = {"database": {"url": url}, "gateway": {"max_queue": 100, "drain_seconds": 2}, **sections}
    return [make_herald(config) for _ in range(n)]


def send_all(nodes: list[Herald], chats: int, per_chat: int, on_sent: Callable[[int], None] | None = None) -> None:
    """Each chat's messages one after another, each to the next instance; a refused connection (a dead
    instance) is retried on the next one with the same message id, as a load balancer's client would."""
    sent = itertools.count(1)
    lock = threading.Lock()

    def chat(c: int) -> None:
        for n in range(per_chat):
            for attempt in range(len(nodes) * 3):
                node = nodes[(c + n + attempt) % len(nodes)]
                if node.proc is None or node.proc.poll() is not None:
                    continue
                try:
                    node.post(f"c{c} m{n}", chat_id=f"c{c}", message_id=f"m{n}")
                    break
                except (OSError, urllib.error.URLError, AssertionError):
                    time.sleep(0.05)
            else:
                raise AssertionError(f"c{c} m{n} could not be posted anywhere")
            with lock:
                count = next(sent)
            if on_sent is not None:
                on_sent(count)

    threads = [threading.Thread(target=chat, args=(c,)) for c in range(chats)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def wait_answers(node: Herald, chats: int, per_chat: int, timeout: float) -> dict[str, list[str]]:
    deadline = time.monotonic() + timeout
    while True:
        got = {f"c{c}": node.replies(f"c{c}") for c in range(chats)}
        echoes = {chat: [t for t in texts if t.startswith("echo: ")] for chat, texts in got.items()}
        if all(len(e) >= per_chat for e in echoes.values()) or time.monotonic() > deadline:
            return echoes
        time.sleep(0.2)


def metric(node: Herald, name: str, **labels: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    text = node.get("/metrics", auth=False).body
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    raise AssertionError(f"{name}{labels} not in /metrics")


def assert_once_in_order(echoes: dict[str, list[str]], per_chat: int) -> None:
    for chat, texts in echoes.items():
        assert texts == [f"echo: {chat} m{n}" for n in range(per_chat)], chat


def test_three_instances_answer_30_chats_once_each_in_order_one_turn_per_session(make_herald, fake_llm, pg_database):
    log = TurnLog()
    fake_llm.responder = log
    nodes = cluster(make_herald, pg_database)
    send_all(nodes, 30, 20)
    echoes = wait_answers(nodes[0], 30, 20, timeout=120)
    time.sleep(1.0)  # room for a second answer that should not come
    echoes = wait_answers(nodes[1], 30, 20, timeout=1)
    assert_once_in_order(echoes, 20)
    assert log.overlaps() == []
    # The work was shared, and no turn ran twice: each instance's own count of turns adds up to the messages.
    turns = [metric(n, "herald_turns_total", outcome="ok") for n in nodes]
    assert all(t > 0 for t in turns) and sum(turns) == 600, turns
    assert sum(metric(n, "herald_messages_total", outcome="routed") for n in nodes) > 0
    for node in nodes:
        assert node.stop() == 0


def test_an_instance_killed_mid_load_loses_and_doubles_nothing(make_herald, fake_llm, pg_database):
    log = TurnLog(seed=5)
    fake_llm.responder = log
    nodes = cluster(make_herald, pg_database)
    victim = nodes[1]
    killed_at: list[float] = []

    def kill_at_a_third(count: int) -> None:
        if count == 100 and not killed_at:
            assert victim.proc is not None
            killed_at.append(time.monotonic())
            victim.proc.send_signal(signal.SIGKILL)

    send_all(nodes, 20, 15, on_sent=kill_at_a_third)
    victim.proc.wait(10)  # type: ignore[union-attr]
    # Within the lease (30 s) plus a turn the killed instance's sessions are answered elsewhere; on one machine
    # its death is noticed at once (its pid is gone).
    echoes = wait_answers(nodes[0], 20, 15, timeout=45)
    time.sleep(1.0)
    echoes = wait_answers(nodes[2], 20, 15, timeout=1)
    assert_once_in_order(echoes, 15)
    # A model call the killed process was waiting for when it died is not a turn that still runs.
    kill = killed_at[0]
    assert log.overlaps(ignore=lambda start, end: start <= kill <= end) == []
    victim.close_files()
    for node in (nodes[0], nodes[2]):
        assert node.stop() == 0


def test_a_web_client_sees_its_chat_live_whichever_instance_answers(make_herald, fake_llm, pg_database):
    """Behind one address the client's event stream is held by one instance while its messages (and their
    answers) go through others: the stream still shows all of them, and one token opens every instance."""
    token = "cluster-web-token-" + "x" * 20
    config = {"database": {"url": pg_database}, "platforms": {"web": {"token_env": "WEB_TOKEN"}}}
    nodes = []
    for _ in range(2):
        node = make_herald(config, start=False)
        node.env["WEB_TOKEN"] = token
        node.home.mkdir(parents=True, exist_ok=True)
        (node.home / "web_token").write_text(token)  # what the test client reads; the daemons use WEB_TOKEN
        node.start()
        nodes.append(node)
    stream = nodes[0].events("live")
    try:
        nodes[1].post("hello over there", chat_id="live", message_id="1")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(stream.messages("assistant")) < 1:
            time.sleep(0.05)
        assert [m["text"] for m in stream.messages("user")] == ["hello over there"]
        assert [m["text"] for m in stream.messages("assistant")] == ["echo: hello over there"]
    finally:
        stream.close()
    for node in nodes:
        assert node.stop() == 0


@pytest.mark.timeout(300)
def test_a_cron_job_every_10_s_runs_once_per_due_time_across_three_instances(make_herald, fake_llm, pg_database):
    """Two minutes of a job due every 10 s, three instances racing for each due time: exactly one run per due
    time, each run's result delivered once."""
    import json
    import subprocess

    from tests.e2e.conftest import HERALD_BIN

    nodes = cluster(make_herald, pg_database, cron={"min_interval_seconds": 10})
    added = subprocess.run([str(HERALD_BIN), "cron", "add", "--schedule", "every 10s", "--prompt", "tick",
                            "--deliver", "web:cronchat", "--name", "ticker"], env=nodes[0].env, capture_output=True,
                           text=True, timeout=30)
    assert added.returncode == 0, added.stderr
    job_id = next(j["id"] for j in json.loads(subprocess.run(
        [str(HERALD_BIN), "cron", "list", "--json"], env=nodes[0].env, capture_output=True, text=True,
        timeout=30).stdout))
    time.sleep(125)

    def cli(node: Any, *args: str) -> str:
        done = subprocess.run([str(HERALD_BIN), "cron", *args], env=node.env, capture_output=True, text=True,
                              timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    # Counted on a still picture: the job keeps firing every 10 s, and a run delivered between reading the
    # history and reading the chat would look like a duplicate.
    cli(nodes[0], "pause", job_id)
    deadline = time.monotonic() + 20
    while True:
        history = json.loads(cli(nodes[1], "history", job_id, "--json", "--limit", "100"))
        if all(r["status"] == "ok" and r["delivery_status"] == "delivered" for r in history):
            break
        assert time.monotonic() < deadline, history
        time.sleep(0.5)
    scheduled = [r for r in history if r["trigger"] == "scheduled"]
    assert 11 <= len(scheduled) <= 14, history
    assert len({r["due_at"] for r in scheduled}) == len(scheduled)  # one run per due time
    results = [t for t in nodes[2].replies("cronchat") if "Cron job" in t]
    assert len(results) == len(history)  # each run's result delivered once, none twice
    for node in nodes:
        assert node.stop() == 0
