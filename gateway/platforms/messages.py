"""The contract's data: where a message came from (``Source``), what came in (``InboundMessage``, ``ButtonPress``),
what goes out (``OutboundMessage`` with ``Button``s and ``Attachment``s), what a platform can do (``Capabilities``),
and what passed the inbox (``Accepted``). Adapters import them from gateway/platforms/base.py, the contract.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from gateway.kernel.chunking import MARKDOWN, Dialect

ChatType = Literal["dm", "group", "channel"]
ButtonStyle = Literal["default", "primary", "danger"]


@dataclass(frozen=True, slots=True)
class Source:
    """Where a message came from: enough to build a session key and to answer."""

    platform: str
    chat_id: str
    user_id: str
    chat_type: ChatType = "dm"
    thread_id: str | None = None
    user_name: str | None = None
    # The level above the chat where a platform has one: a Discord guild, a Slack workspace (team).
    scope: str | None = None
    # The groups the sender holds in ``scope`` where the platform has them (Discord roles), as the adapter
    # read them with the event: the access check admits a sender by role (a platform's ``allowed_roles``).
    roles: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = {
            "platform": self.platform, "chat_id": self.chat_id, "user_id": self.user_id,
            "chat_type": self.chat_type, "thread_id": self.thread_id, "user_name": self.user_name,
            "scope": self.scope,
        }
        if self.roles:
            d["roles"] = list(self.roles)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Source:
        return cls(
            platform=d["platform"], chat_id=d["chat_id"], user_id=d["user_id"],
            chat_type=d.get("chat_type", "dm"), thread_id=d.get("thread_id"), user_name=d.get("user_name"),
            scope=d.get("scope"), roles=tuple(d.get("roles") or ()),
        )


@dataclass(frozen=True, slots=True)
class CommandCall:
    """A command as the platform delivered it.

    ``native``: sent through the platform's own command mechanism (a Slack slash command, a Discord
    application command), so it is meant as a command even when the name is unknown. A typed ``/word``
    is not native: an unknown name there is prose ("/etc is full, why?") and goes to the model.
    """

    name: str
    args: str = ""
    native: bool = False


_TEXT_COMMAND = re.compile(r"^/([A-Za-z][A-Za-z0-9_]{0,31})(?:@(\S+))?(?:\s+(.*))?$", re.S)


def parse_text_command(text: str, prefix: str = "/") -> tuple[CommandCall, str | None] | None:
    """``/name[@bot] args`` -> (CommandCall, bot) by syntax alone; None for anything else.

    Whether ``name`` is a command is for the gateway to say (unknown names are prose); ``bot`` is the
    addressee some platforms allow (``/help@HeraldBot``), for the adapter to check.
    """
    stripped = text.strip()
    if prefix != "/":
        if not stripped.startswith(prefix):
            return None
        stripped = "/" + stripped[len(prefix):]
    m = _TEXT_COMMAND.match(stripped)
    if not m:
        return None
    return CommandCall(m.group(1).lower(), (m.group(3) or "").strip()), m.group(2)


@dataclass(slots=True)
class InboundMessage:
    source: Source
    text: str
    platform_message_id: str
    attachments: list[str] = field(default_factory=list)
    reply_to: str | None = None
    received_at: float = 0.0
    command: CommandCall | None = None
    # Platform-specific and opaque to the core (an interaction token, a response_url): handed back to the
    # adapter on the answers to this message. JSON-serialisable, because it is stored with the message.
    reply_handle: dict[str, Any] | None = None
    # Work the adapter left for after the acknowledgement, platform-specific and JSON-serialisable (stored
    # with the message, so a restart does it again): ``{"files": [ref, ...]}`` for the files the message came
    # with (``PlatformAdapter.download`` fetches one ref), anything else the adapter's own ``prepare`` reads.
    # The gateway calls ``adapter.prepare(msg)`` before the message's turn; it fills ``attachments``.
    pending: dict[str, Any] | None = None
    # An edit of an earlier message: that message's ``platform_message_id``. The edit's own id names the edit
    # (the message's id and its edit time), so an edit event delivered twice is one inbox row.
    edit_of: str | None = None
    # What the sender called each attachment (path -> name), for what the gateway tells them about it.
    names: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "source": self.source.to_dict(), "text": self.text,
            "platform_message_id": self.platform_message_id, "attachments": list(self.attachments),
            "reply_to": self.reply_to, "received_at": self.received_at,
        }
        if self.command is not None:
            d["command"] = {"name": self.command.name, "args": self.command.args, "native": self.command.native}
        if self.reply_handle is not None:
            d["reply_handle"] = self.reply_handle
        if self.pending:
            d["pending"] = self.pending
        if self.edit_of is not None:
            d["edit_of"] = self.edit_of
        if self.names:
            d["names"] = self.names
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InboundMessage:
        command = d.get("command")
        return cls(
            source=Source.from_dict(d["source"]), text=d["text"], platform_message_id=d["platform_message_id"],
            attachments=list(d.get("attachments") or []), reply_to=d.get("reply_to"),
            received_at=d.get("received_at", 0.0),
            command=CommandCall(command["name"], command.get("args", ""), command.get("native", False))
            if command else None,
            reply_handle=d.get("reply_handle"), pending=d.get("pending"), edit_of=d.get("edit_of"),
            names=dict(d.get("names") or {}),
        )


@dataclass(slots=True)
class Prepared:
    """What ``PlatformAdapter.prepare`` made of a message's pending work."""

    # One line per file the user sent that the agent will not have, with why ("report.pdf: bigger than the
    # 20 MB limit"): the gateway tells the user before the turn runs with what there is.
    problems: list[str] = field(default_factory=list)
    # The message turned out not to be for the agent after all (a thread the bot is not in): why, for the
    # log. The gateway closes its inbox row without a turn.
    drop: str | None = None


