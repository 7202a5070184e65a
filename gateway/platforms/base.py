"""The adapter contract: one inbound model, one outbound model, declared capabilities, guard level 1.

Adapters translate at the border and nowhere else: an SDK event becomes an ``InboundMessage``, an
``OutboundMessage`` becomes an SDK call. The core reads ``Capabilities``; it never asks which platform
it is talking to.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from gateway.health import kind_of
from gateway.logs import redact

if TYPE_CHECKING:
    from gateway.runner import Accepted, GatewayRunner

ChatType = Literal["dm", "group", "channel"]
Dialect = Literal["markdown", "telegram_html", "slack_mrkdwn", "discord", "plain"]


@dataclass(frozen=True, slots=True)
class Source:
    """Where a message came from: enough to build a session key and to answer."""

    platform: str
    chat_id: str
    user_id: str
    chat_type: ChatType = "dm"
    thread_id: str | None = None
    user_name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "platform": self.platform, "chat_id": self.chat_id, "user_id": self.user_id,
            "chat_type": self.chat_type, "thread_id": self.thread_id, "user_name": self.user_name,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Source:
        return cls(
            platform=d["platform"], chat_id=d["chat_id"], user_id=d["user_id"],
            chat_type=d.get("chat_type", "dm"), thread_id=d.get("thread_id"), user_name=d.get("user_name"),
        )


@dataclass(slots=True)
class InboundMessage:
    source: Source
    text: str
    platform_message_id: str
    attachments: list[str] = field(default_factory=list)
    reply_to: str | None = None
    received_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source.to_dict(), "text": self.text,
            "platform_message_id": self.platform_message_id, "attachments": list(self.attachments),
            "reply_to": self.reply_to, "received_at": self.received_at,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InboundMessage:
        return cls(
            source=Source.from_dict(d["source"]), text=d["text"], platform_message_id=d["platform_message_id"],
            attachments=list(d.get("attachments") or []), reply_to=d.get("reply_to"),
            received_at=d.get("received_at", 0.0),
        )


@dataclass(frozen=True, slots=True)
class Button:
    id: str
    label: str


@dataclass(slots=True)
class OutboundMessage:
    """Markdown text the agent wrote (or the gateway said), before any platform dialect."""

    text: str
    buttons: list[Button] = field(default_factory=list)
    reply_to: str | None = None
    thread_id: str | None = None


@dataclass(frozen=True, slots=True)
class ButtonPress:
    source: Source
    button_id: str
    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class Capabilities:
    max_message_length: int = 4000
    length_unit: Literal["chars", "utf16"] = "chars"
    dialect: Dialect = "markdown"
    buttons: bool = False
    edits: bool = False
    threads: bool = False
    typing: bool = False


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


class PlatformAdapter(abc.ABC):
    """start / stop / send / edit / typing, plus the first guard for everything inbound."""

    name: str = "base"
    capabilities: Capabilities = Capabilities()
    # One line for the system prompt: how replies will be shown on this platform.
    prompt_hint: str = ""

    def __init__(self, runner: GatewayRunner) -> None:
        self.runner = runner
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
        """Connect. Return once connected; raise if that failed (the runner retries with backoff)."""

    @abc.abstractmethod
    async def stop(self) -> None: ...

    def credentials(self) -> list[tuple[str, str]]:
        """(scope, secret) pairs this adapter connects with (bot token, app token).

        The runner locks each one before ``start()`` and unlocks it after ``stop()``, so two Herald
        processes never drive the same bot (gateway/locks.py).
        """
        return []

    async def wait_closed(self) -> None:
        """Return (or raise) when the connection dies on its own; the runner then restarts the adapter.

        The default never returns: adapters without a long-lived connection can't die this way.
        """
        import asyncio

        await asyncio.Event().wait()

    # ---- outbound ----------------------------------------------------------------------------

    @abc.abstractmethod
    async def send(self, chat_id: str, text: str, message: OutboundMessage) -> str:
        """Send one chunk already in this platform's dialect; return the platform's message id."""

    async def edit(self, chat_id: str, message_id: str, text: str | None,
                   buttons: list[Button] | None = None) -> None:
        raise PermanentError(f"{self.name} cannot edit messages")

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        return None

    def http_routes(self) -> list[Any]:
        """aiohttp route definitions this adapter serves on the daemon's http app (web API, webhooks)."""
        return []

    # ---- inbound: guard level 1 --------------------------------------------------------------

    async def handle_message(self, msg: InboundMessage) -> bool:
        """Take a normalised message. Returns False when it was a duplicate (already handled).

        The message is persisted before this returns, so an adapter may acknowledge the platform after it.
        Control commands go to the runner inline, bypassing the queue: they must reach a busy session.
        Everything else joins the session's FIFO lane (which starts a turn at once when the session is idle).
        """
        accepted = await self.runner.ingest(self, msg)
        if accepted is None:
            return False
        await self.dispatch(accepted)
        return True

    async def dispatch(self, accepted: Accepted) -> None:
        """Route a persisted message: commands inline, everything else into the session's lane.

        Adapters that must confirm a whole batch to their platform first (polling offsets) call
        ``runner.ingest`` for each message, confirm, then dispatch.
        """
        if accepted.command is not None:
            await self.runner.run_command(self, accepted)
        else:
            await self.runner.submit(self, accepted)

    async def handle_button(self, press: ButtonPress) -> str | None:
        """A button press; returns a short notice for the presser (platforms that show one)."""
        return await self.runner.button_pressed(self, press)


AdapterFactory = Callable[["GatewayRunner"], PlatformAdapter]
StartHook = Callable[[], Awaitable[None]]
