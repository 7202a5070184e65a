"""Several instances on one PostgreSQL database, in one process: each session's turns run in one instance
at a time, in arrival order, whichever instance took the message; commands reach the owner; a session
whose owner stops is taken over with what it left, in order."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections import defaultdict
from typing import Any

import pytest

from tests.fakes.llm import Reply, message_text
from tests.support.polling import wait_until


@pytest.fixture
async def cluster_db(pg_url: str) -> str:
    return pg_url


class TurnLog:
    """A model that takes 50-300 ms and records when it worked on which chat's message."""

    def __init__(self, seed: int = 7) -> None:
        self.spans: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
        self.random = random.Random(seed)

    def __call__(self, request: dict[str, Any]) -> Reply:
        text = message_text(request["messages"][-1])
        chat = text.split()[0]
        delay = self.random.uniform(0.05, 0.3)
        start = time.monotonic()
        self.spans[chat].append((start, start + delay, text))
        return Reply(f"echo: {text}", delay=delay)

    def overlaps(self) -> list[str]:
        found = []
        for chat, spans in self.spans.items():
            ordered = sorted(spans)
            for (_, end, a), (start, _, b) in itertools.pairwise(ordered):
                if start < end - 0.005:
                    found.append(f"{chat}: {a!r} and {b!r} ran at once")
        return found


class Cluster:
    """The instances' QA adapters, with every answer in the order it was sent, whichever instance sent it."""

    def __init__(self, nodes: list[tuple[Any, Any]]) -> None:
        self.runners = [runner for runner, _ in nodes]
        self.adapters = [qa for _, qa in nodes]
        self.sent: list[tuple[int, str, str]] = []  # (instance, chat, text)
        for index, qa in enumerate(self.adapters):
            qa.send_hook = self._recorder(index)

    def _recorder(self, index: int) -> Any:
        def hook(chat_id: str, text: str) -> None:
            self.sent.append((index, chat_id, text))
        return hook

    def replies(self, chat: str) -> list[str]:
        return [text for _, c, text in self.sent if c == chat and text.startswith("echo: ")]

    def senders(self, chat: str) -> set[int]:
        return {i for i, c, _ in self.sent if c == chat}


async def wait_all(cluster: Cluster, expected: dict[str, int], timeout: float = 60) -> None:
    def missing() -> dict[str, tuple[int, int]]:
        return {chat: (len(cluster.replies(chat)), n) for chat, n in expected.items()
                if len(cluster.replies(chat)) < n}

    await wait_until(lambda: not missing(), timeout,
                     what=lambda: f"every message answered (missing, got and expected: {missing()})")


@pytest.mark.slow
async def test_three_instances_answer_every_message_once_in_order_one_turn_at_a_time(
        cluster_db, make_runner, fake_llm):
    log = TurnLog()
    fake_llm.responder = log
    cluster = Cluster([await make_runner(db_url=cluster_db) for _ in range(3)])
    chats, per_chat = 8, 6
    for n in range(per_chat):
        # Round-robin over the instances, like a load balancer; a chat's messages one after another.
        for c in range(chats):
            qa = cluster.adapters[(n + c) % 3]
            assert await qa.say(f"c{c} m{n}", chat_id=f"c{c}", message_id=f"c{c}-{n}")
    await wait_all(cluster, {f"c{c}": per_chat for c in range(chats)})
    await asyncio.sleep(0.5)  # room for a wrong second answer
    for c in range(chats):
        assert cluster.replies(f"c{c}") == [f"echo: c{c} m{n}" for n in range(per_chat)]
    assert log.overlaps() == []
    # Each session's turns ran in one instance: its answers all came from one adapter.
    for c in range(chats):
        assert len(cluster.senders(f"c{c}")) == 1


