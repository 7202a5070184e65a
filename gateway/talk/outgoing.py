"""Messages to other chats: the loop side of the ``send_message`` tool, and the queue ``herald send`` shares.

A target is cron's syntax (cron/jobs.py): a platform's name is its home chat (``/sethome``, else
``platforms.<name>.home_chat``), ``platform:chat_id[:thread_id]`` a chat, ``origin`` the chat the agent talks
in. The agent's own chat needs nobody's approval; any other asks the person like a dangerous command (the
prompt shows the target and the whole text: approvals' ``open_message``) unless it is listed in
``tools.send_message.allow``; a chat the bot has no conversation in, or whose people may not talk to it (a
stranger's), is refused outright.

Exactly once: every message is an ``outgoing`` row before anything is sent. The agent's is written already
claimed (``sending``, this instance its owner); one from ``herald send`` is written ``queued`` and a running
daemon connected to its platform claims it (a conditional UPDATE of status and owner: one instance wins).
It goes out through delivery with ``outbox.ref = send:<id>``, each chunk begun only while the row is still
its claimer's, so a claim taken over from a gone owner (a crash, a restart) sends only what is not out yet.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import structlog
from sqlalchemy import and_, insert, or_, select, update
from sqlalchemy.engine import Connection

from cron.jobs import JobError, parse_targets, split_chat
from cron.store import op_get_home
from gateway.cluster.instance import Instance
from gateway.config import Config
from gateway.inbound.access import AccessControl
from gateway.outbound.delivery import Delivery
from gateway.platforms.base import Attachment, OutboundMessage, Source
from gateway.ports import Adapters, Lifecycle
from gateway.session.keys import encode_id
from gateway.storage.audit import AuditLog
from gateway.storage.inbox import NotExpected
from gateway.storage.store import Store
from gateway.storage.tables import inbox, outgoing
from tools.dangerous import Decision

log = structlog.get_logger("herald.outgoing")

POLL_SECONDS = 1.0  # how soon a message `herald send` queued is taken
TAKEOVER_SECONDS = 10.0  # how often claims of instances that are gone are looked for
STEP_TIMEOUT = 120.0  # the tool's wait for one step on the loop (a delivery may wait out a rate limit)

Read = Callable[[Callable[[Connection], Any]], Awaitable[Any]]


class TargetRefused(ValueError):
    """Why a message cannot go to that target, in words for whoever asked."""


@dataclass(frozen=True)
class Place:
    platform: str
    chat_id: str
    thread_id: str | None = None

    def label(self) -> str:
        return f"{self.platform}:{self.chat_id}" + (f" (thread {self.thread_id})" if self.thread_id else "")

    def within(self, other: Place) -> bool:
        """``self`` is ``other``, or a thread of the chat ``other`` names without one."""
        return (self.platform, self.chat_id) == (other.platform, other.chat_id) and (
            other.thread_id is None or other.thread_id == self.thread_id)


async def resolve(target: str, cfg: Config, read: Read, platforms: Iterable[str],
                  origin: Source | None = None) -> Place:
    """Where ``target`` points now; ``TargetRefused`` says why it points nowhere."""
    text = target.strip()
    if "," in text:
        raise TargetRefused("one target at a time")
    try:
        (parsed,) = parse_targets(text, known_platforms=set(platforms), has_origin=origin is not None)
    except JobError as exc:
        raise TargetRefused(str(exc).removeprefix("deliver: ")) from None
    except ValueError:
        raise TargetRefused("one target at a time") from None
    if parsed.kind == "local":
        raise TargetRefused("'local' is no chat: name a platform (its home chat) or platform:chat_id")
    if parsed.kind == "origin":
        assert origin is not None
        return Place(origin.platform, origin.chat_id, origin.thread_id)
    if parsed.kind == "home":
        platform = parsed.platform or ""
        home = await read(op_get_home(platform))
        if home is not None:
            return Place(platform, home["chat_id"], home["thread_id"])
        configured = getattr(getattr(cfg.platforms, platform, None), "home_chat", None)
        if not configured:
            raise TargetRefused(f"{platform} has no home chat (platforms.{platform}.home_chat, or /sethome there)")
        return Place(platform, *split_chat(str(configured)))
    return Place(parsed.platform or "", parsed.chat_id or "", parsed.thread_id)


def enabled_platforms(cfg: Config) -> list[str]:
    return [name for name in type(cfg.platforms).model_fields if getattr(cfg.platforms, name).enabled]


# ---- the rows ------------------------------------------------------------------------------------------


def op_insert(values: dict[str, Any]) -> Callable[[Connection], dict[str, Any]]:
    """A new row, or the one a caller's idempotency key (``key``) already names."""

    def op(conn: Connection) -> dict[str, Any]:
        if values.get("key"):
            row = conn.execute(select(outgoing).where(outgoing.c.key == values["key"])).first()
            if row is not None:
                return dict(row._mapping)
        new_id = conn.execute(insert(outgoing).values(**values)).inserted_primary_key[0]
        return {**values, "id": int(new_id)}

    return op


