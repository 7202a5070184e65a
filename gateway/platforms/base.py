"""The adapter contract: one inbound model, one outbound model, declared capabilities, one way in.

Adapters translate at the border and nowhere else: an SDK event becomes an ``InboundMessage`` (or a
``ButtonPress``), an ``OutboundMessage`` becomes an SDK call. The core reads ``Capabilities``; it never
asks which platform it is talking to.

The way in is ``accept()``: it de-duplicates, checks access and persists, and returns as soon as the row
is durable. The adapter acknowledges its platform right after it (a polling offset, an HTTP 200, a
Socket Mode ack, an interaction's deferral); the gateway schedules what happens next itself, so nothing
slow ever sits between a platform's event and its acknowledgement. What is slow (downloading the files a
message came with, a lookup that may be rate limited) the adapter leaves in ``InboundMessage.pending``; the
gateway calls ``prepare()`` with the message before its turn, holding the session's lane meanwhile, so a
chat's messages still reach the agent in order.

Ids are opaque strings and may contain any character (``:``, ``/``, spaces): the core encodes them where
it builds keys from them (session keys, cron targets).
"""

from __future__ import annotations

import abc
import asyncio
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import structlog

from gateway.kernel.chunking import MARKDOWN
from gateway.kernel.chunking import Dialect as Dialect  # adapters declare theirs from the contract
from gateway.kernel.faults import Unavailable as Unavailable  # adapters catch it from the contract
from gateway.kernel.health import kind_of
from gateway.kernel.logs import redact
from gateway.platforms.chats import ChatBusy as ChatBusy  # the chats' port, kept in chats.py
from gateway.platforms.chats import ChatHit as ChatHit
from gateway.platforms.chats import ChatInfo as ChatInfo
from gateway.platforms.chats import Chats as Chats
from gateway.platforms.files import FileUnavailable as FileUnavailable  # the contract's too, kept in files.py
from gateway.platforms.files import TooBig as TooBig
from gateway.platforms.files import file_ref as file_ref
from gateway.platforms.files import save_stream as save_stream

log = structlog.get_logger("herald.platforms")

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
            reply_handle=d.get("reply_handle"), pending=d.get("pending"),
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
    """Markdown text the agent wrote (or the gateway said), before any platform dialect."""

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


class CredentialRejected(Exception):
    """The platform refused a credential (wrong, revoked): ``str()`` is what it said, never the credential."""


class ShuttingDown(Exception):
    """New messages are refused while the daemon drains."""


class DeliveryError(Exception):
    """Raised by ``send``/``edit``. The delivery layer decides what to do from the subclass."""


class RateLimited(DeliveryError):
    def __init__(self, retry_after: float, message: str = "rate limited") -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TransientError(DeliveryError):
    """Worth retrying with backoff (network trouble, 5xx)."""


class PermanentError(DeliveryError):
    """Retrying won't help (blocked by the user, chat not found, no rights)."""


class FormattingError(DeliveryError):
    """The platform rejected the formatted text; the delivery layer resends it plain."""


AdapterState = Literal["stopped", "starting", "connected", "retrying", "failed", "disabled"]


class Gateway(Protocol):
    """What an adapter may ask of the gateway: nothing more (adapters never see the runner)."""

    @property
    def stopping(self) -> bool: ...

    async def accept(self, adapter: PlatformAdapter, msg: InboundMessage) -> Accepted | None:
        """Persist + de-duplicate + access check; None for a duplicate or a sender who may not talk."""

    def press(self, adapter: PlatformAdapter, press: ButtonPress) -> None:
        """Take a button press; returns at once (the notice comes through ``answer_press``)."""

    def may_talk(self, source: Source, trusted: bool = False) -> bool:
        """The access check alone (to tell a refused slash command so, where only its sender sees it)."""

    def command_menu(self, platform: str) -> list[tuple[str, str]]:
        """(name, description) of the commands available on ``platform``, for native menus."""


class ChatLog(Protocol):
    """History kept by the gateway for a platform that has none of its own (the web chat)."""

    async def add(self, platform: str, chat_id: str, message_id: str, role: str, text: str,
                  buttons: list[dict[str, Any]] | None = None, user_id: str | None = None,
                  wait: bool = True, files: list[dict[str, Any]] | None = None) -> bool: ...

    async def edit(self, platform: str, message_id: str, text: str | None,
                   buttons: list[dict[str, Any]] | None) -> dict[str, Any] | None: ...

    async def get(self, platform: str, message_id: str) -> dict[str, Any] | None: ...

    async def recent(self, platform: str, chat_id: str, limit: int = 500) -> list[dict[str, Any]]: ...


