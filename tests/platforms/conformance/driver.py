"""The conformance suite's view of a platform: one driver per adapter, on top of that platform's fake.

A driver plays the platform's side of the wire. It delivers what a user does the way the platform would (an
update handed out by ``getUpdates``, a webhook POST, a request to the web API; later a Socket Mode envelope
or a gateway event) and reads back what the bot did there: messages, edits, answers to button presses, and
when the platform got its acknowledgements. test_conformance.py speaks only this interface, so a platform
joins the suite by adding one driver (on its fake) to ``DRIVERS`` in conftest.py.

Chat, thread, user and message ids are strings, as in the adapter contract; times are ``time.monotonic()``.
"""

from __future__ import annotations

import abc
import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest

from gateway.config import parse_config, resolve_paths
from gateway.platforms.base import PlatformAdapter
from gateway.runner import GatewayRunner
from tests.fakes.llm import FakeLLM
from tests.support.polling import wait_until


@dataclass
class Event:
    """Something a user did, as the platform delivered it to the bot."""

    kind: Literal["message", "press"]
    chat: str
    thread: str | None
    text: str  # the message's text, or the pressed button's id
    at: float  # when the user acted
    raw: Any = None  # the platform's payload, kept to deliver it again
    status: int | None = None  # platforms that push: the HTTP status the bot answered with
    ack: Ack | None = None  # platforms that push: measured as the bot answered


# The platform's acknowledgement of an event must not wait for what the event causes: the tests assert that by
# order (the ack came before the slow thing it must not wait for ended). What a platform holds against a late ack
# is its own limit: Slack and Discord retry, or fail the interaction, after 3 s, so that is the only time asserted.
# (Measured on 2 shared cores: an event is acknowledged in 3-7 ms, a press in 1-2 ms, except that Telegram
# answers a slow handler's callback query at ANSWER_WITHIN, 1 s, by design; beside the whole suite, a webhook's
# ack once took 0.62 s.)
PLATFORM_ACK_LIMIT = 3.0


@dataclass(frozen=True)
class Ack:
    """The bot's acknowledgement of an event, as the platform saw it."""

    seconds: float  # from the platform handing the event over to the acknowledgement
    at: float


@dataclass
class BotMessage:
    """A message the bot has on the platform, as it stands now (edits applied)."""

    id: str
    chat: str
    thread: str | None
    text: str  # what the user reads (for Telegram the text the entities format; for web the markdown)
    buttons: list[str]  # what a press on each button sends back
    at: float  # when the platform got it
    edits: int = 0
    reply_to: str | None = None  # the message it answers, where the platform shows that
    raw: Any = field(default=None, repr=False)  # the platform's own record, for the driver's checks