def op_get(row_id: int) -> Callable[[Connection], dict[str, Any] | None]:
    def op(conn: Connection) -> dict[str, Any] | None:
        row = conn.execute(select(outgoing).where(outgoing.c.id == row_id)).first()
        return dict(row._mapping) if row else None

    return op


def _owned(row_id: int, owner: str) -> Any:
    return and_(outgoing.c.id == row_id, outgoing.c.owner == owner, outgoing.c.status == "sending")


def op_chat_senders(platform: str, chat_id: str) -> Callable[[Connection], list[dict[str, Any]]]:
    """The senders of the chat's newest inbox rows (its session keys name the chat, percent-encoded)."""
    enc = encode_id(chat_id).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    near = [cond for kind in ("dm", "group", "channel")
            for cond in (inbox.c.session_key.like(f"%:{kind}:{enc}", escape="\\"),
                         inbox.c.session_key.like(f"%:{kind}:{enc}:%", escape="\\"))]
    stmt = (select(inbox.c.payload).where(inbox.c.platform == platform, or_(*near))
            .order_by(inbox.c.id.desc()).limit(50))

    def op(conn: Connection) -> list[dict[str, Any]]:
        out = []
        for (payload,) in conn.execute(stmt):
            source = (payload or {}).get("source") if isinstance(payload, dict) else None
            if isinstance(source, dict) and source.get("chat_id") == chat_id:
                out.append(source)
        return out

    return op


@dataclass
class Plan:
    target: str
    place: Place
    ask: bool


