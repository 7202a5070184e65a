"""Pairing: an unknown user who DMs the bot gets a one-time code; the owner approves it.

Codes are 8 characters from an alphabet without look-alikes (no 0/O, 1/I/L), drawn with ``secrets``,
valid for an hour and stored only as their sha256. At most 3 codes wait per platform and a user gets at
most one new code per 10 minutes; 5 failed approvals within an hour lock that platform's pairing for an
hour (``herald pairing clear`` lifts it). Approval (``herald pairing approve`` from any process, or
``/pair`` from an admin's chat) writes ``paired_users``; the daemon re-reads that table every few seconds,
so the user is allowed from then on — after a restart too — and is told once.

``Pairing`` holds the database operations (a clock is injected, so tests move time instead of sleeping);
``PairingService`` is the daemon's side: answering strangers, ``/pair``, the refresh loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
from sqlalchemy import and_, delete, func, insert, select, update
from sqlalchemy.engine import Connection

from gateway.commands.registry import CommandContext, CommandSet
from gateway.inbound.access import AccessControl
from gateway.outbound.delivery import Delivery
from gateway.platforms.base import OutboundMessage, PlatformAdapter, Source
from gateway.ports import Adapters, Lifecycle, Notifier
from gateway.storage.store import Store
from gateway.storage.tables import paired_users, pairing_codes, pairing_failures, pairing_lockouts

log = structlog.get_logger("herald.pairing")

ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
CODE_TTL = 3600.0
MAX_PENDING = 3
USER_INTERVAL = 600.0
MAX_FAILURES = 5
FAILURE_WINDOW = 3600.0
LOCKOUT = 3600.0






def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def normalize_code(text: str) -> str:
    return re.sub(r"[\s-]+", "", text).upper()


def hash_code(code: str) -> str:
    return hashlib.sha256(normalize_code(code).encode()).hexdigest()


@dataclass(frozen=True)
class CodeRequest:
    outcome: str  # code | wait (one was issued lately) | full (too many pending) | locked
    code: str | None = None
    until: float | None = None


@dataclass(frozen=True)
class Approval:
    outcome: str  # approved | invalid | expired | locked
    user_id: str | None = None
    user_name: str | None = None
    chat_id: str | None = None
    until: float | None = None  # locked: when pairing opens again
    failures: int = 0


class Pairing:
    """The pairing tables. Each method is one transaction through the store (never on the loop)."""

    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self._issue = asyncio.Lock()  # the pending count and the insert belong together

    @staticmethod
    def _locked_until(conn: Connection, platform: str, now: float) -> float | None:
        until = conn.execute(select(pairing_lockouts.c.until).where(pairing_lockouts.c.platform == platform)).scalar()
        return until if until is not None and until > now else None

    async def request_code(self, platform: str, user_id: str, chat_id: str, user_name: str | None) -> CodeRequest:
        now = self.clock()

        def op(conn: Connection) -> CodeRequest:
            until = self._locked_until(conn, platform, now)
            if until is not None:
                return CodeRequest("locked", until=until)
            live = and_(pairing_codes.c.platform == platform, pairing_codes.c.status == "pending",
                        pairing_codes.c.expires_at > now)
            mine = and_(live, pairing_codes.c.user_id == user_id)
            latest = conn.execute(select(func.max(pairing_codes.c.created_at)).where(
                and_(pairing_codes.c.platform == platform, pairing_codes.c.user_id == user_id))).scalar()
            if latest is not None and now - latest < USER_INTERVAL:
                return CodeRequest("wait")
            others = conn.execute(select(func.count()).select_from(pairing_codes).where(
                and_(live, pairing_codes.c.user_id != user_id))).scalar_one()
            if others >= MAX_PENDING:
                return CodeRequest("full")
            conn.execute(update(pairing_codes).where(mine).values(status="superseded"))
            conn.execute(update(pairing_codes).where(and_(
                pairing_codes.c.status == "pending", pairing_codes.c.expires_at <= now)).values(status="expired"))
            code = new_code()
            conn.execute(insert(pairing_codes).values(
                platform=platform, user_id=user_id, chat_id=chat_id, user_name=user_name,
                code_hash=hash_code(code), status="pending", created_at=now, expires_at=now + CODE_TTL))
            return CodeRequest("code", code=code)

        async with self._issue:
            return await self.store.run_write(op)

    async def approve(self, platform: str, code: str, approved_by: str) -> Approval:
        now = self.clock()
        digest = hash_code(code)

        def op(conn: Connection) -> Approval:
            until = self._locked_until(conn, platform, now)
            if until is not None:
                return Approval("locked", until=until)
            row = conn.execute(select(pairing_codes).where(and_(
                pairing_codes.c.platform == platform, pairing_codes.c.code_hash == digest,
                pairing_codes.c.status.in_(("pending", "expired"))))
                .order_by(pairing_codes.c.id.desc()).limit(1)).first()
            if row is not None and row.status == "pending" and row.expires_at > now:
                conn.execute(update(pairing_codes).where(pairing_codes.c.id == row.id).values(status="approved"))
                conn.execute(delete(paired_users).where(and_(
                    paired_users.c.platform == platform, paired_users.c.user_id == row.user_id)))
                conn.execute(insert(paired_users).values(
                    platform=platform, user_id=row.user_id, chat_id=row.chat_id, user_name=row.user_name,
                    approved_by=approved_by, approved_at=now, notified_at=None))
                return Approval("approved", row.user_id, row.user_name, row.chat_id)
            conn.execute(insert(pairing_failures).values(platform=platform, at=now))
            failures = conn.execute(select(func.count()).select_from(pairing_failures).where(and_(
                pairing_failures.c.platform == platform, pairing_failures.c.at > now - FAILURE_WINDOW))).scalar_one()
            if failures >= MAX_FAILURES:
                conn.execute(delete(pairing_lockouts).where(pairing_lockouts.c.platform == platform))
                conn.execute(insert(pairing_lockouts).values(platform=platform, until=now + LOCKOUT))
                # The lock is the consequence of these failures; after it, counting starts over.
                conn.execute(delete(pairing_failures).where(pairing_failures.c.platform == platform))
                return Approval("locked", until=now + LOCKOUT, failures=failures)
            return Approval("expired" if row is not None else "invalid", failures=failures)

        return await self.store.run_write(op)

    async def pending(self) -> list[dict[str, Any]]:
        now = self.clock()
        return await self.store.run_read(lambda conn: [dict(r._mapping) for r in conn.execute(
            select(pairing_codes.c.platform, pairing_codes.c.user_id, pairing_codes.c.user_name,
                   pairing_codes.c.created_at, pairing_codes.c.expires_at)
            .where(and_(pairing_codes.c.status == "pending", pairing_codes.c.expires_at > now))
            .order_by(pairing_codes.c.created_at))])

    async def paired(self) -> list[dict[str, Any]]:
        return await self.store.run_read(lambda conn: [dict(r._mapping) for r in conn.execute(
            select(paired_users).order_by(paired_users.c.platform, paired_users.c.approved_at))])

    async def lockouts(self) -> dict[str, float]:
        now = self.clock()
        rows = await self.store.run_read(lambda conn: conn.execute(
            select(pairing_lockouts).where(pairing_lockouts.c.until > now)).all())
        return {r.platform: r.until for r in rows}

    async def revoke(self, platform: str, user_id: str) -> bool:
        def op(conn: Connection) -> bool:
            return conn.execute(delete(paired_users).where(and_(
                paired_users.c.platform == platform, paired_users.c.user_id == user_id))).rowcount > 0

        return await self.store.run_write(op)

    async def clear(self) -> int:
        """Drop every waiting code and lift lockouts (paired users stay: ``revoke`` removes those)."""
        def op(conn: Connection) -> int:
            dropped = conn.execute(update(pairing_codes).where(pairing_codes.c.status == "pending")
                                   .values(status="expired")).rowcount
            conn.execute(delete(pairing_lockouts))
            conn.execute(delete(pairing_failures))
            return dropped

        return await self.store.run_write(op)

    async def claim_notice(self, platform: str, user_id: str) -> bool:
        """Take the job of telling a newly paired user (False: another instance took it, or it was done)."""
        now = self.clock()
        return bool(await self.store.run_write(lambda conn: conn.execute(update(paired_users).where(and_(
            paired_users.c.platform == platform, paired_users.c.user_id == user_id,
            paired_users.c.notified_at.is_(None))).values(notified_at=now)).rowcount))

    async def unclaim_notice(self, platform: str, user_id: str) -> None:
        """The notice did not go out: the next refresh (here or on another instance) tries again."""
        await self.store.run_write(lambda conn: conn.execute(update(paired_users).where(and_(
            paired_users.c.platform == platform, paired_users.c.user_id == user_id)).values(notified_at=None)))


def _when(ts: float) -> str:
    return time.strftime("%H:%M", time.localtime(ts))


APPROVED_TEXT = "✅ You're approved: you can talk to me now."


class PairingService:
    """The daemon's side of pairing: codes for strangers, ``/pair``, and keeping the access sets fresh."""

    refresh_seconds = 2.0
    quiet_max = 10_000

    def __init__(self, store: Store, access: AccessControl, adapters: Adapters, delivery: Delivery,
                 notifier: Notifier, life: Lifecycle, unknown_dm: str, clock: Callable[[], float] = time.time) -> None:
        self.access = access
        self.adapters = adapters
        self.delivery = delivery
        self.notifier = notifier
        self.life = life
        self.unknown_dm = unknown_dm
        self.clock = clock
        self.pairing = Pairing(store, clock)
        # platform:user -> until when a stranger gets no further answer (no database work either).
        self._quiet: OrderedDict[str, float] = OrderedDict()
        self._refreshing = asyncio.Lock()

    async def start(self) -> None:
        await self.refresh(notify=False)  # before adapters connect: paired users are let in from the start
        self.life.spawn(self._refresh_loop(), name="pairing-refresh")

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_seconds)
            try:
                await self.refresh()
            except Exception as exc:  # a database hiccup: the sets stay as they were until the next round
                log.warning("pairing_refresh_failed", error=f"{type(exc).__name__}: {exc}")

    async def refresh(self, notify: bool = True) -> None:
        """Re-read paired users into the access sets; tell newly approved users (once) they may talk."""
        async with self._refreshing:
            rows = await self.pairing.paired()
            self.access.set_paired(frozenset(f"{r['platform']}:{r['user_id']}" for r in rows))
            if not notify:
                return
            for row in rows:
                if row["notified_at"] is not None:
                    continue
                adapter = self.adapters.get(row["platform"])
                if adapter is None or adapter.state != "connected" or not row["chat_id"]:
                    continue
                # Claimed first: with several instances sharing the database, one of them tells the user.
                if not await self.pairing.claim_notice(row["platform"], row["user_id"]):
                    continue
                try:
                    report = await self.delivery.deliver(adapter, row["chat_id"], OutboundMessage(APPROVED_TEXT))
                except Exception as exc:  # cut off (the adapter went away): the next refresh tries again
                    log.warning("pairing_notice_failed", platform=row["platform"], error=str(exc), retry=True)
                    await self.pairing.unclaim_notice(row["platform"], row["user_id"])
                    continue
                if report.failed:  # the platform refused it for good (after delivery's own retries)
                    log.warning("pairing_notice_failed", platform=row["platform"], error=report.error, retry=False)
                    continue
                log.info("pairing_user_told", platform=row["platform"], user_id=row["user_id"])

    def denied(self, adapter: PlatformAdapter, source: Source) -> None:
        """An unknown sender's message was denied: answer a DM with a code (or one short line), groups never."""
        if source.chat_type != "dm" or self.unknown_dm != "pair":
            return
        key = f"{source.platform}:{source.user_id}"
        now = self.clock()
        if self._quiet.get(key, 0.0) > now:
            return
        # Claimed before any await: a burst of messages from one stranger starts one request, not many.
        self._quiet[key] = now + USER_INTERVAL
        self._quiet.move_to_end(key)
        while len(self._quiet) > self.quiet_max:
            self._quiet.popitem(last=False)
        self.life.spawn(self._answer_stranger(source, key), name="pairing-stranger")

    async def _answer_stranger(self, source: Source, key: str) -> None:
        try:
            result = await self.pairing.request_code(source.platform, source.user_id, source.chat_id,
                                                     source.user_name)
        except Exception as exc:
            log.warning("pairing_code_failed", platform=source.platform, error=f"{type(exc).__name__}: {exc}")
            self._quiet.pop(key, None)
            return
        if result.outcome == "code":
            text = (f"🔐 I only answer people my owner approved. Your pairing code: {result.code}\n"
                    f"Give it to the owner; they run `herald pairing approve {source.platform} {result.code}` "
                    "(valid for 1 hour).")
        elif result.outcome == "wait":
            text = "⏳ You already have a pairing code; ask the owner to approve it."
        elif result.outcome == "full":
            text = "⏳ Too many pairing requests are waiting; try again later."
        else:
            assert result.until is not None
            self._quiet[key] = result.until
            text = f"🔒 Pairing is paused on this bot until {_when(result.until)}."
        log.info("pairing_requested", platform=source.platform, user_id=source.user_id, outcome=result.outcome)
        await self.notifier.notify(source, text)

    async def approve(self, platform: str, code: str, approved_by: str) -> Approval:
        result = await self.pairing.approve(platform, code, approved_by)
        log.info("pairing_approval", platform=platform, outcome=result.outcome, by=approved_by,
                 user_id=result.user_id)
        if result.outcome == "approved":
            assert result.user_id is not None
            self.access.add_paired(f"{platform}:{result.user_id}")
            self._quiet.pop(f"{platform}:{result.user_id}", None)
            await self.refresh()
        return result


