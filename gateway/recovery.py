"""Finishing what was accepted but not finished: after a restart, or when another instance died.

An instance takes over an unfinished inbox row only when its owner is gone (``Instance.gone``: a process of
this machine that no longer runs, or a lease that ran out), claiming it with a conditional UPDATE so only
one instance wins — and only for an adapter it runs, after that adapter's credential lock is taken and
``start()`` has connected, so a recovered reply can actually be sent. A row whose answer is stored is only
delivered (the outbox says which chunks are out); a turn with stored steps resumes after its last step; a
command is not replayed (it was about the moment it was sent): its sender is told it was not run. Whether a
row is a command is decided as ``accept`` decides it (``CommandRegistry.resolve``): "/etc is full, why?"
is prose and is answered.
"""

from __future__ import annotations

import structlog

from gateway.commands import CommandRegistry
from gateway.instance import Instance
from gateway.lanes import Lanes
from gateway.platforms.base import Accepted, CommandCall, InboundMessage, PlatformAdapter, parse_text_command
from gateway.ports import Notifier
from gateway.store import Store

log = structlog.get_logger("herald.recovery")


class Recovery:
    def __init__(self, store: Store, instance: Instance, lanes: Lanes, commands: CommandRegistry,
                 notifier: Notifier) -> None:
        self.store = store
        self.instance = instance
        self.lanes = lanes
        self.commands = commands
        self.notifier = notifier

    async def recover(self, adapter: PlatformAdapter) -> int:
        """Take over ``adapter``'s unfinished rows whose owner is gone; returns how many were resumed."""
        resumed = 0
        rows = await self.store.inbox_unfinished(adapter.name)
        await self.instance.refresh()  # after the rows: their owners' heartbeats are all in this read
        for row in rows:
            if not self.instance.gone(row["owner"], row["lease_until"]):
                continue
            if not await self.store.inbox_claim(row, self.instance.id, self.instance.lease()):
                continue  # another instance was quicker
            msg = InboundMessage.from_dict(row["payload"])
            command = self._command(msg, legacy=row["owner"] is None)
            if row["status"] == "replied" and row["reply"] is not None:
                item = Accepted(row["id"], msg, row["session_key"], resume_reply=row["reply"], recovered=True)
            elif command is not None:
                if await self.store.inbox_set(row["id"], "cancelled", error="command interrupted by a restart",
                                              expected="pending"):
                    name = adapter.capabilities.command(command.name)
                    await self.notifier.notify(msg.source, f"↻ Herald restarted before it could run {name}: it "
                                                           "was not run. Send it again if you still want it.")
                continue
            else:
                steps = await self.store.turn_steps(row["id"])
                item = Accepted(row["id"], msg, row["session_key"], resume_turn=steps is not None,
                                recovered=True)
            self.lanes.submit(adapter, item, notify=False)
            resumed += 1
        if resumed:
            log.info("inbox_recovered", platform=adapter.name, messages=resumed)
        return resumed

    def _command(self, msg: InboundMessage, legacy: bool) -> CommandCall | None:
        """The command the row carries, as ``accept`` decided it: a typed ``/word`` the registry does not know
        is prose for the model; a native command stays one."""
        call = msg.command
        if call is None and legacy:
            # Rows stored before adapters filled ``command`` (and before rows had owners): a /command in the
            # text. Not for newer rows: their adapter said the text is no command (Slack's prefix is "!").
            parsed = parse_text_command(msg.text)
            call = parsed[0] if parsed else None
        return self.commands.resolve(call)
