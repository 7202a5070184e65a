"""Live interactions (an application command, a button press): acknowledged at once, answered through later.

Discord wants every interaction answered within 3 seconds and never delivers one twice, so the adapter
acknowledges it as soon as it arrives — a deferral ("Herald is thinking…" for a command, a silent update for a
button) — and keeps the ``discord.Interaction`` here for the 15 minutes its token lives. The command's answer
(``send``) or the presser's notice (``answer_press``) goes through it; the message's ``reply_handle`` names it
by id only (the token is a credential and never reaches the database). After a restart an id is unknown
here: the answer goes into the channel instead.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import discord
import structlog

log = structlog.get_logger("herald.discord")

TOKEN_LIFETIME = 14 * 60.0  # Discord's is 15 minutes; a minute of margin for the answer's own trip
ACK_WAIT = 3.0


@dataclass
class Live:
    interaction: discord.Interaction
    thinking: bool  # deferred with "thinking…": the first answer replaces it
    at: float = field(default_factory=time.monotonic)
    acked: asyncio.Future[bool] | None = None
    original_used: bool = False

    async def wait_acknowledged(self) -> bool:
        """True once the deferral went through (an answer before it would find no interaction to answer)."""
        if self.acked is None:
            return False
        try:
            return await asyncio.wait_for(asyncio.shield(self.acked), ACK_WAIT)
        except TimeoutError:
            return False


class Interactions:
    def __init__(self) -> None:
        self._live: OrderedDict[str, Live] = OrderedDict()
        self._acking: set[asyncio.Task[Any]] = set()

    def handle(self, interaction: discord.Interaction) -> dict[str, Any]:
        return {"interaction": str(interaction.id)}

    def get(self, handle: dict[str, Any] | None) -> Live | None:
        key = (handle or {}).get("interaction")
        live = self._live.get(key) if isinstance(key, str) else None
        if live is None or time.monotonic() - live.at > TOKEN_LIFETIME:
            return None
        return live

    def defer(self, interaction: discord.Interaction, *, thinking: bool, ephemeral: bool) -> Live:
        """Acknowledge ``interaction`` now (a task: the caller goes on at once) and keep it for its answers."""
        live = Live(interaction, thinking)
        live.acked = asyncio.get_running_loop().create_future()
        self._keep(live)
        self._spawn(self._defer(live, ephemeral))
        return live

    def refuse(self, interaction: discord.Interaction, text: str) -> None:
        """Answer ``interaction`` with ``text``, seen only by whoever sent it; nothing follows."""
        self._spawn(self._refuse(interaction, text))

    def _keep(self, live: Live) -> None:
        self._live[str(live.interaction.id)] = live
        now = time.monotonic()
        while self._live:
            oldest = next(iter(self._live.values()))
            if now - oldest.at <= TOKEN_LIFETIME and len(self._live) <= 10_000:
                break
            self._live.popitem(last=False)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro, name="discord:interaction")
        self._acking.add(task)
        task.add_done_callback(self._acking.discard)

    async def _defer(self, live: Live, ephemeral: bool) -> None:
        assert live.acked is not None
        try:
            await live.interaction.response.defer(ephemeral=ephemeral, thinking=live.thinking)
        except Exception as exc:
            log.warning("discord_interaction_ack_failed", interaction_id=live.interaction.id,
                        error=f"{type(exc).__name__}: {exc}")
            live.acked.set_result(False)
            return
        live.acked.set_result(True)

    async def _refuse(self, interaction: discord.Interaction, text: str) -> None:
        try:
            await interaction.response.send_message(text, ephemeral=True)
        except Exception as exc:
            log.warning("discord_interaction_ack_failed", interaction_id=interaction.id,
                        error=f"{type(exc).__name__}: {exc}")

    async def stop(self) -> None:
        for task in list(self._acking):
            task.cancel()
        await asyncio.gather(*self._acking, return_exceptions=True)
        self._live.clear()