class Messenger:
    def __init__(self, cfg: Config, store: Store, delivery: Delivery, adapters: Adapters, access: AccessControl,
                 life: Lifecycle, instance: Instance) -> None:
        self.cfg = cfg
        self.store = store
        self.delivery = delivery
        self.adapters = adapters
        self.access = access
        self.life = life
        self.instance = instance
        self.audit = AuditLog(store)

    # ---- the tool's side (a worker thread) ---------------------------------------------------------------

    def send(self, target: str, text: str, ctx: Any) -> dict[str, Any]:
        """The send_message tool: plan on the loop, ask a person when the target needs it, then send."""
        source: Source | None = ctx.extras.get("source")
        plan = self._on_loop(self._plan(target, text, source, ctx.session_key))
        if isinstance(plan, dict):
            return plan
        approval_id = None
        if plan.ask:
            hook = ctx.extras.get("approve")
            if hook is None or not hasattr(hook, "open_message"):
                return self._on_loop(self._not_sent(plan, text, source, ctx.session_key, "denied",
                                                    "it needs a person's approval and nobody can be asked here"))
            opened = hook.open_message(plan.place.label(), text, ctx)
            decision: Decision = opened if isinstance(opened, Decision) else hook.wait(opened, ctx)
            if not decision.approved:
                return self._on_loop(self._not_sent(plan, text, source, ctx.session_key, "denied", decision.message))
            approval_id = getattr(opened, "id", None)
        return self._on_loop(self._send(plan, text, source, ctx.session_key, approval_id))

    def _on_loop(self, coro: Any) -> Any:
        loop = self.life.loop
        if loop is None or loop.is_closed():
            coro.close()
            return {"error": "not sent: Herald is shutting down"}
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=STEP_TIMEOUT)

    # ---- the loop's side ---------------------------------------------------------------------------------

    async def _plan(self, target: str, text: str, source: Source | None, key: str) -> Plan | dict[str, Any]:
        if not text.strip():
            return {"error": "not sent: the text is empty"}
        try:
            place = await resolve(target, self.cfg, self.store.run_read, self.adapters.keys(), source)
            if place.platform not in self.adapters:
                raise TargetRefused(f"platform {place.platform!r} is not enabled")
            here = source is not None and (source.platform, source.chat_id) == (place.platform, place.chat_id)
            if not here:
                await self._check_chat(place)
        except TargetRefused as exc:
            return await self._not_sent(Plan(target, Place("", ""), False), text, source, key, "refused", str(exc))
        return Plan(target, place, not here and not await self._allowed(place))

    async def _homes(self, platform: str) -> list[Place]:
        try:
            return [await resolve(platform, self.cfg, self.store.run_read, self.adapters.keys())]
        except TargetRefused:
            return []

    async def _check_chat(self, place: Place) -> None:
        """A chat the bot talks in, with someone who may talk to it: else ``TargetRefused``."""
        if any(place.within(home) for home in await self._homes(place.platform)):
            return
        channels = getattr(getattr(self.cfg.platforms, place.platform, None), "allowed_channels", None) or []
        if place.chat_id in channels:
            return
        senders = await self.store.run_read(op_chat_senders(place.platform, place.chat_id))
        if not senders:
            raise TargetRefused(f"I have no conversation in {place.label()} (the bot may not be in that chat): "
                                "name a chat I talk in, or a platform's home chat")
        adapter = self.adapters[place.platform]
        if not any(self.access.allowed(Source.from_dict(s), adapter.trusted) for s in senders):
            raise TargetRefused(f"{place.label()} is a stranger's chat: nobody there may talk to me")

    async def _allowed(self, place: Place) -> bool:
        """Listed in tools.send_message.allow (an entry without a thread covers the chat's threads)."""
        for entry in self.cfg.tools.send_message.allow:
            try:
                listed = await resolve(entry, self.cfg, self.store.run_read, self.adapters.keys())
            except TargetRefused as exc:
                log.warning("send_allow_entry_unusable", entry=entry, error=str(exc))
                continue
            if place.within(listed):
                return True
        return False

    async def _not_sent(self, plan: Plan, text: str, source: Source | None, key: str, outcome: str,
                        why: str) -> dict[str, Any]:
        log.info("message_not_sent", target=plan.target, outcome=outcome, reason=why, session_key=key)
        await self.audit.add("send_message", f"to {plan.target}: {text}", outcome, session_key=key,
                             platform=source.platform if source else None,
                             chat_id=source.chat_id if source else None,
                             user_id=source.user_id if source else None, detail=why)
        why = why.removeprefix("Not sent: ")
        return {"sent": False, "error": f"not sent: {why}"}

    async def _send(self, plan: Plan, text: str, source: Source | None, key: str,
                    approval_id: str | None) -> dict[str, Any]:
        place = plan.place
        row = await self.store.run_write(op_insert(dict(
            via="agent", session_key=key, requested_by=f"{source.platform}:{source.user_id}" if source else None,
            target=plan.target, platform=place.platform, chat_id=place.chat_id, thread_id=place.thread_id,
            text=text, status="sending", approval_id=approval_id, owner=self.instance.id, created_at=time.time())))
        return await self.deliver_row(row)

    async def deliver_row(self, row: dict[str, Any]) -> dict[str, Any]:
        """Send a row this instance has claimed, through the outbox; the outcome recorded on it."""
        place = Place(row["platform"], row["chat_id"], row["thread_id"])
        adapter = self.adapters.get(place.platform)
        files = [Attachment(**row["attachment"])] if row.get("attachment") else []
        error: str | None = None
        ids: list[str] = []
        if adapter is None:
            error = f"platform {place.platform!r} is not enabled"
        else:
            owner, row_id = self.instance.id, row["id"]
            guard = lambda conn: conn.execute(  # noqa: E731
                select(outgoing.c.id).where(_owned(row_id, owner)).with_for_update()).first() is not None
            try:
                report = await self.delivery.deliver(adapter, place.chat_id,
                                                     OutboundMessage(row["text"], thread_id=place.thread_id,
                                                                     attachments=files),
                                                     resume=True, ref=f"send:{row_id}", guard=guard)
            except NotExpected:
                log.info("outgoing_taken_elsewhere", outgoing_id=row_id)
                return {"sent": False, "error": "not sent here: another Herald instance took the message over"}
            error, ids = (report.error or "delivery failed") if report.failed else None, report.message_ids
        status = "failed" if error else "sent"
        done = (update(outgoing).where(_owned(row["id"], self.instance.id))
                .values(status=status, error=error, sent_at=time.time() if not error else None))
        await self.store.run_write(lambda conn: conn.execute(done))
        log.info("message_sent" if not error else "message_send_failed", outgoing_id=row["id"], to=place.label(),
                 via=row["via"], session_key=row.get("session_key"), error=error)
        who = (row.get("requested_by") or "").partition(":")
        await self.audit.add("send_message", f"to {place.label()}: {row['text']}", status,
                             session_key=row.get("session_key"), platform=who[0] or None, user_id=who[2] or None,
                             detail=error or f"via {row['via']}" + (f", approval {row['approval_id']}"
                                                                   if row.get("approval_id") else ""))
        if error:
            return {"sent": False, "to": place.label(), "error": f"not sent: {error}"}
        return {"sent": True, "to": place.label(), "message_ids": ids}

    # ---- the queue: `herald send`, and claims left by instances that are gone ------------------------------

    async def run(self) -> None:
        last_takeover = 0.0
        while True:
            try:
                takeover = time.monotonic() - last_takeover >= TAKEOVER_SECONDS
                if takeover:
                    last_takeover = time.monotonic()
                await self.poll(takeover)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("outgoing_poll_failed", error=f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(POLL_SECONDS)

    async def poll(self, takeover: bool = True) -> int:
        """Claim and send what waits: queued rows, and (``takeover``) rows whose claimer is gone."""
        wanted = [outgoing.c.status == "queued"]
        if takeover:
            wanted.append(and_(outgoing.c.status == "sending", outgoing.c.owner != self.instance.id))
        stmt = select(outgoing).where(or_(*wanted)).order_by(outgoing.c.id).limit(100)
        rows = await self.store.run_read(lambda conn: [dict(r._mapping) for r in conn.execute(stmt)])
        if not rows:
            return 0
        if takeover:
            await self.instance.refresh()
        taken = 0
        for row in rows:
            if row["status"] == "sending" and not self.instance.gone(row["owner"]):
                continue
            adapter = self.adapters.get(row["platform"])
            if adapter is None or adapter.state != "connected":
                continue  # an instance connected to that platform takes it
            if row.get("attachment") and not await asyncio.to_thread(os.path.exists, str(row["attachment"]["path"])):
                continue  # the file is on another machine's disk: an instance there takes it
            seen = outgoing.c.owner.is_(None) if row["owner"] is None else outgoing.c.owner == row["owner"]
            claim = (update(outgoing).where(outgoing.c.id == row["id"], outgoing.c.status == row["status"], seen)
                     .values(status="sending", owner=self.instance.id))
            if not await self.store.run_write(lambda conn, c=claim: conn.execute(c).rowcount):
                continue
            taken += 1
            self.life.spawn(self.deliver_row(row), name="outgoing:send")
        return taken
