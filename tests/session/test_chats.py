"""The chats' port over the store, on SQLite and PostgreSQL: the list (titles from the newest titled conversation,
else the first message; newest activity first), rename (the active conversation, the cached row too), search
(hits mapped to their chats, every person's own sessions of the platform) and delete (the chat's log, messages,
titles and finished inbox rows gone; other chats untouched; refused while a turn runs)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, insert, select

from gateway.platforms.base import ChatBusy, Source
from gateway.session.chats import Chats
from gateway.session.keys import chat_of, session_key
from gateway.storage.store import Store
from gateway.storage.tables import inbox, messages, sessions


class Lanes:
    def __init__(self) -> None:
        self.running: set[str] = set()

    def busy(self, key: str) -> tuple[float, str] | None:
        return (1.0, "model call 1") if key in self.running else None

    def queued(self, key: str) -> list[str]:
        return []


class Cache:
    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}
        self.forgotten: list[str] = []

    def peek(self, key: str) -> dict[str, Any] | None:
        return self.rows.get(key)

    def forget(self, key: str) -> None:
        self.forgotten.append(key)
        self.rows.pop(key, None)


@pytest.fixture
async def store(db_url: str) -> Any:
    store = Store(db_url)
    await store.init()
    yield store
    await store.close()


async def chat(store: Store, chat_id: str, said: list[tuple[str, str]], title: str | None = None,
               user: str = "owner") -> dict[str, Any]:
    """A web chat as the adapter and a turn leave it: its log, a session (owned by ``user``) with the messages."""
    key = session_key(Source("web", chat_id, user))
    row = await store.sessions.create(f"s-{chat_id}", key, "web", "SYSTEM", user_id=user, title=title)
    for i, (role, text) in enumerate(said):
        await store.chat_log.add("web", chat_id, f"{chat_id}-{i}", role, text, None, user if role == "user" else None)
    await store.run_write(lambda conn: conn.execute(insert(messages), [
        {"session_id": row["id"], "role": role, "content": text, "created_at": 1.0 + i}
        for i, (role, text) in enumerate(said)]))
    await store.run_write(lambda conn: conn.execute(insert(inbox), {
        "platform": "web", "platform_message_id": f"{chat_id}/1", "session_key": key, "payload": {},
        "status": "done", "created_at": 1.0, "updated_at": 2.0}))
    return row


def chats_of(store: Store, lanes: Lanes | None = None, cache: Cache | None = None) -> Chats:
    return Chats(store, session_key, lanes or Lanes(), cache or Cache())


async def test_list_rename_search_and_delete(store: Store) -> None:
    await chat(store, "a/1", [("user", "Where is the lighthouse keeper tonight?"), ("assistant", "At the lamp.")])
    await chat(store, "b", [("user", "plum dumplings recipe"), ("assistant", "Flour, plums, lighthouse sugar.")],
               title="Dumplings")
    await store.chat_log.add("web", "c", "c-0", "assistant", "a cron job's report")  # no conversation of its own
    lanes, cache = Lanes(), Cache()
    port = chats_of(store, lanes, cache)

    listed = await port.list("web")
    assert [(c.chat_id, c.title) for c in listed] == [("c", None), ("b", "Dumplings"),
                                                     ("a/1", "Where is the lighthouse keeper tonight?")]
    assert listed[0].last_activity >= listed[1].last_activity >= listed[2].last_activity

    cached = {"id": "s-a/1", "title": None}
    cache.rows[session_key(Source("web", "a/1", "owner"))] = cached
    assert await port.rename("web", "a/1", "Lighthouse") is True
    assert cached["title"] == "Lighthouse"  # /title reads the cached row
    assert {c.chat_id: c.title for c in await port.list("web")}["a/1"] == "Lighthouse"
    assert await port.rename("web", "nothing-here", "x") is False

    hits = await port.search("web", "LIGHTHOUSE")
    assert sorted((h.chat_id, h.title, h.role) for h in hits) == [
        ("a/1", "Lighthouse", "user"), ("b", "Dumplings", "assistant")]
    assert all("lighthouse" in h.snippet.lower() and "\\" not in h.snippet for h in hits)
    assert await port.search("web", "   ") == []

    lanes.running.add(session_key(Source("web", "b", "owner")))
    with pytest.raises(ChatBusy):
        await port.delete("web", "b")
    lanes.running.clear()
    await port.delete("web", "b")
    assert [c.chat_id for c in await port.list("web")] == ["c", "a/1"]
    assert [h.chat_id for h in await port.search("web", "lighthouse")] == ["a/1"]
    key_b = session_key(Source("web", "b", "owner"))
    assert key_b in cache.forgotten

    def left(conn: Any) -> tuple[Any, ...]:
        session = conn.execute(select(sessions).where(sessions.c.key == key_b)).one()
        return (conn.execute(select(func.count()).select_from(messages)
                             .where(messages.c.session_id == session.id)).scalar(),
                conn.execute(select(func.count()).select_from(inbox).where(inbox.c.session_key == key_b)).scalar(),
                session.title, session.end_reason)

    assert await store.run_read(left) == (0, 0, None, "deleted")


async def test_search_covers_every_person_of_the_platform_but_no_other_platform(store: Store) -> None:
    await chat(store, "mine", [("user", "marmalade")], user="owner")
    await chat(store, "theirs", [("user", "marmalade too")], user="tester")
    other = await store.sessions.create("s-tg", "telegram:dm:1", "telegram", "SYSTEM", user_id="1")
    await store.run_write(lambda conn: conn.execute(insert(messages), {
        "session_id": other["id"], "role": "user", "content": "marmalade on telegram", "created_at": 1.0}))
    hits = await chats_of(store).search("web", "marmalade")
    assert sorted(h.chat_id for h in hits) == ["mine", "theirs"]


def test_chat_of_reads_the_chat_back_from_a_key() -> None:
    for source in (Source("web", "a/b:c d", "u"), Source("slack", "C1", "U1", "group", scope="T:1", thread_id="9")):
        assert chat_of(session_key(source)) == source.chat_id
