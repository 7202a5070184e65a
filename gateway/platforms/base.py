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

from gateway.kernel.chunking import Dialect as Dialect  # adapters declare theirs from the contract
from gateway.kernel.faults import Unavailable as Unavailable  # adapters catch it from the contract
from gateway.kernel.health import kind_of
from gateway.kernel.logs import redact
from gateway.platforms.chats import ChatBusy as ChatBusy  # the chats' port, kept in chats.py
from gateway.platforms.chats import ChatHit as ChatHit
from gateway.platforms.chats import ChatInfo as ChatInfo
from gateway.platforms.chats import Chats as Chats
from gateway.platforms.errors import CredentialRejected as CredentialRejected  # the contract's, kept in errors.py
from gateway.platforms.errors import DeliveryError as DeliveryError
from gateway.platforms.errors import FormattingError as FormattingError
from gateway.platforms.errors import MaybeSent as MaybeSent
from gateway.platforms.errors import PermanentError as PermanentError
from gateway.platforms.errors import RateLimited as RateLimited
from gateway.platforms.errors import ShuttingDown as ShuttingDown
from gateway.platforms.errors import TransientError as TransientError
from gateway.platforms.files import FileUnavailable as FileUnavailable  # the contract's too, kept in files.py
from gateway.platforms.files import TooBig as TooBig
from gateway.platforms.files import file_ref as file_ref
from gateway.platforms.files import save_stream as save_stream
from gateway.platforms.messages import Accepted as Accepted
from gateway.platforms.messages import Attachment as Attachment
from gateway.platforms.messages import Button as Button
from gateway.platforms.messages import ButtonPress as ButtonPress
from gateway.platforms.messages import ButtonStyle as ButtonStyle
from gateway.platforms.messages import Capabilities as Capabilities
from gateway.platforms.messages import ChatType as ChatType
from gateway.platforms.messages import CommandCall as CommandCall
from gateway.platforms.messages import InboundMessage as InboundMessage
from gateway.platforms.messages import OutboundMessage as OutboundMessage
from gateway.platforms.messages import Prepared as Prepared
from gateway.platforms.messages import Source as Source
from gateway.platforms.messages import parse_text_command as parse_text_command

log = structlog.get_logger("herald.platforms")

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


class Receipts(Protocol):
    """What became of messages already sent, for a platform that reports it later (delivered, read, failed):
    recorded on the message's outbox row, found by the id ``send`` returned for it."""

    async def receipt(self, platform: str, message_id: str, state: str, error: str | None = None) -> bool:
        """``state``: sent, delivered, read or failed (the furthest one stays; a failure fails the row, with
        ``error``, shown where failed deliveries are). False when no row holds ``message_id`` (yet)."""

    async def replace(self, platform: str, message_id: str, new_ids: list[str]) -> bool:
        """The platform refused ``message_id`` after taking it and the adapter sent the same words again as
        ``new_ids``: the row names those from now on."""


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
    receipts: Receipts | None = None
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
    # The adapter verified each sender's own credential (an API key per client): they may talk; admin rights still
    # come from the access rules (``platform:user_id`` in ``access.admins``).
    verified_senders: bool = False
    # Where the approval prompts of this platform's turns are put when its clients cannot answer one: a chat
    # target ``platform:chat_id[:thread_id]`` or ``dashboard``; None asks in the turn's own chat.
    approvals_to: str | None = None

    def __init__(self, ctx: AdapterContext) -> None:
        self.ctx = ctx
        self.gateway = ctx.gateway
        self.cfg = ctx.config
        self.faults = ctx.faults
        self.state: AdapterState = "stopped"
        self._last_error: str | None = None
        self.error_kind: str | None = None  # the class of last_error: all that /readyz shows of it
        self._told_unavailable: set[str] = set()  # chats told, during this outage of the store, it cannot take
        self._notices: set[asyncio.Task[None]] = set()

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
        """Upload one file (with its markdown ``caption``) into the chat, in ``message.thread_id``; the ids of
        what it posted. Raises ``DeliveryError`` like ``send``; delivery checks ``file_limit`` first."""
        raise PermanentError(f"{self.name} cannot send files")

    async def file_limit(self, chat_id: str) -> int:
        """The largest file in bytes the platform takes in that chat (0: none at all)."""
        return 0

    async def send_album(self, chat_id: str, attachments: list[Attachment], message: OutboundMessage,
                         idempotency_key: str | None = None) -> list[str]:
        """Several images (at most ``capabilities.album``) as one message: one id per image, in order."""
        raise PermanentError(f"{self.name} cannot send albums")

    def live_text(self, msg: InboundMessage) -> Any:
        """Where the answer to ``msg`` is streamed as it is written when the adapter streams it itself (an HTTP
        response) rather than as edits of a message: an object with ``text(piece)``, ``restart()`` and
        ``progress(line)`` (gateway/outbound/streaming/direct.py), called on the loop; None: not so."""
        return None

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
        disk full): do not acknowledge then, so the platform redelivers (its sender is told: ``tell_unavailable``).
        """
        try:
            accepted = await self.gateway.accept(self, msg)
        except Unavailable as exc:
            self.tell_unavailable(msg, exc.reason)
            raise
        self._told_unavailable.clear()  # the store takes messages again: the next outage is told anew
        return accepted is not None

    def unavailable_notice(self, msg: InboundMessage, reason: str) -> str | None:
        """What the sender of ``msg``, refused while the gateway cannot store messages, is told: what really happens
        to it here (handed over again and answered later, or refused: send it again); None: told another way."""
        return (f"⚠️ Herald cannot take messages right now ({reason}). If I have not answered yours once this is "
                "fixed, please send it again.")

    def tell_unavailable(self, msg: InboundMessage, reason: str) -> None:
        """Tell ``msg``'s sender that it was refused (``unavailable_notice``): once per chat while the store is out,
        each time for a message answered privately (a command: its reply handle). Sent straight through ``send``,
        not delivery, whose outbox is in the store that is out; returns at once."""
        text = self.unavailable_notice(msg, reason)
        chat, private = msg.source.chat_id, msg.reply_handle is not None
        if text is None or (not private and chat in self._told_unavailable) or \
                not self.gateway.may_talk(msg.source, self.trusted):  # strangers hear nothing of the daemon's state
            return
        if not private:
            self._told_unavailable.add(chat)
        out = OutboundMessage(text, thread_id=msg.source.thread_id, reply_handle=msg.reply_handle, ephemeral=private)
        task = asyncio.create_task(self._say_unavailable(chat, out), name=f"{self.name}:unavailable")
        self._notices.add(task)
        task.add_done_callback(self._notices.discard)

    async def _say_unavailable(self, chat_id: str, out: OutboundMessage) -> None:
        try:
            await self.send(chat_id, self.render(out.text), out)
        except Exception as exc:
            log.info("unavailable_notice_failed", platform=self.name, error=type(exc).__name__)

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
                path = await self.download(msg, ref, index)
                msg.attachments.append(path)
                msg.names[path] = name
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
