"""The way in: ``accept`` (guard 1).

``accept`` stores the message in the inbox (UNIQUE(platform, platform_message_id) drops a second copy),
checks access and returns as soon as the row is durable, so the adapter can acknowledge its platform at
once. Before returning it hands the message to the dispatch (guard 2, dispatch.py); with several instances
on one database, the session's owner stores it instead (``route``, routing.py). Button presses are taken
the same way: ``press`` returns at once and the presser's notice follows through the adapter's
``answer_press``.

The two guards keep commands and the conversation apart (the rest of the code names them so):

- guard 1, ``accept``: a message goes no further unless it is stored and its sender may talk, and whether it
  is a command is decided here, once (``CommandRegistry.resolve``: a typed ``/word`` the registry does not
  know is prose for the model), before anything could queue it behind a running turn;
- guard 2, the dispatch (``Dispatcher``, dispatch.py): a command runs in a task of its own, never through the
  session's lane, so it reaches a busy session (/stop, /approve) and never the model; it waits only for the
  session's previous command.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

from gateway.cluster.instance import Instance
from gateway.commands.registry import CommandRegistry
from gateway.config import Config
from gateway.inbound.access import AccessControl
from gateway.inbound.dispatch import Dispatch
from gateway.kernel.faults import Faults, Unavailable
from gateway.kernel.metrics import Counters
from gateway.kernel.untrusted import clean_text
from gateway.platforms.base import (
    Accepted,
    ButtonPress,
    InboundMessage,
    PlatformAdapter,
    ShuttingDown,
    Source,
)
from gateway.ports import ButtonHandler, Lifecycle, Notifier
from gateway.session.keys import session_key
from gateway.storage.store import Store

log = structlog.get_logger("herald.inbound")

# The longest message a turn takes (the web API's own limit too); Telegram allows 4 096, Discord 4 000.
MAX_MESSAGE_CHARS = 32_000

Denied = Callable[[PlatformAdapter, Source], None]
# Several instances on one database (SessionRouter.accept): the message stored as its session owner's.
Route = Callable[[PlatformAdapter, InboundMessage, str, dict[str, Any]], Awaitable[Accepted | None]]


class Inbound:
    def __init__(self, cfg: Config, store: Store, access: AccessControl, commands: CommandRegistry,
                 dispatch: Dispatch, notifier: Notifier, instance: Instance, life: Lifecycle, counters: Counters,
                 faults: Faults | None = None, *, route: Route | None = None,
                 on_denied: Denied = lambda _adapter, _source: None,
                 buttons: Mapping[str, ButtonHandler] | None = None) -> None:
        """``on_denied``: a stranger's message was refused (pairing answers them); ``buttons``: button id
        prefix -> the handler of the feature that sent them (approvals)."""
        self.cfg = cfg
        self.store = store
        self.access = access
        self.commands = commands
        self.dispatch = dispatch
        self.notifier = notifier
        self.instance = instance
        self.life = life
        self.counters = counters
        self.faults = faults if faults is not None else Faults()
        self.route = route
        self.on_denied = on_denied
        self.buttons = dict(buttons or {})
        # Messages whose insert failed as the database went away: it may have been committed all the same.
        self._uncertain: set[tuple[str, str]] = set()

    def key_for(self, source: Source) -> str:
        return session_key(source, self.cfg.sessions.per_user_in_groups)

    # ---- messages --------------------------------------------------------------------------------

    async def accept(self, adapter: PlatformAdapter, msg: InboundMessage) -> Accepted | None:
        if self.life.stopping:
            raise ShuttingDown()
        if not msg.received_at:
            msg.received_at = time.time()
        key = self.key_for(msg.source)
        msg.text = clean_text(msg.text)  # a platform's lone surrogate or NUL must not fail the insert below
        # A sender the adapter verified by a credential of their own (an API key) may talk, like the owner.
        allowed = self.access.allowed(msg.source, adapter.trusted or adapter.verified_senders)
        if len(msg.text) > MAX_MESSAGE_CHARS and allowed:
            return await self._too_long(adapter, msg, key)
        payload = msg.to_dict()
        if not allowed:
            # Stored all the same (finished), so a redelivery is a duplicate and the stranger hears once.
            if await self.store.inbox.add(adapter.name, msg.platform_message_id, key, payload, owner=self.instance.id,
                                          status="denied", wait=False) is None:
                return self._duplicate(adapter, msg)
            self.counters.messages_denied += 1
            log.info("sender_denied", platform=adapter.name, user_id=msg.source.user_id)
            self.on_denied(adapter, msg.source)
            return None
        if self.route is not None:
            now = time.time()
            row = {"platform": adapter.name, "platform_message_id": msg.platform_message_id, "session_key": key,
                   "payload": payload, "status": "pending", "created_at": now, "updated_at": now}
            routed = await self.route(adapter, msg, key, row)
            if routed is None:
                return self._duplicate(adapter, msg)
            self.counters.messages_accepted += 1
            return routed
        # The way in never waits for a database that is down (or a full disk): the message is refused
        # (``Unavailable``), so its platform keeps it and delivers it again; waiting would hold the platform's
        # event past its ack deadline, and an HTTP caller would not know whether it was taken.
        try:
            inbox_id = await self.store.inbox.add(adapter.name, msg.platform_message_id, key, payload,
                                                  owner=self.instance.id, lease_until=self.instance.lease(),
                                                  wait=False)
        except Unavailable:
            if len(self._uncertain) > 10_000:  # callers who never sent again: forget them, not the process's memory
                self._uncertain.clear()
            self._uncertain.add((adapter.name, msg.platform_message_id))
            raise
        if inbox_id is None:
            if (adapter.name, msg.platform_message_id) in self._uncertain:
                return await self._stored_after_all(adapter, msg, key)
            return self._duplicate(adapter, msg)
        self._uncertain.discard((adapter.name, msg.platform_message_id))
        self.counters.messages_accepted += 1
        item = Accepted(inbox_id, msg, key, self.commands.resolve(msg.command))
        self.dispatch(adapter, item)
        return item

    async def _too_long(self, adapter: PlatformAdapter, msg: InboundMessage, key: str) -> None:
        """A message longer than any turn should take (a platform's own limit is usually far lower): recorded
        as rejected — so a redelivery is a duplicate — and its sender told, rather than a model call with a
        megabyte of text and a reply in hundreds of chunks."""
        length = len(msg.text)
        msg.text = msg.text[:200]  # the row keeps a sample, not the megabyte
        if await self.store.inbox.add(adapter.name, msg.platform_message_id, key, msg.to_dict(),
                                      owner=self.instance.id, status="rejected", wait=False) is None:
            return self._duplicate(adapter, msg)
        self.faults.record("bad_request", door=adapter.name, kind="message too long")
        self.life.spawn(self.notifier.notify(msg.source, f"⚠️ That message is too long for me ({length:,} "
                                                         f"characters; at most {MAX_MESSAGE_CHARS:,}). Please send "
                                                         "it in parts, or as a file."), name="inbound:too-long")
        return None

    async def _stored_after_all(self, adapter: PlatformAdapter, msg: InboundMessage, key: str) -> Accepted | None:
        """The platform redelivered a message whose insert failed with the database going away — and that
        insert may have been committed all the same (the server took the COMMIT, the connection dropped before
        its answer). Then the row is ours and pending, and nothing here dispatched it: take it now, or it
        waits unanswered (its owner, this instance, is not gone, so no recovery takes it)."""
        self._uncertain.discard((adapter.name, msg.platform_message_id))
        row = await self.store.inbox.find(adapter.name, msg.platform_message_id)
        if row is None or row["status"] != "pending" or row["owner"] != self.instance.id:
            return self._duplicate(adapter, msg)
        log.info("inbox_stored_after_all", platform=adapter.name, inbox_id=row["id"])
        self.counters.messages_accepted += 1
        item = Accepted(row["id"], msg, key, self.commands.resolve(msg.command))
        self.dispatch(adapter, item)
        return item

    def _duplicate(self, adapter: PlatformAdapter, msg: InboundMessage) -> None:
        self.counters.messages_duplicate += 1
        log.info("duplicate_dropped", platform=adapter.name, platform_message_id=msg.platform_message_id)
        return None

    # ---- button presses ---------------------------------------------------------------------------

    def press(self, adapter: PlatformAdapter, press: ButtonPress) -> None:
        self.life.spawn(self._press(adapter, press), name="press")

    async def _press(self, adapter: PlatformAdapter, press: ButtonPress) -> None:
        notice: str | None
        try:
            notice = await self.pressed(adapter, press)
        except Exception as exc:
            log.exception("button_failed", button_id=press.button_id)
            notice = f"That did not work ({type(exc).__name__})."
        try:
            shown = await adapter.answer_press(press, notice)
        except Exception as exc:
            log.info("press_answer_failed", platform=adapter.name, error=str(exc))
            shown = False
        if notice and not shown:
            await self.notifier.notify(press.source, notice)

    async def pressed(self, adapter: PlatformAdapter, press: ButtonPress) -> str | None:
        """The notice for whoever pressed."""
        if not self.access.allowed(press.source, adapter.trusted):
            log.info("button_denied", platform=adapter.name, user_id=press.source.user_id)
            return "You are not allowed to use this bot."
        handler = self.buttons.get(press.button_id.split(":", 1)[0])
        if handler is None:
            return "This button is no longer active."
        result: Any = await handler(adapter, press)
        return result