class PlatformDriver(abc.ABC):
    """One platform's side of the conformance suite."""

    name: ClassVar[str]
    platform: ClassVar[str]  # the adapter's name
    threads: ClassVar[bool]  # messages and their answers can live in a thread of a chat
    limit: ClassVar[int]  # the platform's limit on one message, counted as ``length`` counts
    # The adapter connects with a credential that two processes must not share (bot token, app token).
    credential: ClassVar[bool]
    # A code block shows its language (Telegram's pre entity, the web's fence); Slack's mrkdwn has none.
    shows_code_language: ClassVar[bool] = True
    files: ClassVar[bool] = False  # users can send the bot files (``send_file``)
    # The bot can edit what it sent (WhatsApp's Cloud API cannot): streamed replies and decided prompts.
    edits: ClassVar[bool] = True
    user_edits: ClassVar[bool] = False  # users can edit what they sent, and the bot hears it (``edit``)
    user: ClassVar[str]  # the known user, the only one on the allowlist
    chat: ClassVar[str]  # a direct chat with the known user

    def __init__(self, tmp_path: Path, llm: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tmp_path = tmp_path
        self.llm = llm
        self.monkeypatch = monkeypatch
        self.runners: list[GatewayRunner] = []
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # credential lock files
        monkeypatch.delenv("HERALD_PROFILE", raising=False)

    # ---- the daemon ------------------------------------------------------------------------------

    @property
    def runner(self) -> GatewayRunner:
        """The runner started last."""
        return self.runners[-1]

    def adapter(self, runner: GatewayRunner | None = None) -> PlatformAdapter:
        return (runner or self.runner).adapters[self.platform]

    @abc.abstractmethod
    async def open(self) -> None:
        """Start the fake platform (and whatever the driver needs to talk to it)."""

    async def close(self) -> None:
        for runner in reversed(self.runners):
            await runner.shutdown()
        self.runners.clear()

    def config(self, overrides: dict[str, Any] | None, home: Path) -> dict[str, Any]:
        """The runner's config: this platform on, the fake model, only ``user`` allowed."""
        base: dict[str, Any] = {
            "http": {"port": 0},
            "model": {"base_url": self.llm.base_url, "name": "fake-model", "max_retries": 0},
            "access": {"allowed_users": [f"{self.platform}:{self.user}"]},
            "platforms": {"web": {"enabled": False}},
        }
        return merge(merge(base, self.platform_config(home)), overrides or {})

    @abc.abstractmethod
    def platform_config(self, home: Path) -> dict[str, Any]:
        """This platform's part of the config (enabled, pointed at the fake)."""

    async def start(self, overrides: dict[str, Any] | None = None, *, home: Path | None = None,
                    connect: bool = True) -> GatewayRunner:
        """A real GatewayRunner with this platform enabled, in ``home`` (its own database and profile)."""
        home = home or self.tmp_path / "home"
        self.monkeypatch.setenv("HERALD_HOME", str(home))
        runner = GatewayRunner(parse_config(self.config(overrides, home)), resolve_paths())
        await runner.start()
        self.runners.append(runner)
        if connect:
            await wait_until(lambda: self.adapter(runner).state == "connected", what=f"{self.name} connected")
        return runner

    async def stop(self, runner: GatewayRunner) -> None:
        await runner.shutdown()
        self.runners.remove(runner)

    # ---- what users do ---------------------------------------------------------------------------

    @abc.abstractmethod
    async def send(self, text: str, *, chat: str | None = None, thread: str | None = None) -> Event:
        """The known user writes ``text`` in ``chat`` (default: the direct chat), addressed to the bot."""

    @abc.abstractmethod
    async def command(self, name: str, args: str = "", *, chat: str | None = None,
                      thread: str | None = None) -> Event:
        """The known user runs the command ``name`` the way the platform has commands run."""

    async def send_file(self, text: str, name: str, content: bytes, *, delay: float = 0.0) -> Event:
        """The known user sends ``text`` with a file in the direct chat; its download takes ``delay`` seconds."""
        raise NotImplementedError(f"{self.name} takes no files")

    async def edit(self, event: Event, text: str) -> Event:
        """The known user edits the message they sent as ``event`` (a ``send``) to read ``text``."""
        raise NotImplementedError(f"{self.name} has no edits")

    @abc.abstractmethod
    async def send_as_stranger(self, text: str) -> Event:
        """Someone the bot must not listen to writes to it (not on the allowlist, or without the credential)."""

    @abc.abstractmethod
    async def redeliver(self, event: Event) -> None:
        """The platform delivers ``event`` again, the way it does when it is not sure the bot got it."""

    @abc.abstractmethod
    async def press(self, message: BotMessage, button: str) -> Event:
        """The known user presses the button of ``message`` whose press sends ``button``."""

    def thread_chat(self) -> tuple[str, str]:
        """A chat with a thread the known user may talk in (platforms with ``threads``)."""
        raise NotImplementedError(f"{self.name} has no threads")

    # ---- what the platform saw -------------------------------------------------------------------

    @abc.abstractmethod
    async def ack(self, event: Event, timeout: float = 10.0) -> Ack:
        """Wait for the bot's acknowledgement of ``event`` (an offset, an HTTP 2xx, a press's answer)."""

    @abc.abstractmethod
    def messages(self, chat: str) -> list[BotMessage]:
        """What the bot has in ``chat``, in the order it sent it."""

    @abc.abstractmethod
    def notices(self, press: Event) -> list[str]:
        """What the presser was shown after ``press``: the platform's answer to it, or messages in its chat."""

    @abc.abstractmethod
    def length(self, message: BotMessage) -> int:
        """``message``'s length as the platform counts it against ``limit``."""

    @abc.abstractmethod
    def code_blocks(self, message: BotMessage) -> list[tuple[str | None, list[str]]]:
        """(language, lines) of each code block ``message`` shows; AssertionError where its formatting is
        broken (an unclosed fence, an entity out of range or splitting a character)."""

    async def wait_messages(self, chat: str, predicate: Callable[[list[BotMessage]], Any],
                            timeout: float = 10.0) -> list[BotMessage]:
        """Poll ``messages(chat)`` until ``predicate`` holds; returns them."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.messages(chat)
            if predicate(found):
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: not met within {timeout}s; chat {chat} has "
                                     f"{[m.text[:80] for m in found]!r}")
            await asyncio.sleep(0.02)

    async def wait_text(self, chat: str, text: str, timeout: float = 10.0) -> BotMessage:
        """The bot's message in ``chat`` reading exactly ``text``."""
        found = await self.wait_messages(chat, lambda ms: any(m.text == text for m in ms), timeout)
        return next(m for m in found if m.text == text)


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def holder() -> str:
    """How a credential lock names this process (in the authenticated status, never in /readyz)."""
    return f"pid {os.getpid()}"