class Cursors(Protocol):
    """Per platform, a position per chat that the adapter reads from again after a restart (the id of the
    last message taken there), for platforms that do not redeliver what was sent while the bot was away."""

    async def load(self, platform: str) -> dict[str, str]: ...

    async def save(self, platform: str, cursors: Mapping[str, str]) -> None: ...


class Broadcast(Protocol):
    """Events every instance sharing the database hears (gateway/cluster/bus.py), for an adapter that serves
    clients of its own (the web chat's event streams): what one instance sends, another's client sees."""

    enabled: bool  # False: this is the only instance, there is nobody to tell

    def on(self, kind: str, handler: Callable[[str], None]) -> None: ...

    async def broadcast(self, kind: str, data: str) -> None: ...


class FaultSink(Protocol):
    """Where an adapter reports the faults its platform served (gateway/kernel/faults.py's ``Faults``): ``record`` one
    (a 429, a 502, a dropped connection), ``begin``/``end`` a lasting one (another poller holds the bot's
    updates), which makes ``/readyz`` not ready with the fixed ``reason`` meanwhile. Fault classes are
    gateway/kernel/faults.py's FAULT_CLASSES; fields are plain data, never exception text."""

    def record(self, fault: str, **fields: Any) -> None: ...

    def begin(self, condition: str, fault: str, reason: str, **fields: Any) -> bool: ...

    def end(self, condition: str) -> bool: ...


class _NoFaults:
    def record(self, fault: str, **fields: Any) -> None:
        return None

    def begin(self, condition: str, fault: str, reason: str, **fields: Any) -> bool:
        return False

    def end(self, condition: str) -> bool:
        return False


NO_FAULTS: FaultSink = _NoFaults()


@dataclass(frozen=True)
class AdapterContext:
    """Everything an adapter is built with: its own config section, the gateway port, its places on disk."""

    gateway: Gateway
    config: Any  # the platform's own pydantic model (declared in its config module)
    home: Path  # the profile's home
    media_dir: Path
    chat_log: ChatLog
    platforms: Mapping[str, Any] = field(default_factory=dict)  # every platform's config, read-only
    cursors: Cursors | None = None
    broadcast: Broadcast | None = None
    faults: FaultSink = NO_FAULTS  # where the adapter counts what it met (bad input, platform faults)
    chats: Chats | None = None  # the chats' list, titles and search, for a client that shows them


class Outbound:
    """An adapter's sending part (its outbound.py): the adapter's ``render``, ``measure``, ``send``, ``edit`` and
    ``typing`` go to its ``outbound``. These defaults are the contract's: markdown as it is, characters, no
    edits, no typing indicator; ``typing`` only schedules one (it returns at once)."""

    def render(self, markdown: str) -> str:
        return markdown

    def measure(self, text: str) -> int:
        return len(text)

    async def send(self, chat_id: str, text: str, message: OutboundMessage, *,
                   idempotency_key: str | None = None) -> list[str]:
        raise NotImplementedError("an adapter sends through its outbound part, or overrides send")

    async def edit(self, chat_id: str, message_id: str, text: str | None, buttons: list[Button] | None = None,
                   *, thread_id: str | None = None) -> None:
        raise PermanentError("this platform cannot edit messages")

    def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        return None


