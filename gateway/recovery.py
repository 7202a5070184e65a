"""Finishing what was accepted but not finished: after a restart, or when another instance died.

An instance takes over an unfinished inbox row only when its owner is gone (``Instance.gone``: a process of
this machine that no longer runs, or a lease that ran out), claiming it with a conditional UPDATE so only
one instance wins — and only for an adapter it runs, after that adapter's credential lock is taken and
``start()`` has connected, so a recovered reply can actually be sent. A row whose answer is stored is only
delivered (the outbox says which chunks are out); a turn with stored steps resumes after its last step; a
command is not replayed (it was about the moment it was sent).
"""

from __future__ import annotations

from typing import Any

import structlog

from gateway.commands import CommandRegistry
from gateway.instance import Instance
from gateway.lanes import Lanes
from gateway.platforms.base import Accepted, InboundMessage, PlatformAdapter, parse_text_command
from gateway.store import Store

log = structlog.get_logger("herald.recovery")


class Recovery:
    def __init__(self, store: Store, instance: Instance, lanes: Lanes, commands: CommandRegistry) -> None:
        self.store = store
        self.instance = instance
        self.lanes = lanes
        self.commands = commands
        self.router: Any = None  # gateway.routing.SessionRouter: with several instances, sessions have owners

    async def recover(self, adapter: PlatformAdapter) -> int:
        """Take over ``adapter``'s unfinished rows whose owner is gone; returns how many were resumed."""
        resumed = 0
        rows = await self.store.inbox_unfinished(adapter.name)
        await self.instance.refresh()  # after the rows: their owners' heartbeats are all in this read
        gone = [row for row in rows if self.instance.gone(row["owner"], row["lease_until"])]
        if self.router is not None and self.router.enabled:
            # A session has one owner: its rows are taken over with its lease, in order (gateway/leases.py).
            for key, owner in dict.fromkeys((row["session_key"], row["owner"]) for row in gone):
                resumed += await self.router.take_over(key, owner)
            if resumed:
                log.info("inbox_recovered", platform=adapter.name, messages=resumed)
            return resumed
        for row in gone:
            if not await self.store.inbox_claim(row, self.instance.id, self.instance.lease()):
                continue  # another instance was quicker
            msg = InboundMessage.from_dict(row["payload"])
            if row["status"] == "replied" and row["reply"] is not None:
                item = Accepted(row["id"], msg, row["session_key"], resume_reply=row["reply"])
            elif self._is_command(msg):
                await self.store.inbox_set(row["id"], "cancelled", error="command interrupted by a restart",
                                           expected="pending")
                continue
            else:
                steps = await self.store.turn_steps(row["id"])
                item = Accepted(row["id"], msg, row["session_key"], resume_turn=steps is not None)
            self.lanes.submit(adapter, item, notify=False)
            resumed += 1
        if resumed:
            log.info("inbox_recovered", platform=adapter.name, messages=resumed)
        return resumed

    def _is_command(self, msg: InboundMessage) -> bool:
        if msg.command is not None:
            return True
        # Rows stored before adapters filled ``command``: a known /command in the text.
        parsed = parse_text_command(msg.text)
        return parsed is not None and self.commands.lookup(parsed[0].name) is not None
