"""Finishing what was accepted but not finished: after a restart, or when another instance died.

An instance takes over an unfinished inbox row only when its owner is gone (``Instance.gone``: a process of
this machine that no longer runs, or a lease that ran out), claiming it with a conditional UPDATE so only
one instance wins — and only for an adapter it runs, after that adapter's credential lock is taken and
``start()`` has connected, so a recovered reply can actually be sent. A row whose answer is stored is only
delivered (the outbox says which chunks are out); a turn with stored steps resumes after its last step; a
command is not replayed (it was about the moment it was sent): its sender is told it was not run; a message
whose turns took the daemon down ``gateway.max_attempts`` times is parked, not run again. Whether a
row is a command is decided as ``accept`` decides it (``CommandRegistry.resolve``): "/etc is full, why?"
is prose and is answered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog

from gateway.cluster.instance import Instance
from gateway.commands.registry import CommandRegistry
from gateway.platforms.base import Accepted, CommandCall, InboundMessage, PlatformAdapter, parse_text_command
from gateway.ports import Notifier
from gateway.storage.store import Store
from gateway.turns.attempts import Attempts
from gateway.turns.lanes import Lanes

log = structlog.get_logger("herald.recovery")

TakeOver = Callable[[str, str | None], Awaitable[int]]  # (session key, its gone owner) -> rows resumed here


class Recovery:
    def __init__(self, store: Store, instance: Instance, lanes: Lanes, commands: CommandRegistry,
                 notifier: Notifier, take_over: TakeOver | None = None, attempts: Attempts | None = None) -> None:
        self.store = store
        self.instance = instance
        self.lanes = lanes
        self.commands = commands
        self.notifier = notifier
        # With several instances, sessions have owners: a gone owner's rows are taken over with its session's
        # lease (SessionRouter.take_over).
        self.take_over = take_over
        # A message whose turns kept taking the daemon down is parked here, not dispatched (turns/attempts.py).
        self.attempts = attempts

    def hold(self, adapter: PlatformAdapter) -> None:
        """Before ``adapter`` connects: its new messages wait in their lanes until ``first_recovery`` has put
        what it left unfinished ahead of them (a chat's answers keep the order of its messages)."""
        self.lanes.hold(adapter.name)

    def release(self, adapter: PlatformAdapter) -> None:
        self.lanes.release(adapter.name)

    async def first_recovery(self, adapter: PlatformAdapter) -> int:
        try:
            return await self.recover(adapter)
        finally:
            self.release(adapter)

    async def recover(self, adapter: PlatformAdapter) -> int:
        """Take over ``adapter``'s unfinished rows whose owner is gone; returns how many were resumed."""
        resumed = 0
        rows = await self.store.inbox.unfinished(adapter.name)
        await self.instance.refresh()  # after the rows: their owners' heartbeats are all in this read
        gone = [row for row in rows if self.instance.gone(row["owner"], row["lease_until"])]
        if self.take_over is not None:
            # A session has one owner: its rows are taken over with its lease, in order (gateway/cluster/leases.py).
            for key, owner in dict.fromkeys((row["session_key"], row["owner"]) for row in gone):
                resumed += await self.take_over(key, owner)
            if resumed:
                log.info("inbox_recovered", platform=adapter.name, messages=resumed)
            return resumed
        for row in gone:
            if not await self.store.inbox.claim(row, self.instance.id, self.instance.lease()):
                continue  # another instance was quicker
            msg = InboundMessage.from_dict(row["payload"])
            command = command_of(msg, row["owner"] is None, self.commands)
            if row["status"] == "replied" and row["reply"] is not None:
                item = Accepted(row["id"], msg, row["session_key"], resume_reply=row["reply"], recovered=True)
            elif command is not None:
                await drop_command(self.store, self.notifier, adapter, row["id"], msg, command)
                continue
            elif self.attempts is not None and self.attempts.exhausted(row):
                await self.attempts.park(row["id"], msg)
                continue
            else:
                steps = await self.store.messages.turn_steps(row["id"])
                item = Accepted(row["id"], msg, row["session_key"], resume_turn=steps is not None,
                                recovered=True)
            self.lanes.submit(adapter, item, notify=False)
            resumed += 1
        if resumed:
            log.info("inbox_recovered", platform=adapter.name, messages=resumed)
        return resumed


def command_of(msg: InboundMessage, legacy: bool, commands: CommandRegistry) -> CommandCall | None:
    """The command a stored row carries, as ``accept`` decided it: a typed ``/word`` the registry does not know
    is prose for the model; a native command stays one."""
    call = msg.command
    if call is None and legacy:
        # Rows stored before adapters filled ``command`` (and before rows had owners): a /command in the
        # text. Not for newer rows: their adapter said the text is no command (Slack's prefix is "!").
        parsed = parse_text_command(msg.text)
        call = parsed[0] if parsed else None
    return commands.resolve(call)


async def drop_command(store: Store, notifier: Notifier, adapter: PlatformAdapter, inbox_id: int,
                       msg: InboundMessage, command: CommandCall) -> None:
    """A command cut off by a restart (or the death of the instance running it) is not replayed: it was about
    the moment it was sent. Its sender is told."""
    if await store.inbox.mark(inbox_id, "cancelled", error="command interrupted by a restart", expected="pending"):
        name = adapter.capabilities.command(command.name)
        await notifier.notify(msg.source, f"↻ Herald restarted before it could run {name}: it was not run. Send "
                                          "it again if you still want it.")