PAIRING_COMMANDS: CommandSet[PairingService] = CommandSet()


@PAIRING_COMMANDS.command("pair", "approve a pairing code", args_hint="[platform] <code>", admin_only=True)
async def pair(service: PairingService, ctx: CommandContext) -> str:
    parts = ctx.args.split()
    if len(parts) == 1:
        platform, code = ctx.adapter.name, parts[0]
    elif len(parts) == 2:
        platform, code = parts[0].lower(), parts[1]
    else:
        typed = ctx.adapter.capabilities.command("pair")
        return f"Usage: {typed} <code>, or {typed} <platform> <code> for another platform."
    who = ctx.message.source
    result = await service.approve(platform, code, f"{who.platform}:{who.user_id}")
    return describe(result, platform)


def describe(result: Approval, platform: str) -> str:
    """One line for whoever approved (chat or CLI)."""
    if result.outcome == "approved":
        name = f"{result.user_name} ({result.user_id})" if result.user_name else result.user_id
        return f"✅ Paired {platform} user {name}: they can talk to me now."
    if result.outcome == "locked":
        return (f"🔒 Pairing on {platform} is locked until {_when(result.until or 0)} after "
                f"{MAX_FAILURES} failed approvals within an hour (`herald pairing clear` lifts it).")
    left = MAX_FAILURES - result.failures
    why = "has expired (codes are valid for 1 hour)" if result.outcome == "expired" else "is not a waiting code"
    return f"❌ That code {why} on {platform}. {left} more failed approval(s) within the hour lock pairing."
