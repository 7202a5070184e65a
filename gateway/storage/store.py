"""The gateway's data: ``Store`` is the shared ``gateway.storage.db.Database`` (engine, group commit, outage
handling) with one store per table family over it:

- ``store.inbox`` (gateway/storage/inbox.py): every platform message we accepted, de-duplicated by platform
  id, with the instance that owns it;
- ``store.outbox`` (outbox.py): every chunk we send, before and after;
- ``store.sessions`` (sessions.py): the sessions of each session key;
- ``store.messages`` (messages.py): their messages, and the cache of recent histories;
- ``store.chat_log`` (chat_log.py): what the web chat serves back to its clients;
- ``store.cursors`` (cursors.py): where adapters that read back missed messages left off.

Stores of other concerns (approvals, /undo and /search, cron jobs, pairing, memories, usage, the cluster's
leases) take the ``Store`` and run their own statements through ``run_read``/``run_write``; retention
(retention.py) deletes across the families.
"""

from __future__ import annotations

from gateway.kernel.faults import Faults
from gateway.storage.chat_log import ChatLogStore
from gateway.storage.cursors import CursorStore
from gateway.storage.db import Database
from gateway.storage.inbox import InboxStore
from gateway.storage.messages import MessageStore
from gateway.storage.outbox import OutboxStore
from gateway.storage.sessions import SessionStore


class Store(Database):
    def __init__(self, url: str, faults: Faults | None = None) -> None:
        super().__init__(url, faults)
        self.inbox = InboxStore(self)
        self.outbox = OutboxStore(self)
        self.sessions = SessionStore(self)
        self.messages = MessageStore(self)
        self.chat_log = ChatLogStore(self)
        self.cursors = CursorStore(self)
