"""sessions.retention_days: only idle sessions' messages, inbox and outbox rows go, in small batches."""

from __future__ import annotations

import time

from sqlalchemy import func, select, update

from gateway.storage.retention import DAY, Retention
from gateway.storage.store import Store
from gateway.storage.tables import inbox, messages, outbox, sessions


async def _conversation(store: Store, key: str, n: int, age_days: float) -> tuple[str, list[int]]:
    """A session with ``n`` exchanges, each with an inbox row (done) and an outbox row, ``age_days`` old."""
    session_id = f"s-{key}"
    await store.sessions.create(session_id, key, "qa", "prompt")
    inbox_ids = []
    for i in range(n):
        row = await store.inbox.add("qa", f"{key}-{i}", key, {"text": f"m{i}"})
        assert row is not None
        inbox_ids.append(row)
        await store.messages.append(session_id, [{"role": "user", "content": f"m{i}"},
                                                 {"role": "assistant", "content": f"r{i}"}],
                                    inbox_id=row, inbox_status="done")
        await store.outbox.record(row, "qa", key, 0, f"p{i}", "sent")
    then = time.time() - age_days * DAY
    await store.run_write(lambda conn: (
        conn.execute(update(sessions).where(sessions.c.id == session_id).values(updated_at=then)),
        conn.execute(update(inbox).where(inbox.c.session_key == key).values(updated_at=then)),
    ))
    return session_id, inbox_ids


async def _counts(store: Store, session_id: str, key: str) -> tuple[int, int, int]:
    def op(conn):  # type: ignore[no-untyped-def]
        m = conn.execute(select(func.count()).select_from(messages).where(messages.c.session_id == session_id))
        ids = select(inbox.c.id).where(inbox.c.session_key == key)
        i = conn.execute(select(func.count()).select_from(inbox).where(inbox.c.session_key == key))
        o = conn.execute(select(func.count()).select_from(outbox).where(outbox.c.inbox_id.in_(ids)))
        return m.scalar_one(), i.scalar_one(), o.scalar_one()

    return await store.run_read(op)


async def test_retention_removes_only_idle_sessions_rows(db_url: str) -> None:
    store = Store(db_url)
    await store.init()
    try:
        idle_id, _ = await _conversation(store, "idle", 7, age_days=40)
        active_id, _ = await _conversation(store, "active", 7, age_days=40)
        # The active session spoke an hour ago: its old inbox rows belong to a session that is not idle.
        await store.run_write(lambda conn: conn.execute(
            update(sessions).where(sessions.c.id == active_id).values(updated_at=time.time() - 3600)))
        recent_id, _ = await _conversation(store, "recent", 2, age_days=1)
        # A message still being worked on is never pruned, however old.
        pending = await store.inbox.add("qa", "idle-pending", "idle", {"text": "later"})
        assert pending is not None
        await store.run_write(lambda conn: conn.execute(
            update(inbox).where(inbox.c.id == pending).values(updated_at=time.time() - 40 * DAY)))
        await store.messages.history(idle_id, limit=50)  # cached: must not come back after pruning

        total = await Retention(store, days=30, batch=3, pause=0).prune()

        assert total["messages"] == 14 and total["inbox"] == 7 and total["outbox"] == 7
        assert total["batches"] >= 5  # 14 messages three at a time: small transactions, not one big one
        assert await _counts(store, idle_id, "idle") == (0, 1, 0)  # only the pending row is left
        assert await _counts(store, active_id, "active") == (14, 7, 7)
        assert await _counts(store, recent_id, "recent") == (4, 2, 2)
        assert await store.messages.history(idle_id, limit=50) == []
        assert await store.sessions.get(idle_id) is not None  # the session row itself stays
        again = await Retention(store, days=30, batch=3, pause=0).prune()
        assert again["messages"] == again["inbox"] == 0
    finally:
        await store.close()


async def test_retention_removes_idle_chats_log_and_old_usage_but_keeps_memories(db_url: str) -> None:
    from sqlalchemy import insert

    from gateway.storage.tables import chat_log, memories, usage

    store = Store(db_url)
    await store.init()
    old, now = time.time() - 40 * DAY, time.time()
    try:
        for i in range(5):  # an idle chat's log, and an active chat whose old lines stay with it
            await store.chat_log.add("web", "idle", f"i{i}", "user", f"old {i}")
            await store.chat_log.add("web", "busy", f"b{i}", "user", f"old {i}")
        await store.run_write(lambda conn: conn.execute(update(chat_log).values(created_at=old, updated_at=old)))
        await store.chat_log.add("web", "busy", "b-new", "user", "today")
        usage_row = {"platform": "qa", "user_id": "u", "model": "m", "prompt_tokens": 1, "completion_tokens": 1,
                     "cached_tokens": 0, "calls": 1, "estimated": False}
        await store.run_write(lambda conn: conn.execute(insert(usage), [
            {**usage_row, "created_at": old}, {**usage_row, "created_at": old}, {**usage_row, "created_at": now}]))
        await store.run_write(lambda conn: conn.execute(insert(memories).values(
            platform="qa", user_id="u", entries=["likes tea"], version=1, updated_at=old)))

        total = await Retention(store, days=30, batch=2, pause=0).prune()

        assert total["chat_log"] == 5 and total["usage"] == 2

        def left(conn):  # type: ignore[no-untyped-def]
            chats = conn.execute(select(chat_log.c.chat_id, func.count()).group_by(chat_log.c.chat_id)).all()
            return (dict(chats), conn.execute(select(func.count()).select_from(usage)).scalar_one(),
                    conn.execute(select(func.count()).select_from(memories)).scalar_one())

        assert await store.run_read(left) == ({"busy": 6}, 1, 1)
    finally:
        await store.close()


async def test_retention_removes_the_old_audit_trail_questions_and_sent_messages(db_url: str) -> None:
    from sqlalchemy import insert

    from gateway.storage.tables import audit_events, clarifications, outgoing

    store = Store(db_url)
    await store.init()
    old, new = time.time() - 40 * DAY, time.time()
    try:
        def rows(conn):  # type: ignore[no-untyped-def]
            for n, (at, status) in enumerate([(old, "sent"), (old, "queued"), (new, "sent")], 1):
                conn.execute(insert(outgoing).values(id=n, via="cli", target="qa", platform="qa", chat_id="c",
                                                     text="t", status=status, created_at=at))
                conn.execute(insert(outbox).values(platform="qa", chat_id="c", chunk_index=0, status="sent",
                                                   created_at=at, ref=f"send:{n}"))
            for n, (at, status) in enumerate([(old, "answered"), (old, "pending"), (new, "answered")]):
                conn.execute(insert(clarifications).values(id=f"q{n}", session_key="k", platform="qa", chat_id="c",
                                                           question="?", choices=[], status=status, created_at=at))
            for at in (old, new):
                conn.execute(insert(audit_events).values(created_at=at, kind="web_fetch", subject="u", outcome="x"))

        await store.run_write(rows)
        await Retention(store, 30).prune()

        def left(conn):  # type: ignore[no-untyped-def]
            return ([r.id for r in conn.execute(select(outgoing.c.id).order_by(outgoing.c.id))],
                    sorted(r.ref for r in conn.execute(select(outbox.c.ref))),
                    sorted(r.id for r in conn.execute(select(clarifications.c.id))),
                    len(conn.execute(select(audit_events.c.id)).all()))

        # What still waits (a queued message, a pending question) stays however old; the rest of the old goes.
        assert await store.run_read(left) == ([2, 3], ["send:2", "send:3"], ["q1", "q2"], 1)
    finally:
        await store.close()