@pytest.mark.slow
async def test_a_message_taken_elsewhere_waits_for_the_running_turn_of_its_session(
        cluster_db, make_runner, fake_llm):
    (_a, qa_a), (_b, qa_b) = [await make_runner(db_url=cluster_db) for _ in range(2)]
    await qa_a.say("[sleep=1.5] first", chat_id="s", message_id="1")
    await wait_until(lambda: fake_llm.requests, what="the first turn asked the model")  # it thinks 1.5 s
    await qa_b.say("second", chat_id="s", message_id="2")  # lands on the other instance while the first turn runs
    await qa_a.wait_for(lambda t: len([x for x in t if x.startswith("echo:")]) == 2, chat_id="s", timeout=15)
    assert [t for t in qa_a.texts("s") if t.startswith("echo:")] == ["echo: [sleep=1.5] first", "echo: second"]
    assert qa_b.texts("s") == []
    # The routed message was queued behind the running turn, as it would be on one instance.
    assert any(t.startswith("⏳ Queued") for t in qa_a.texts("s"))


async def test_stop_sent_to_another_instance_stops_the_owners_turn(cluster_db, make_runner, fake_llm):
    (a, qa_a), (b, qa_b) = [await make_runner(db_url=cluster_db) for _ in range(2)]
    await qa_a.say("[sleep=20] long one", chat_id="s", message_id="1")
    await wait_until(lambda: a.lanes.running() == 1)
    await qa_b.say("/stop", chat_id="s", message_id="2")
    await wait_until(lambda: a.lanes.running() == 0, timeout=10)
    await qa_a.wait_for(lambda t: any("Stopped" in x or "stopped" in x for x in t), chat_id="s", timeout=10)
    assert b.lanes.running() == 0


@pytest.mark.slow
async def test_a_stopped_owner_hands_its_sessions_over_with_their_queue_in_order(cluster_db, make_runner, fake_llm):
    (a, qa_a), (_b, qa_b) = [await make_runner(db_url=cluster_db, overrides={"gateway": {"drain_seconds": 0.2}})
                            for _ in range(2)]
    await qa_a.say("[sleep=3] one", chat_id="s", message_id="1")
    await qa_b.say("two", chat_id="s", message_id="2")
    await qa_b.say("three", chat_id="s", message_id="3")
    await wait_until(lambda: a.lanes.waiting() == 2)
    await a.shutdown()  # drain cut short: "one" stays unfinished, "two" and "three" were never started
    await qa_b.say("four", chat_id="s", message_id="4")
    await qa_b.wait_for(lambda t: len([x for x in t if x.startswith("echo:")]) == 4, chat_id="s", timeout=30)
    assert [t for t in qa_b.texts("s") if t.startswith("echo:")] == [
        "echo: [sleep=3] one", "echo: two", "echo: three", "echo: four"]


@pytest.mark.slow
async def test_a_newly_paired_user_is_told_once_by_one_of_the_instances(cluster_db, make_runner, fake_llm):
    from sqlalchemy import insert

    from gateway.inbound.pairing import APPROVED_TEXT
    from gateway.storage.tables import paired_users

    cluster = Cluster([await make_runner(db_url=cluster_db) for _ in range(3)])
    for qa in cluster.adapters:  # a slow platform: every instance's refresh comes round while one is sending
        qa.send = slowly(qa.send, 2.5)
    await cluster.runners[0].store.run_write(lambda conn: conn.execute(insert(paired_users).values(
        platform="qa", user_id="stranger", chat_id="dm-stranger", approved_by="cli", approved_at=time.time(),
        notified_at=None)))
    await wait_until(lambda: any(text == APPROVED_TEXT for _, _, text in cluster.sent), timeout=10)
    await asyncio.sleep(2 * cluster.runners[0].pairing.refresh_seconds + 3)  # every instance looked again
    assert [text for _, chat, text in cluster.sent if chat == "dm-stranger"] == [APPROVED_TEXT]


