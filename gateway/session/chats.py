"""The chats of a platform whose client lists them (the web chat): the ``Chats`` port of the contract
(gateway/platforms/chats.py), over the chat log, the sessions and the /search index.

A chat is a chat id of the platform's chat log; its conversations are the sessions of its session key (a /new
starts another in the same chat). Its title is the newest titled conversation's (/title, or the first words of
its first message, set after the first exchange), else the first words of the chat's first message: a chat
just begun has a title before its first answer. Deleting a chat deletes what it said — its log, its
conversations' messages (and so their place in the search index), their titles and summaries, its finished inbox
and outbox rows — and keeps the session rows themselves (a key and timestamps, ended "deleted"), as retention
does. A chat whose turn runs or waits is not deleted: the turn would write into what was just removed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import structlog
from sqlalchemy import and_, func, select, update
from sqlalchemy.engine import Connection

from gateway.platforms.base import ChatBusy, ChatHit, ChatInfo, Source
from gateway.session import search as fts
from gateway.session.history import auto_title
from gateway.session.keys import chat_of
from gateway.storage.store import Store
from gateway.storage.tables import chat_log, inbox, messages, outbox, sessions

log = structlog.get_logger("herald.chats")

SEARCH_RESULTS = 20
_FINISHED = ("done", "failed", "cancelled", "rejected", "denied")


class Chats:
    def __init__(self, store: Store, key_for: Callable[[Source], str], lanes: Any, sessions_cache: Any,
                 peers: Any = None) -> None:
        self.store = store
        self.key_for = key_for
        self.lanes = lanes  # .busy(key), .queued(key)
        self.cache = sessions_cache  # the session manager: .peek(key), .forget(key)
        self.peers = peers  # the other instances (gateway/cluster/bus.py), told of a deleted chat

    def _key(self, platform: str, chat_id: str) -> str:
        return self.key_for(Source(platform=platform, chat_id=chat_id, user_id="", chat_type="dm"))

    async def list(self, platform: str, limit: int = 200) -> list[ChatInfo]:
        last = func.max(chat_log.c.updated_at).label("last")
        stmt = (select(chat_log.c.chat_id, last, func.min(chat_log.c.created_at).label("first"))
                .where(chat_log.c.platform == platform).group_by(chat_log.c.chat_id)
                .order_by(last.desc()).limit(limit))

        def op(conn: Connection) -> list[ChatInfo]:
            rows = conn.execute(stmt).all()
            titles = self._titles(conn, platform, [r.chat_id for r in rows])
            return [ChatInfo(r.chat_id, titles.get(r.chat_id), float(r.last), float(r.first)) for r in rows]

        return await self.store.run_read(op)

    def _titles(self, conn: Connection, platform: str, chat_ids: list[str]) -> dict[str, str]:
        """chat id -> title, for those of ``chat_ids`` that have one."""
        if not chat_ids:
            return {}
        keys = {self._key(platform, chat): chat for chat in chat_ids}
        out: dict[str, str] = {}
        titled = conn.execute(select(sessions.c.key, sessions.c.title)
                              .where(and_(sessions.c.key.in_(list(keys)), sessions.c.title.is_not(None)))
                              .order_by(sessions.c.created_at)).all()
        for row in titled:  # oldest first: the newest titled conversation's wins
            out[keys[row.key]] = row.title
        untitled = [chat for chat in chat_ids if chat not in out]
        if untitled:
            first = (select(func.min(chat_log.c.id))
                     .where(and_(chat_log.c.platform == platform, chat_log.c.chat_id.in_(untitled),
                                 chat_log.c.role == "user"))
                     .group_by(chat_log.c.chat_id))
            for row in conn.execute(select(chat_log.c.chat_id, chat_log.c.text).where(chat_log.c.id.in_(first))):
                title = auto_title(row.text)
                if title:
                    out[row.chat_id] = title
        return out

    async def rename(self, platform: str, chat_id: str, title: str) -> bool:
        key = self._key(platform, chat_id)
        newest = (select(sessions.c.id).where(sessions.c.key == key)
                  .order_by(sessions.c.ended_at.is_not(None), sessions.c.created_at.desc()).limit(1))

        def op(conn: Connection) -> str | None:
            session_id = conn.execute(newest).scalar()
            if session_id is not None:
                conn.execute(update(sessions).where(sessions.c.id == session_id).values(title=title))
            return session_id

        session_id = await self.store.run_write(op)
        cached = self.cache.peek(key)
        if cached is not None and cached.get("id") == session_id:
            cached["title"] = title  # /title reads the cached row
        return session_id is not None

    async def delete(self, platform: str, chat_id: str) -> list[str]:
        key = self._key(platform, chat_id)
        if self.lanes.busy(key) is not None or self.lanes.queued(key):
            raise ChatBusy("A turn is running in this chat: stop it (/stop) or let it finish, then delete the chat.")
        files, session_ids, counts = await self.store.run_write(lambda conn: _delete(conn, platform, chat_id, key))
        self.cache.forget(key)
        for session_id in session_ids:
            self.store.messages.forget_cached(session_id)
        if self.peers is not None and self.peers.enabled:
            await self.peers.broadcast("session-reset", key)  # another instance drops what it cached of it
        log.info("chat_deleted", platform=platform, session_key=key, **counts)
        return files

    async def search(self, platform: str, query: str) -> list[ChatHit]:
        words = fts.query_words(query)

        def op(conn: Connection) -> list[ChatHit]:
            hits = fts.search(conn, platform, None, words, limit=SEARCH_RESULTS)
            if not hits:
                return []
            keys = dict(conn.execute(select(sessions.c.id, sessions.c.key)
                                     .where(sessions.c.id.in_(list({h.session_id for h in hits})))).all())
            chats = {h.session_id: chat_of(keys.get(h.session_id, "")) for h in hits}
            titles = self._titles(conn, platform, sorted(set(chats.values())))
            return [ChatHit(chats[h.session_id], titles.get(chats[h.session_id]), h.role,
                            fts.snippet(h.text, words, markdown=False), h.created_at) for h in hits]

        return await self.store.run_read(op) if words else []


def _delete(conn: Connection, platform: str, chat_id: str, key: str) -> tuple[list[str], list[str], dict[str, int]]:
    """``Chats.delete``'s transaction: the file ids the log carried, the sessions emptied, the counts."""
    of_chat = and_(chat_log.c.platform == platform, chat_log.c.chat_id == chat_id)
    files = [str(f["id"]) for row in conn.execute(select(chat_log.c.files).where(of_chat)).scalars()
             for f in row or [] if isinstance(f, dict) and f.get("id")]
    logged = conn.execute(chat_log.delete().where(of_chat)).rowcount
    session_ids = list(conn.execute(select(sessions.c.id).where(sessions.c.key == key)).scalars())
    said = 0
    if session_ids:
        said = conn.execute(messages.delete().where(messages.c.session_id.in_(session_ids))).rowcount
        conn.execute(update(sessions).where(sessions.c.id.in_(session_ids)).values(title=None, summary=None))
        conn.execute(update(sessions).where(and_(sessions.c.key == key, sessions.c.ended_at.is_(None)))
                     .values(ended_at=time.time(), end_reason="deleted"))
    inbox_ids = list(conn.execute(select(inbox.c.id).where(and_(inbox.c.session_key == key,
                                                                inbox.c.status.in_(_FINISHED)))).scalars())
    if inbox_ids:
        conn.execute(outbox.delete().where(outbox.c.inbox_id.in_(inbox_ids)))
        conn.execute(inbox.delete().where(inbox.c.id.in_(inbox_ids)))
    return files, session_ids, {"chat_log": int(logged or 0), "messages": int(said or 0), "inbox": len(inbox_ids)}
