"""Approvals in the database: requests and decisions (the audit trail), session grants, the Always list."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from gateway.storage.store import Store
from gateway.storage.tables import approval_allowlist, approval_session_grants, approvals


def always_hashes(conn: Connection) -> set[str]:
    return {row[0] for row in conn.execute(select(approval_allowlist.c.command_hash))}


class ApprovalStore:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def load(self) -> tuple[set[str], dict[str, set[str]], list[dict[str, Any]]]:
        """(Always hashes, session grants, pending requests oldest first)."""

        def op(conn: Connection) -> tuple[set[str], dict[str, set[str]], list[dict[str, Any]]]:
            grants: dict[str, set[str]] = {}
            for key, digest in conn.execute(select(approval_session_grants.c.session_key,
                                                   approval_session_grants.c.command_hash)):
                grants.setdefault(key, set()).add(digest)
            pending = [dict(r._mapping) for r in conn.execute(
                select(approvals).where(approvals.c.status == "pending").order_by(approvals.c.created_at))]
            return always_hashes(conn), grants, pending

        return await self.store.run_read(op)

    async def always(self) -> set[str]:
        return await self.store.run_read(always_hashes)

    async def deny_stale(self, ids: list[str]) -> None:
        now = time.time()
        stmt = (update(approvals).where(approvals.c.id.in_(ids)).where(approvals.c.status == "pending")
                .values(status="denied", decided_via="restart", decided_at=now))
        await self.store.run_write(lambda conn: conn.execute(stmt))

    async def insert(self, values: dict[str, Any]) -> None:
        await self.store.run_write(lambda conn: conn.execute(insert(approvals).values(**values)))

    async def set_prompt(self, approval_id: str, message_id: str) -> None:
        stmt = update(approvals).where(approvals.c.id == approval_id).values(prompt_message_id=message_id)
        await self.store.run_write(lambda conn: conn.execute(stmt))

    async def decide(self, approval_id: str, values: dict[str, Any], session_key: str, digest: str,
                     display: str) -> None:
        """The decision, and the grant it makes ("session": this session; "always": everywhere)."""
        scope = values.get("scope")
        now = values["decided_at"]

        def op(conn: Connection) -> None:
            conn.execute(update(approvals).where(approvals.c.id == approval_id).values(**values))
            if scope == "session":
                exists = conn.execute(select(approval_session_grants.c.id).where(
                    approval_session_grants.c.session_key == session_key,
                    approval_session_grants.c.command_hash == digest)).first()
                if exists is None:
                    conn.execute(insert(approval_session_grants).values(
                        session_key=session_key, command_hash=digest, granted_by=values["decided_by"],
                        created_at=now))
            if scope == "always":
                exists = conn.execute(select(approval_allowlist.c.id).where(
                    approval_allowlist.c.command_hash == digest)).first()
                if exists is None:
                    conn.execute(insert(approval_allowlist).values(
                        command_hash=digest, command=display, added_by=values["decided_by"],
                        approval_id=approval_id, created_at=now))

        await self.store.run_write(op)

    async def status(self, approval_id: str) -> tuple[str, str | None] | None:
        def op(conn: Connection) -> Any:
            return conn.execute(select(approvals.c.status, approvals.c.decided_by)
                                .where(approvals.c.id == approval_id)).first()

        row = await self.store.run_read(op)
        return (row.status, row.decided_by) if row is not None else None

    async def drop_grants(self, session_key: str) -> None:
        stmt = approval_session_grants.delete().where(approval_session_grants.c.session_key == session_key)
        await self.store.run_write(lambda conn: conn.execute(stmt))
