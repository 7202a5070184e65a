"""One command registry. /help and each platform's command menu are generated from it.

Commands never reach the agent (guard level 2): the runner intercepts them, even while a turn runs.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.platforms.base import InboundMessage, PlatformAdapter
    from gateway.runner import GatewayRunner

_COMMAND = re.compile(r"^/([A-Za-z][A-Za-z0-9_]{0,31})(?:@(\S+))?(?:\s+(.*))?$", re.S)


@dataclass(frozen=True)
class ParsedCommand:
    name: str
    args: str
    bot: str | None = None


def parse_command(text: str) -> ParsedCommand | None:
    m = _COMMAND.match(text.strip())
    if not m:
        return None
    return ParsedCommand(name=m.group(1).lower(), args=(m.group(3) or "").strip(), bot=m.group(2))


@dataclass
class CommandContext:
    runner: GatewayRunner
    adapter: PlatformAdapter
    message: InboundMessage
    session_key: str
    args: str


Handler = Callable[[CommandContext], Awaitable[str | None]]


@dataclass(frozen=True)
class Command:
    name: str
    description: str
    handler: Handler
    aliases: tuple[str, ...] = ()
    args_hint: str = ""
    platforms: frozenset[str] | None = None  # None: everywhere
    admin_only: bool = False

    def available_on(self, platform: str) -> bool:
        return self.platforms is None or platform in self.platforms


class CommandRegistry:
    def __init__(self) -> None:
        self._commands: dict[str, Command] = {}
        self._by_name: dict[str, Command] = {}

    def add(self, command: Command) -> Command:
        for name in (command.name, *command.aliases):
            if name in self._by_name:
                raise ValueError(f"command name /{name} is taken")
            self._by_name[name] = command
        self._commands[command.name] = command
        return command

    def command(self, name: str, description: str, *, aliases: tuple[str, ...] = (), args_hint: str = "",
                platforms: frozenset[str] | None = None, admin_only: bool = False) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.add(Command(name, description, handler, aliases, args_hint, platforms, admin_only))
            return handler

        return register

    def lookup(self, name: str) -> Command | None:
        return self._by_name.get(name.lower())

    def for_platform(self, platform: str) -> list[Command]:
        return [c for c in self._commands.values() if c.available_on(platform)]

    def help_text(self, platform: str) -> str:
        lines = ["Commands:"]
        for c in self.for_platform(platform):
            usage = f"/{c.name}" + (f" {c.args_hint}" if c.args_hint else "")
            alias = f" (also /{', /'.join(c.aliases)})" if c.aliases else ""
            lines.append(f"{usage} — {c.description}{alias}")
        return "\n".join(lines)

    def menu(self, platform: str) -> list[tuple[str, str]]:
        """(name, description) pairs for a platform's native command menu."""
        return [(c.name, c.description) for c in self.for_platform(platform)]
