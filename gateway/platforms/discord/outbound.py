"""Discord outbound: the agent's markdown in Discord's dialect, messages sent, edited, shown as "typing".

Discord renders most of markdown itself (bold, italic, headings up to ###, lists, quotes, code blocks, masked
links); ``render`` rewrites only what it shows as raw text: tables (a code block with aligned columns, or a
list when too wide), deeper headings, rules and inline images. ``measure`` counts UTF-16 units, which is never
less than Discord's character count, so delivery's chunks fit 2000 as sent.

Buttons become ``discord.ui`` components whose ``custom_id`` is the button's id itself (ids over 100 characters
travel as a digest: gateway/platforms/buttons.py): a press reaches the gateway by its id alone, so it still
resolves after a restart. They are sent through discord.py's HTTP client, not ``Messageable.send``, which would
keep every persistent view in memory for good. The answer to an application command goes through its interaction (the
deferred "thinking…" response, then follow-ups), ephemeral as the gateway asks.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import discord
import structlog
from discord.http import handle_message_parameters
from discord.utils import MISSING

from gateway.kernel.chunking import MARKDOWN, Dialect
from gateway.platforms.base import Button, Outbound, OutboundMessage, TransientError
from gateway.platforms.buttons import ButtonIds
from gateway.platforms.discord.transport import GONE_INTERACTION, NONCE_WINDOW, error_code, map_error, nonce

if TYPE_CHECKING:
    from gateway.platforms.discord.interactions import Interactions

log = structlog.get_logger("herald.discord")

MAX_CHARS = 2000
# Markdown's emphasis and Discord's ||spoiler||: delivery's chunking cuts none of them.
DIALECT = Dialect("discord", ("||", *MARKDOWN.emphasis))
CUSTOM_ID_MAX = 100
LABEL_MAX = 80
TYPING_DELAY = 0.5  # seconds a turn runs before "typing…" is shown: a fast answer costs no extra request
ALLOWED_MENTIONS = discord.AllowedMentions(everyone=False, users=False, roles=False, replied_user=True)
STYLES = {"default": discord.ButtonStyle.secondary, "primary": discord.ButtonStyle.primary,
          "danger": discord.ButtonStyle.danger}

# ---- rendering --------------------------------------------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_DEEP_HEADING = re.compile(r"^#{4,6}\s+(.+?)\s*#*\s*$")
_RULE = re.compile(r"^\s*([-*_])(\s*\1){2,}\s*$")
_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
TABLE_WIDTH = 60  # wider tables read better as lists on a phone


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _cells(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)]


def _table(rows: list[list[str]]) -> list[str]:
    header, body = rows[0], rows[1:]
    columns = max(len(r) for r in rows)
    rows = [r + [""] * (columns - len(r)) for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(columns)]
    if sum(widths) + 3 * (columns - 1) <= TABLE_WIDTH:
        lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        lines.insert(1, "-+-".join("-" * w for w in widths))
        return ["```", *lines, "```"]
    out: list[str] = []
    for r in body:
        first, rest = r[0], [f"{h}: {c}" for h, c in zip(header[1:], r[1:], strict=False) if c]
        out.append(f"- **{first}**" + (" — " + "; ".join(rest) if rest else ""))
    return out


def render(markdown: str) -> str:
    """Markdown -> what Discord shows as meant. Code blocks pass untouched."""
    lines = markdown.split("\n")
    out: list[str] = []
    in_code = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if _FENCE.match(line):
            in_code = not in_code
            out.append(line)
            i += 1
            continue
        if in_code:
            out.append(line)
            i += 1
            continue
        if "|" in line and i + 1 < len(lines) and _TABLE_RULE.match(lines[i + 1]):
            rows = [_cells(line)]
            i += 2
            while i < len(lines) and "|" in lines[i] and lines[i].strip():
                rows.append(_cells(lines[i]))
                i += 1
            out.extend(_table(rows))
            continue
        heading = _DEEP_HEADING.match(line)
        if heading:
            line = f"**{heading.group(1)}**"
        elif _RULE.match(line):
            line = ""
        else:
            line = _IMAGE.sub(lambda m: f"[{m.group(1) or 'image'}]({m.group(2)})", line)
        out.append(line)
        i += 1
    return "\n".join(out)


# ---- sending ----------------------------------------------------------------------------------------------


class DiscordOutbound(Outbound):
    def __init__(self, client: Callable[[], discord.Client | None], interactions: Interactions) -> None:
        self._get_client = client
        self.interactions = interactions
        self.buttons = ButtonIds(CUSTOM_ID_MAX)  # a component's custom_id is at most 100 characters
        self._typing: dict[str, asyncio.Task[None]] = {}

    def render(self, markdown: str) -> str:
        return render(markdown)

    def measure(self, text: str) -> int:
        return utf16_len(text)

    def _client(self) -> discord.Client:
        client = self._get_client()
        if client is None or client.is_closed():
            raise TransientError("discord is not connected right now")
        return client

    # ---- buttons ---------------------------------------------------------------------------------

    def view(self, buttons: list[Button]) -> discord.ui.View | None:
        """Persistent components (no timeout); discord.py lays them out five to a row."""
        if not buttons:
            return None
        view = discord.ui.View(timeout=None)
        for b in buttons[:25]:
            view.add_item(discord.ui.Button(label=b.label[:LABEL_MAX] or "…", custom_id=self.buttons.encode(b.id),
                                            style=STYLES.get(b.style, discord.ButtonStyle.secondary)))
        return view

    # ---- messages --------------------------------------------------------------------------------

    async def send(self, chat_id: str, text: str, message: OutboundMessage, *,
                   idempotency_key: str | None = None) -> list[str]:
        target = message.thread_id or chat_id
        self._cancel_typing(target)
        text = text if text.strip() else "…"
        if message.reply_handle and not message.buttons:
            sent = await self._answer_interaction(text, message)
            if sent is not None:
                return [sent]
        client = self._client()
        view = self.view(message.buttons)
        try:
            reference = None
            if message.reply_to and message.reply_to.isdigit():
                reference = {"message_id": int(message.reply_to), "channel_id": int(target),
                             "fail_if_not_exists": False}
            with handle_message_parameters(content=text, view=view if view is not None else MISSING,
                                           nonce=nonce(idempotency_key, target, message.reply_to, text),
                                           allowed_mentions=ALLOWED_MENTIONS,
                                           message_reference=reference or MISSING) as params:
                data = await client.http.send_message(int(target), params=params)
        except Exception as exc:
            raise map_error(exc, NONCE_WINDOW) from exc
        return [str(data["id"])]

    async def _answer_interaction(self, text: str, message: OutboundMessage) -> str | None:
        """Through the interaction the message answers, while it lives; None: post into the channel instead."""
        live = self.interactions.get(message.reply_handle)
        if live is None or not await live.wait_acknowledged():
            return None
        # The first answer replaces "Herald is thinking…": an edit, which lands once however often it is repeated.
        # A follow-up has no nonce: repeated, it shows twice.
        replaces = live.thinking and not live.original_used
        try:
            if replaces:
                sent = await live.interaction.edit_original_response(content=text)
                live.original_used = True
            else:
                sent = await live.interaction.followup.send(text, ephemeral=message.ephemeral, wait=True)
        except discord.HTTPException as exc:
            if error_code(exc) in GONE_INTERACTION:
                log.info("discord_interaction_gone", error=str(exc))
                return None
            raise map_error(exc) from exc
        except Exception as exc:
            raise map_error(exc, math.inf if replaces else 0.0) from exc
        return str(sent.id)

    async def edit(self, chat_id: str, message_id: str, text: str | None, buttons: list[Button] | None = None,
                   *, thread_id: str | None = None) -> None:
        client = self._client()
        view = self.view(buttons or [])
        try:
            with handle_message_parameters(content=text if text is not None else MISSING, view=view,
                                           allowed_mentions=ALLOWED_MENTIONS) as params:
                await client.http.edit_message(int(thread_id or chat_id), int(message_id), params=params)
        except Exception as exc:
            raise map_error(exc) from exc

    # ---- typing ----------------------------------------------------------------------------------

    def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        """Show "typing…" unless the answer beats ``TYPING_DELAY``: a fast reply costs no extra request."""
        target = thread_id or chat_id
        if target not in self._typing:
            self._typing[target] = asyncio.create_task(self._typing_later(target))

    async def _typing_later(self, target: str) -> None:
        try:
            await asyncio.sleep(TYPING_DELAY)
        finally:
            if self._typing.get(target) is asyncio.current_task():
                del self._typing[target]
        try:
            await self._client().http.send_typing(int(target))
        except Exception as exc:
            log.debug("discord_typing_failed", channel_id=target, error=str(exc))

    def _cancel_typing(self, target: str) -> None:
        task = self._typing.pop(target, None)
        if task is not None:
            task.cancel()

    def stop(self) -> None:
        for task in self._typing.values():
            task.cancel()
        self._typing.clear()
