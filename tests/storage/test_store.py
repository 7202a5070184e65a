from __future__ import annotations

import pytest

from gateway.storage.store import Store


async def test_inbox_dedupes_and_sessions_round_trip(db_url):
    store = Store(db_url)
    await store.init()
    try:
        first = await store.inbox.add("web", "m1", "k", {"text": "hi"})
        assert first is not None
        assert await store.inbox.add("web", "m1", "k", {"text": "hi again"}) is None
        assert await store.inbox.add("other", "m1", "k", {"text": "same id, other platform"}) is not None
        assert next(r["id"] for r in await store.inbox.unfinished()) == first

        s = await store.sessions.create("s1", "k", "web", "SYSTEM")
        assert (await store.sessions.active("k"))["id"] == "s1"
        call = [{"id": "call_1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]
        await store.messages.append("s1", [
            {"role": "user", "content": "run it"},
            {"role": "assistant", "content": None, "tool_calls": call},
            {"role": "tool", "content": '{"ok": true}', "tool_call_id": "call_1"},
            {"role": "assistant", "content": "done"},
        ], inbox_id=first, inbox_status="replied", reply="done")
        history = await store.messages.history("s1")
        assert history[1]["tool_calls"] == call and history[2]["tool_call_id"] == "call_1"
        assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
        await store.messages.append("s1", [{"role": "user", "content": "again"},
                                           {"role": "assistant", "content": "ok"}])
        # A tail never starts inside a tool exchange: cut at the next user message.
        assert [m["content"] for m in await store.messages.history("s1", limit=5)] == ["again", "ok"]
        assert [m["role"] for m in await store.messages.history("s1", limit=6)] == [
            "user", "assistant", "tool", "assistant", "user", "assistant"]
        assert len(await store.messages.history("s1", limit=100)) == 6
        assert (await store.inbox.get(first))["reply"] == "done"
        await store.sessions.end(s["id"], "new")
        assert await store.sessions.active("k") is None

        assert await store.chat_log.add("web", "c", "u-1", "user", "q")
        assert not await store.chat_log.add("web", "c", "u-1", "user", "q")
        await store.chat_log.edit("web", "u-1", "edited", [{"id": "b", "label": "B"}])
        rows = await store.chat_log.recent("web", "c")
        assert rows[0]["text"] == "edited" and rows[0]["buttons"] == [{"id": "b", "label": "B"}]
    finally:
        await store.close()


async def test_recent_history_served_from_memory_matches_the_database(db_url):
    """The in-memory tail of a session (kept in step by messages.append) equals a fresh read every time."""
    store, fresh = Store(db_url), Store(db_url)
    await store.init()
    sid = f"hist-{id(store)}"
    call = [{"id": "c", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]
    try:
        await store.sessions.create(sid, f"k-{sid}", "web", None)
        for n in range(12):
            turn: list[dict[str, object]] = [{"role": "user", "content": f"q{n}"}]
            if n % 3 == 0:  # a tool exchange now and then, so cuts must skip to a user message
                turn += [{"role": "assistant", "content": None, "tool_calls": call},
                         {"role": "tool", "content": f"r{n}", "tool_call_id": "c"}]
            turn.append({"role": "assistant", "content": f"a{n}"})
            await store.messages.append(sid, turn)
            for limit in (3, 5):
                served = await store.messages.history(sid, limit)
                assert served == await fresh.messages.history(sid, limit)
                assert len(served) <= limit and (not served or served[0]["role"] == "user")
            assert (await store.messages.history(sid, 5))[-1]["content"] == f"a{n}"
    finally:
        await store.close()
        await fresh.close()


async def test_an_older_database_gets_the_new_columns(tmp_path):
    """A state.db created by an earlier version (inbox without owner/lease) is upgraded in place."""
    import sqlite3

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE inbox (id INTEGER PRIMARY KEY, platform VARCHAR(32) NOT NULL, "
                 "platform_message_id VARCHAR(256) NOT NULL, session_key VARCHAR(512) NOT NULL, payload JSON NOT NULL, "
                 "status VARCHAR(16) NOT NULL, reply TEXT, error TEXT, created_at FLOAT NOT NULL, "
                 "updated_at FLOAT NOT NULL)")
    conn.execute("INSERT INTO inbox VALUES (1, 'web', 'x', 'k', '{}', 'done', NULL, NULL, 0, 0)")
    conn.execute("CREATE TABLE outbox (id INTEGER PRIMARY KEY, inbox_id INTEGER, platform VARCHAR(32) NOT NULL, "
                 "chat_id VARCHAR(256) NOT NULL, chunk_index INTEGER NOT NULL, platform_message_id VARCHAR(1024), "
                 "status VARCHAR(16) NOT NULL, error TEXT, created_at FLOAT NOT NULL, updated_at FLOAT)")
    conn.execute("INSERT INTO outbox VALUES (1, 1, 'web', 'c', 0, NULL, 'sending', NULL, 0, 0)")
    conn.commit()
    conn.close()
    store = Store(f"sqlite+aiosqlite:///{path}")
    await store.init()
    row = await store.inbox.get(1)
    chunks = await store.outbox.chunks(1)
    await store.close()
    assert row is not None and row["status"] == "done"
    assert "owner" in row and row["owner"] is None and "lease_until" in row
    assert chunks[0]["status"] == "sending" and chunks[0]["idempotency_key"] is None


async def test_platform_cursors_are_saved_per_platform_and_chat(db_url):
    store = Store(db_url)
    await store.init()
    try:
        assert await store.cursors.load("discord") == {}
        await store.cursors.save("discord", {"10": "100", "20": "200"})
        await store.cursors.save("discord", {"10": "150"})
        await store.cursors.save("slack", {"10": "x"})
        await store.cursors.save("discord", {})
        assert await store.cursors.load("discord") == {"10": "150", "20": "200"}
        assert await store.cursors.load("slack") == {"10": "x"}
    finally:
        await store.close()


async def test_resume_history_is_the_turn_in_full_after_the_earlier_tail(db_url):
    """A resumed turn's history: its own stored messages (by inbox row), however many, after the newest
    ``limit`` earlier ones cut at a user message; another turn's or another session's rows stay out."""
    store = Store(db_url)
    await store.init()
    try:
        await store.sessions.create("s1", "k", "web", None)
        await store.sessions.create("s2", "k2", "web", None)
        call = [{"id": "c", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]
        await store.messages.append("s1", [
            {"role": "user", "content": "q0"}, {"role": "assistant", "content": None, "tool_calls": call},
            {"role": "tool", "content": "r0", "tool_call_id": "c"}, {"role": "assistant", "content": "a0"},
            {"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}])
        row = await store.inbox.add("web", "m", "k", {})
        assert row is not None
        turn = [{"role": "user", "content": "now"}] + [
            {"role": "assistant", "content": f"step {n}"} for n in range(6)]
        await store.messages.append("s1", turn[:3], inbox_id=row)
        await store.messages.append("s2", [{"role": "user", "content": "elsewhere"}], inbox_id=row + 1)
        await store.messages.append("s1", turn[3:], inbox_id=row)
        got = await store.messages.resume_history("s1", row, limit=3)
        assert [m["content"] for m in got] == ["q1", "a1"] + [m["content"] for m in turn]
        whole = await store.messages.resume_history("s1", row)
        assert [m["content"] for m in whole][:6] == ["q0", None, "r0", "a0", "q1", "a1"]
        assert await store.messages.resume_history("s1", row + 99, limit=3) == []
        # The plain tail would hold none of the turn's question: what the resumed turn must not be sent.
        assert all(m["content"] != "now" for m in await store.messages.history("s1", 4))
    finally:
        await store.close()


async def test_two_instances_claiming_one_row_at_once_one_wins(db_url):
    """Two daemons' recoveries see the same row of a gone owner and claim it at the same moment: the claim is
    conditional on the owner they saw, so exactly one wins, and the row is that one's."""
    import asyncio

    a, b = Store(db_url), Store(db_url)
    await a.init()
    await b.init()
    try:
        rows = []
        for n in range(20):
            row_id = await a.inbox.add("qa", f"m{n}", "k", {}, owner="gone:1:1:x", lease_until=1.0)
            rows.append(await a.inbox.get(row_id))
        results = await asyncio.gather(*(store.inbox.claim(row, name, 2.0)
                                         for row in rows for store, name in ((a, "A"), (b, "B"))))
        for n, row in enumerate(rows):
            won_a, won_b = results[2 * n], results[2 * n + 1]
            assert won_a != won_b, (row["id"], won_a, won_b)
            assert (await a.inbox.get(row["id"]))["owner"] == ("A" if won_a else "B")
        # A claim made on what the row was before it moved on (another owner, another status) loses.
        assert not await b.inbox.claim(rows[0], "B", 3.0)
    finally:
        await a.close()
        await b.close()


async def test_a_stale_conditional_change_does_not_overwrite_a_row_that_moved_on(db_url):
    from gateway.storage.inbox import NotExpected

    store = Store(db_url)
    await store.init()
    try:
        await store.sessions.create("s1", "k", "web", None)
        row = await store.inbox.add("web", "m1", "k", {})
        assert row is not None
        assert await store.inbox.mark(row, "replied", reply="the answer", expected="pending")
        # Writers that still think the row is pending (a stop, the queue, a crash path) change nothing.
        assert not await store.inbox.mark(row, "cancelled", error="stale", expected="pending")
        assert not await store.inbox.mark(row, "failed", error="stale", expected=("pending",))
        with pytest.raises(NotExpected):
            await store.messages.append("s1", [{"role": "assistant", "content": "late"}], inbox_id=row,
                                        inbox_status="replied", reply="late", expected="pending")
        found = await store.inbox.get(row)
        assert (found["status"], found["reply"], found["error"]) == ("replied", "the answer", None)
        assert await store.messages.history("s1") == []  # the stale turn's messages were not stored either
        assert await store.inbox.mark(row, "done", expected=("pending", "replied"))
        assert (await store.inbox.get(row))["status"] == "done"
    finally:
        await store.close()
