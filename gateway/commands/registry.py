"""One command registry. /help and each platform's command menu are generated from it.

Commands never reach the agent (guard level 2): the gateway intercepts them, even while a turn runs.
Adapters fill ``InboundMessage.command`` from their platform's way of sending commands; the registry
decides whether it is one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from gateway.platforms.base import CommandCall, InboundMessage, PlatformAdapter


@dataclass
class CommandContext:
    """What a handler gets; anything else it needs, its feature gave it when registering (closures)."""

    adapter: PlatformAdapter
    message: InboundMessage
    session_key: str
    args: str
    admin: bool  # the sender may run commands that change things for others


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

    def resolve(self, call: CommandCall | None) -> CommandCall | None:
        """The command a message carries, or None when it is prose for the model.

        A typed ``/word`` whose word is no command is prose ("/var/log is full, why?"); a native command
        (the platform's own mechanism) stays a command even when unknown, so the sender hears so.
        """
        if call is None:
            return None
        if call.native or self.lookup(call.name) is not None:
            return call
        return None

    def for_platform(self, platform: str) -> list[Command]:
        return [c for c in self._commands.values() if c.available_on(platform)]

    def help_text(self, platform: str, prefix: str = "/") -> str:
        lines = ["Commands:"]
        for c in self.for_platform(platform):
            usage = f"{prefix}{c.name}" + (f" {c.args_hint}" if c.args_hint else "")
            alias = f" (also {', '.join(prefix + a for a in c.aliases)})" if c.aliases else ""
            lines.append(f"{usage} — {c.description}{alias}")
        return "\n".join(lines)

    def menu(self, platform: str) -> list[tuple[str, str]]:
        """(name, description) pairs for a platform's native command menu."""
        return [(c.name, c.description) for c in self.for_platform(platform)]