class PlatformAdapter(abc.ABC):
    """start / stop / send / edit / typing / render / measure, plus ``accept`` and ``press`` inbound."""

    name: str = "base"
    # Where send, edit, typing, render and measure go unless the adapter overrides them.
    outbound: Outbound = Outbound()
    capabilities: Capabilities = Capabilities()
    # One line for the system prompt: how replies will be shown on this platform.
    prompt_hint: str = ""
    # The adapter authenticated the sender itself (the web API's bearer token): the sender is the owner.
    trusted: bool = False

    def __init__(self, ctx: AdapterContext) -> None:
        self.ctx = ctx
        self.gateway = ctx.gateway
        self.cfg = ctx.config
        self.faults = ctx.faults
        self.state: AdapterState = "stopped"
        self._last_error: str | None = None
        self.error_kind: str | None = None  # the class of last_error: all that /readyz shows of it

    @property
    def last_error(self) -> str | None:
        """Why the adapter is not connected ("Kind: message"), redacted; None once it is."""
        return self._last_error

    @last_error.setter
    def last_error(self, error: BaseException | str | None) -> None:
        # Stored redacted whoever sets it (the runner, an adapter's own retry loop): an InvalidToken or a
        # URL error's text can quote the bot token. An exception is stored as "Kind: message".
        kind = kind_of(error)
        if isinstance(error, BaseException):
            error = f"{kind}: {error}" if str(error) else kind
        self._last_error = redact(error) if error else None
        self.error_kind = kind if error else None

    # ---- lifecycle ---------------------------------------------------------------------------

    @abc.abstractmethod
    async def start(self) -> None:
        """Connect. Return once connected; raise if that failed (the gateway retries with backoff)."""

    @abc.abstractmethod
    async def stop(self) -> None: ...

    def credentials(self) -> list[tuple[str, str]]:
        """(scope, secret) pairs this adapter connects with (bot token, app token).

        The gateway locks each one before ``start()`` and unlocks it after ``stop()``, so two Herald
        processes never drive the same bot (gateway/cluster/locks.py).
        """
        return type(self).credentials_of(self.cfg)

    def exclusive_credentials(self) -> bool:
        """Whether connecting with ``credentials()`` excludes any other process doing the same (polling, a
        gateway websocket: two would steal each other's events). An adapter that receives by webhook says
        False: with PostgreSQL, every instance of the database then holds them together and takes webhooks."""
        return True

    @classmethod
    def credentials_of(cls, config: Any) -> list[tuple[str, str]]:
        """``credentials()`` from the platform's config section alone (``herald doctor`` checks the locks
        without building an adapter)."""
        return []

    @classmethod
    async def check_credentials(cls, config: Any, timeout: float) -> str | None:
        """Ask the platform whether the configured credentials are valid, without connecting for real (``herald
        doctor``): who they belong to ("bot @name"), or None when the platform has nothing to check. Raise
        ``CredentialRejected`` when it refuses them; any other exception means it could not be asked."""
        return None

    async def wait_closed(self) -> None:
        """Return (or raise) when the connection dies on its own; the gateway then restarts the adapter.

        The default never returns: adapters without a long-lived connection can't die this way.
        """
        await asyncio.Event().wait()

    def http_routes(self) -> list[Any]:
        """aiohttp route definitions this adapter serves on the daemon's http app (web API, webhooks, its page)."""
        return []

    def authorizes(self, request: Any) -> bool:
        """Whether ``request`` to the daemon's HTTP API (``/api/``) carries this adapter's owner credential; only
        a platform that declares ``guards_api`` has one. The API is closed unless an adapter says yes."""
        return False

    @classmethod
    def page_credential(cls, config: Any, home: Path) -> tuple[str, str] | None:
        """For a platform that declares a ``page``: what lets its owner in, as (name, value) for the address's
        fragment, made if need be (``herald <name>-url``). Raise ``RuntimeError`` saying why it cannot be had."""
        return None

    def announce(self, url: str, interactive: bool) -> str | None:
        """The line ``herald run`` prints once the daemon is up, if this platform has one (how to reach it; ``url``
        is the daemon's http address; ``interactive``: stdout is a terminal, where a secret may be shown)."""
        return None

    # ---- outbound: to ``self.outbound`` unless the adapter says otherwise ---------------------------

    def render(self, markdown: str) -> str:
        """The agent's markdown in this platform's dialect. Delivery chunks what this returns."""
        return self.outbound.render(markdown)

    def measure(self, text: str) -> int:
        """The length of rendered text as the platform counts it against ``max_message_length``."""
        return self.outbound.measure(text)

    async def send(self, chat_id: str, text: str, message: OutboundMessage, *,
                   idempotency_key: str | None = None) -> list[str]:
        """Send one rendered chunk; return every platform message id it created (usually one).

        ``idempotency_key`` is the same when the same chunk is sent again (after a crash): an adapter
        whose platform can de-duplicate with it says so in ``capabilities.idempotent_send``.
        """
        return await self.outbound.send(chat_id, text, message, idempotency_key=idempotency_key)

    async def edit(self, chat_id: str, message_id: str, text: str | None, buttons: list[Button] | None = None,
                   *, thread_id: str | None = None) -> None:
        """Replace a message's text (rendered, one chunk) and/or buttons; ``thread_id`` where the platform
        addresses a thread's messages through it."""
        await self.outbound.edit(chat_id, message_id, text, buttons, thread_id=thread_id)

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        self.outbound.typing(chat_id, thread_id)

    async def send_file(self, chat_id: str, attachment: Attachment, message: OutboundMessage,
                        idempotency_key: str | None = None) -> list[str]:
        """Post one file (``attachment.caption`` with it where the platform has captions); the ids of what it
        posted. ``idempotency_key`` as for ``send``."""
        raise PermanentError(f"{self.name} cannot send files")

    async def file_limit(self, chat_id: str) -> int:
        """Bytes the platform takes in one file in that chat (0: it takes none)."""
        return 0

    async def answer_press(self, press: ButtonPress, notice: str | None) -> bool:
        """Show ``notice`` to whoever pressed (ephemeral where the platform has it). Called once per press.

        Return False when the adapter has no way of its own: the gateway then posts a non-empty notice
        into the chat.
        """
        return False

    # ---- inbound -----------------------------------------------------------------------------

    async def accept(self, msg: InboundMessage) -> bool:
        """Hand a normalised message to the gateway; False for a duplicate or a sender who may not talk.

        The message is durable when this returns: acknowledge the platform now. Raises ``ShuttingDown``
        while the daemon drains, and ``Unavailable`` while it cannot store messages (its database is down, its
        disk full): do not acknowledge then, so the platform redelivers later.
        """
        return await self.gateway.accept(self, msg) is not None

    def press(self, press: ButtonPress) -> None:
        """Hand a button press to the gateway; returns at once (acknowledge the platform now)."""
        self.gateway.press(self, press)

    async def prepare(self, msg: InboundMessage) -> Prepared:
        """Do what ``msg.pending`` left for after the acknowledgement; the gateway calls this before the
        message's turn (the session's lane waits, so the chat's next message does too) and never for a
        message it did not accept (a stranger's files are never fetched).

        The default downloads ``pending["files"]`` one after another through ``download``: each file had goes
        into ``msg.attachments``, each one missed becomes a note for the agent in ``msg.text`` and a line in
        ``Prepared.problems`` for the user. An adapter with more to do overrides this and calls it.
        """
        pending, msg.pending = msg.pending or {}, None
        files = [f for f in pending.get("files") or [] if isinstance(f, dict)]
        out = Prepared()
        if not files:
            return out
        notes: list[str] = []
        bare = not msg.text.strip()  # without words of the user's own, the agent is told what came
        for index, ref in enumerate(files):
            name = str(ref.get("name") or "file")
            try:
                msg.attachments.append(await self.download(msg, ref, index))
            except FileUnavailable as exc:
                reason = str(exc)
            except TimeoutError:
                reason = "the download took too long"
            except Exception as exc:
                log.warning("file_download_failed", platform=self.name, error=redact(f"{type(exc).__name__}: {exc}"))
                reason = f"the download failed ({type(exc).__name__})"
            else:
                if bare:
                    notes.append(f"[The user sent a {ref.get('kind') or 'file'}: {name}.]")
                continue
            notes.append(f"[The user sent {name}, which could not be downloaded: {reason}.]")
            out.problems.append(f"{name}: {reason}")
        if notes:
            msg.text = "\n".join([msg.text, *notes]) if msg.text else "\n".join(notes)
        return out

    async def download(self, msg: InboundMessage, ref: dict[str, Any], index: int) -> str:
        """Fetch one ``pending["files"]`` entry into ``ctx.media_dir``; its path. Raise ``FileUnavailable``
        (``TooBig``) with the reason in the user's words; any other exception counts as a failed download."""
        raise FileUnavailable(f"{self.name} files cannot be downloaded")

    def media_path(self, *parts: str) -> Path:
        """A file name in the media folder made of ``parts`` (ids, the file's own name), safe on any system."""
        safe = "-".join(_SAFE_NAME.sub("_", part)[-80:] or "file" for part in parts)
        os.makedirs(self.ctx.media_dir, exist_ok=True)
        return self.ctx.media_dir / safe


_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