def slowly(send: Any, seconds: float) -> Any:
    async def slow_send(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(seconds)
        return await send(*args, **kwargs)
    return slow_send


async def test_an_approval_answered_through_another_instance_is_decided_where_it_waits(
        cluster_db, make_runner, fake_llm, tmp_path):
    """The press reaches an instance where the request does not wait: it is forwarded to the one whose turn
    asked, decided there as if pressed there, and the presser gets that instance's notice."""
    from tests.approvals.test_approvals import ask, prompt_id, wait_prompts

    victim = tmp_path / "victim"
    victim.mkdir()
    overrides = {"tools": {"terminal": {"cwd": str(tmp_path)}}}
    (a, qa_a), (b, qa_b) = [await make_runner(overrides, db_url=cluster_db) for _ in range(2)]
    await qa_a.say(ask(f"rm -rf {victim}"), chat_id="s", message_id="1")
    [prompt] = await wait_prompts(qa_a, 1)
    assert victim.exists() and len(a.approvals.pending) == 1 and b.approvals.pending == {}
    notice = await qa_b.click(prompt.message.buttons[0].id, chat_id="s")  # "Approve once", via instance b
    assert notice == "Approved once."
    await wait_until(lambda: not victim.exists(), timeout=10)
    assert a.approvals.pending == {}
    assert any(chat == "s" and text and "Approved once" in text for chat, _mid, text in qa_a.edits)
    # A second answer to it, anywhere, finds it decided.
    again = await qa_b.click(f"ap:{prompt_id(prompt)}:d", chat_id="s")
    assert again is not None and "already answered" in again


async def test_an_approval_whose_instance_died_is_denied_when_answered(cluster_db, make_runner, fake_llm):
    from sqlalchemy import insert

    from gateway.storage.tables import approvals

    (b, qa_b), = [await make_runner(db_url=cluster_db)]
    await b.store.run_write(lambda conn: conn.execute(insert(approvals).values(
        id="deadbeefdeadbeef", session_key="qa:dm:s", platform="qa", chat_id="s", thread_id=None,
        requested_by="u1", command="rm -rf x", reason="deletes", level="dangerous", status="pending",
        owner="another-host:1:1:gone", created_at=time.time())))
    notice = await qa_b.click("ap:deadbeefdeadbeef:o", chat_id="s")
    assert notice is not None and "no longer active" in notice
    from gateway.approvals.store import ApprovalStore
    assert (await ApprovalStore(b.store).status("deadbeefdeadbeef"))[0] == "denied"


async def test_a_reset_from_another_instances_dashboard_stops_the_owners_turn(cluster_db, make_runner, fake_llm):
    import aiohttp

    web = {"platforms": {"web": {"enabled": True}}}
    (a, qa_a), (b, _qa_b) = [await make_runner(web, db_url=cluster_db) for _ in range(2)]
    await qa_a.say("[sleep=20] long one", chat_id="s", message_id="1")
    await wait_until(lambda: a.lanes.running() == 1 and a.sessions.peek("qa:dm:s") is not None)
    old = a.sessions.peek("qa:dm:s")
    token = b.adapters["web"].token
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http, http.post(
            f"http://127.0.0.1:{b.http_port}/api/v1/dashboard/sessions/reset", json={"key": "qa:dm:s"}) as resp:
        assert resp.status == 200
    await wait_until(lambda: a.lanes.running() == 0, timeout=10)
    assert a.sessions.peek("qa:dm:s") is None  # its cached row (now ended) is not used for the next turn
    await qa_a.say("after the reset", chat_id="s", message_id="2")
    await qa_a.wait_for(lambda t: "echo: after the reset" in t, chat_id="s", timeout=10)
    assert a.sessions.peek("qa:dm:s")["id"] != old["id"]


@pytest.mark.slow
async def test_work_of_an_instance_that_died_on_another_host_is_taken_over_once_its_lease_runs_out(
        cluster_db, make_runner, fake_llm):
    """Another machine's instance cannot be seen to die (its pid is not ours to look at): its session stays
    its own while its lease and heartbeat are fresh, and is taken over — queue in order — once they run out."""
    from sqlalchemy import insert

    from gateway.platforms.base import InboundMessage, Source
    from gateway.storage.tables import instances, session_leases

    (b, qa_b), = [await make_runner(db_url=cluster_db)]
    ghost, key, now = "another-host:4242:99:dead", "qa:dm:far", time.time()
    await b.store.run_write(lambda conn: (
        conn.execute(insert(instances).values(id=ghost, host="another-host", pid=4242, profile="default",
                                              started_at=now - 60, heartbeat_at=now)),
        conn.execute(insert(session_leases).values(key=key, owner=ghost, lease_until=now + 2, updated_at=now))))
    for n in range(2):  # accepted there, never answered
        msg = InboundMessage(source=Source("qa", "far", "u1"), text=f"left {n}", platform_message_id=f"far-{n}")
        assert await b.store.inbox.add("qa", f"far-{n}", key, msg.to_dict(), owner=ghost, lease_until=now + 2)

    assert await b.recovery.recover(qa_b) == 0  # alive as far as anyone can tell: not taken
    assert await qa_b.say("new one", chat_id="far", message_id="far-2")  # stored for the live owner
    await asyncio.sleep(0.5)
    assert [t for t in qa_b.texts("far") if t.startswith("echo:")] == []

    await asyncio.sleep(max(0.0, now + 2.2 - time.time()))
    # Its lease ran out; the heartbeat stays fresh (a hung machine can keep beating): the lease decides.
    assert await b.recovery.recover(qa_b) == 3
    await qa_b.wait_for(lambda t: len([x for x in t if x.startswith("echo:")]) == 3, chat_id="far", timeout=15)
    await asyncio.sleep(0.5)
    assert [t for t in qa_b.texts("far") if t.startswith("echo:")] == ["echo: left 0", "echo: left 1",
                                                                      "echo: new one"]
    assert await b.recovery.recover(qa_b) == 0  # nothing left to take, nothing answered twice


async def test_new_sent_to_another_instance_starts_a_fresh_session_in_the_owner(cluster_db, make_runner, fake_llm):
    (a, qa_a), (_b, qa_b) = [await make_runner(db_url=cluster_db) for _ in range(2)]
    await qa_a.say("first", chat_id="s", message_id="1")
    await qa_a.wait_for(lambda t: "echo: first" in t, chat_id="s", timeout=10)
    old = await a.store.sessions.active("qa:dm:s")
    await qa_b.say("/new", chat_id="s", message_id="2")  # through the instance that does not own the session
    # Sent at once, straight to the owner: answered after /new, in the fresh session.
    await qa_a.say("second", chat_id="s", message_id="3")
    await qa_a.wait_for(lambda t: "echo: second" in t, chat_id="s", timeout=10)
    new = await a.store.sessions.active("qa:dm:s")
    assert old is not None and new is not None and new["id"] != old["id"]
    history = await a.store.messages.history(new["id"], limit=50)
    assert [m["content"] for m in history if m["role"] == "user"] == ["second"]  # nothing of before /new


async def test_a_turn_whose_message_was_taken_over_stores_nothing_more_and_runs_no_tool(db_url, make_runner,
                                                                                       fake_llm):
    """An instance that stalled past its lease while the model thought: another instance took the message over
    (and runs the turn from what is stored). When the stalled turn comes back with a tool call, that call is not
    stored and not run, the row is not marked answered, and nothing is sent."""
    from gateway.storage.tables import inbox, messages
    from tests.fakes.llm import ToolCall

    runner, qa = await make_runner(db_url=db_url)
    fake_llm.script(ToolCall("memory", {"action": "add", "content": "taken over"}, delay=1.0), Reply("done"))
    assert await qa.say("remember this", chat_id="s", message_id="1")
    [row] = await runner.store.run_read(lambda c: c.execute(inbox.select()).mappings().all())  # stored on accept
    await wait_until(lambda: fake_llm.requests, what="the model asked")  # and it thinks for a while
    await runner.store.run_write(lambda c: c.execute(inbox.update().values(owner="elsewhere:1:1:x")))
    # The model answers with its tool call; the turn finds the message taken and ends.
    await wait_until(lambda: runner.lanes.running() == 0, what="the stalled turn ended")
    assert len(fake_llm.requests) == 1  # the call was not run: no tool result went back to the model
    stored = await runner.store.run_read(lambda c: c.execute(
        messages.select().where(messages.c.inbox_id == row["id"])).mappings().all())
    assert stored == []
    [after] = await runner.store.run_read(lambda c: c.execute(inbox.select()).mappings().all())
    assert (after["status"], after["owner"]) == ("pending", "elsewhere:1:1:x")
    assert qa.texts("s") == []
