"""The OpenAI-compatible API's keys (table ``api_keys``): made by ``herald api-key create`` and shown once, then
known only by their sha256; checked on every request; listed and revoked by name.

A key reads ``sk-herald-<id>-<secret>``: ``id`` finds its row, the sha256 of the whole key is compared in
constant time, so neither the lookup nor the comparison tells a caller how close a guess came. The ``sk-`` shape
is one the log redactor already masks (gateway/kernel/logs.py). ``name`` is who holds the key: at most one live
key per name, so a name is one identity (``api:<name>``) at a time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from typing import Any

from sqlalchemy import and_, insert, or_, select, update
from sqlalchemy.engine import Connection

from gateway.kernel.faults import Unavailable
from gateway.storage.db import Database, op_all, op_exec
from gateway.storage.tables import api_keys

PREFIX = "sk-herald-"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_KEY = re.compile(r"sk-herald-([0-9a-f]{12})-[A-Za-z0-9_-]{20,}")
# How stale ``last_used_at`` may get: a write per request would cost more than the figure is worth.
USED_EVERY = 60.0


class KeyProblem(Exception):
    """A key cannot be made as asked (the name is taken or not a name): ``str()`` says why."""


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def live(now: float) -> Any:
    """Rows of keys that still open the door at ``now``."""
    return and_(api_keys.c.revoked_at.is_(None), or_(api_keys.c.expires_at.is_(None), api_keys.c.expires_at > now))


class ApiKeyStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._used: dict[str, float] = {}  # key id -> when last_used_at was last written

    async def create(self, name: str, expires_at: float | None = None) -> str:
        """A new key for ``name``; the key itself, which is never stored (show it now or never)."""
        if not NAME.fullmatch(name):
            raise KeyProblem(f"{name!r} is not a usable name: letters, digits, '.', '_' and '-', at most 64, "
                             "starting with a letter or digit")
        key_id = secrets.token_hex(6)
        key = f"{PREFIX}{key_id}-{secrets.token_urlsafe(32)}"
        now = time.time()

        def op(conn: Connection) -> bool:
            if conn.execute(select(api_keys.c.id).where(and_(api_keys.c.name == name, live(now)))).first():
                return False
            conn.execute(insert(api_keys).values(id=key_id, name=name, key_hash=digest(key), created_at=now,
                                                 expires_at=expires_at, revoked_at=None, last_used_at=None))
            return True

        if not await self.db.run_write(op):
            raise KeyProblem(f"{name} has a key already: revoke it first (herald api-key revoke {name})")
        return key

    async def list(self) -> list[dict[str, Any]]:
        """Every key ever made, newest first (without hashes)."""
        columns = [c for c in api_keys.c if c.name != "key_hash"]
        return await self.db.run_read(op_all(select(*columns).order_by(api_keys.c.created_at.desc())))

    async def revoke(self, name: str) -> int:
        """Revoke ``name``'s live keys; how many there were. Requests with them are refused from now on."""
        now = time.time()

        def op(conn: Connection) -> int:
            return conn.execute(update(api_keys).where(and_(api_keys.c.name == name, live(now)))
                                .values(revoked_at=now)).rowcount

        return int(await self.db.run_write(op))

    async def verify(self, key: str) -> str | None:
        """The name of the holder of ``key`` when it is a live key; None for anything else."""
        found = _KEY.fullmatch(key)
        if found is None:
            return None
        key_id = found.group(1)
        # Never held while the database is down: the caller is refused at once (``Unavailable``), not left hanging.
        rows = await self.db.run_read(op_all(select(api_keys.c.name, api_keys.c.key_hash, api_keys.c.revoked_at,
                                                    api_keys.c.expires_at).where(api_keys.c.id == key_id)),
                                      wait=False)
        if not rows:
            hmac.compare_digest(digest(key), digest(""))  # the same work whether or not the id exists
            return None
        row = rows[0]
        now = time.time()
        if not hmac.compare_digest(digest(key), row["key_hash"]):
            return None
        if row["revoked_at"] is not None or (row["expires_at"] is not None and row["expires_at"] <= now):
            return None
        if now - self._used.get(key_id, 0.0) >= USED_EVERY:
            self._used[key_id] = now
            if len(self._used) > 10_000:
                self._used.clear()
            try:
                await self.db.run_write(op_exec(update(api_keys).where(api_keys.c.id == key_id)
                                                .values(last_used_at=now)), wait=False)
            except Unavailable:
                pass  # a figure for `herald api-key list`, not worth refusing the request over
        return str(row["name"])
