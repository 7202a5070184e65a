"""Dispatch (guard 2; the guards are defined in accept.py): an accepted message goes to its session. A command
runs inline, reaching even a busy session, and is answered here; anything else joins the session's lane
synchronously, so messages keep their arrival order. A session's commands and the messages sent after them
keep their order too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from gateway.commands.registry import CommandContext, CommandRegistry
from gateway.inbound.access import AccessControl
from gateway.kernel.logs import redact
from gateway.outbound.delivery import Delivery
from gateway.platforms.base import Accepted, OutboundMessage, PlatformAdapter
from gateway.ports import Lifecycle
from gateway.storage.store import Store
from gateway.turns.lanes import Lanes

log = structlog.get_logger("herald.inbound")

Dispatch = Callable[[PlatformAdapter, Accepted], None]
# A feature's first look at a message (synchronous): True when it took the message (an answer to a question
# the agent asked in that chat), which then joins no lane.
Answers = Callable[[PlatformAdapter, Accepted], bool]


class Dispatcher:
    def __init__(self, store: Store, access: AccessControl, commands: CommandRegistry, lanes: Lanes,
                 delivery: Delivery, life: Lifecycle, answers: Answers | None = None,
                 edits: Dispatch | None = None) -> None:
        """``answers``: a feature's first look at each message (the agent's questions); ``edits``: where an
        edited message goes instead of a lane (edits.py)."""
        self.answers = answers
        self.edits = edits
        self.store = store
        self.access = access
        self.commands = commands
        self.lanes = lanes
        self.delivery = delivery
        self.life = life
        # Per session, the last command still running, or a message waiting behind one: what the session sends
        # next runs after it, so commands and messages keep the order they were sent in.
        self._in_flight: dict[str, asyncio.Task[None]] = {}

    def dispatch(self, adapter: PlatformAdapter, item: Accepted) -> None:
        """Commands inline (they must reach a busy session), everything else into the session's lane — after
        the session's commands still running: a message sent right after /new, /undo or /model is answered in
        what that command leaves, not in what it was still changing."""
        if item.msg.edit_of is not None and self.edits is not None:
            self.edits(adapter, item)
            return
        if item.command is None and self.answers is not None and self.answers(adapter, item):
            if self.lanes.dispatched is not None:
                self.lanes.dispatched.add(item.inbox_id)
            return
        before = self._in_flight.get(item.key)
        if item.command is None and before is None:
            self.lanes.submit(adapter, item)
            return
        if self.lanes.dispatched is not None:
            self.lanes.dispatched.add(item.inbox_id)
        step = self.run_command if item.command is not None else self._submit
        task = self.life.spawn(self._after(before, step, adapter, item),
                               name=f"command:{item.command.name}" if item.command else "lane:after-command")
        self._in_flight[item.key] = task
        task.add_done_callback(lambda done, key=item.key: self._in_flight.pop(key, None)
                               if self._in_flight.get(key) is done else None)

    async def _submit(self, adapter: PlatformAdapter, item: Accepted) -> None:
        self.lanes.submit(adapter, item)

    @staticmethod
    async def _after(before: asyncio.Task[None] | None,
                     step: Callable[[PlatformAdapter, Accepted], Awaitable[None]],
                     adapter: PlatformAdapter, item: Accepted) -> None:
        if before is not None:
            await asyncio.wait({before})
        await step(adapter, item)

    async def run_command(self, adapter: PlatformAdapter, item: Accepted) -> None:
        assert item.command is not None
        call = item.command
        source = item.msg.source
        structlog.contextvars.bind_contextvars(session_key=item.key, platform=adapter.name)
        try:
            command = self.commands.lookup(call.name)
            admin = self.access.admin(source, adapter.trusted)
            caps = adapter.capabilities
            if command is None:
                reply: str | None = (f"Unknown command {caps.command(call.name)}. "
                                     f"{caps.command('help')} lists the commands.")
            elif not command.available_on(adapter.name):
                reply = f"{caps.command(command.name)} is not available here."
            elif command.admin_only and not admin:
                reply = f"{caps.command(command.name)} is for admins only."
            else:
                reply = await command.handler(CommandContext(adapter, item.msg, item.key, call.args, admin))
            await self.store.inbox.mark(item.inbox_id, "done", expected="pending")
            if reply:
                await self._reply(adapter, item, reply)
        except Exception as exc:
            log.exception("command_failed", command=call.name)
            await self.store.inbox.mark(item.inbox_id, "failed", error=redact(str(exc)), expected="pending")
            await self._reply(adapter, item, f"{adapter.capabilities.command(call.name)} failed: {type(exc).__name__}. "
                                             "Details are in the log.")
        finally:
            structlog.contextvars.unbind_contextvars("session_key", "platform")

    async def _reply(self, adapter: PlatformAdapter, item: Accepted, text: str) -> None:
        msg = item.msg
        native = bool(msg.command and msg.command.native)
        out = OutboundMessage(text, thread_id=msg.source.thread_id, reply_handle=msg.reply_handle,
                              ephemeral=native)
        try:
            await self.delivery.deliver(adapter, msg.source.chat_id, out)
        except Exception as exc:
            log.warning("command_reply_failed", platform=adapter.name, chat_id=msg.source.chat_id, error=str(exc))