@dataclass(frozen=True, slots=True)
class Button:
    id: str
    label: str
    style: ButtonStyle = "default"


@dataclass(frozen=True, slots=True)
class Attachment:
    path: str                 # absolute path on the daemon's disk (the workspace or the media folder)
    filename: str
    mime: str
    caption: str | None = None
    kind: Literal["image", "audio", "voice", "video", "document"] = "document"


@dataclass(slots=True)
class OutboundMessage:
    """Markdown text the agent wrote (or the gateway said), before any platform dialect; ``attachments`` go
    out after the text, each through ``send_file`` (delivery records each in the outbox)."""

    text: str
    buttons: list[Button] = field(default_factory=list)
    reply_to: str | None = None
    thread_id: str | None = None
    # The inbound message's handle, when this answers it (interaction replies).
    reply_handle: dict[str, Any] | None = None
    # Only the addressee sees it, where the platform can do that (Discord, Slack); elsewhere a normal message.
    ephemeral: bool = False
    attachments: list[Attachment] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ButtonPress:
    source: Source
    button_id: str
    message_id: str | None = None
    reply_handle: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Capabilities:
    max_message_length: int = 4000
    dialect: Dialect = MARKDOWN  # the markup ``render`` writes, as chunking needs to know it
    buttons: bool = False
    edits: bool = False
    threads: bool = False
    typing: bool = False
    # ``send`` honours its idempotency key: a chunk resent after a crash is not shown twice.
    idempotent_send: bool = False
    # How a person types a command here ("/" almost everywhere; Slack keeps "/" for its own slash commands):
    # what the gateway writes when it names one in a message ("send /stop", "/approve ID").
    command_prefix: str = "/"
    # Seconds between two edits of a chat's messages that the platform tolerates: a streamed reply is never
    # edited more often than this (nor than ``display.stream_edit_interval``).
    min_edit_interval: float = 0.0
    # Images ``send_album`` takes in one message (a Telegram media group); 0: each file on its own.
    album: int = 0

    def command(self, name: str, args: str = "") -> str:
        return f"{self.command_prefix}{name}" + (f" {args}" if args else "")


@dataclass(slots=True)
class Accepted:
    """A message that passed the inbox: persisted, not a duplicate, from someone who may talk to the agent."""

    inbox_id: int
    msg: InboundMessage
    key: str
    command: CommandCall | None = None  # a command the gateway knows (or a native one it doesn't)
    resume_reply: str | None = None  # recovered after a restart: the answer exists, only delivery is left
    resume_turn: bool = False  # recovered after a restart with steps of its turn already stored
    recovered: bool = False  # taken over after a restart: the outbox may hold part of its answer already
    queued_ms: float | None = None  # receipt -> turn start, for the turn's one info-level log line
