"""One command registry. /help and each platform's command menu are generated from it.

Commands never reach the agent (guard level 2): the gateway intercepts them, even while a turn runs.
Adapters fill ``InboundMessage.command`` from their platform's way of sending commands; the registry
decides whether it is one.

Each feature declares its commands at module level in a ``CommandSet``: handlers that take the feature's
dependencies and the command's context. The runner binds each set to its dependencies (``include``), in
the order /help lists them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Generic, TypeVar

from gateway.platforms.base import CommandCall, InboundMessage, PlatformAdapter


@dataclass
class CommandContext:
    """What a handler gets about the message; what it acts on comes in its command set's dependencies."""

    adapter: PlatformAdapter
    message: InboundMessage
    session_key: str
    args: str
    admin: bool  # the sender may run commands that change things for others


Handler = Callable[[CommandContext], Awaitable[str | None]]
D = TypeVar("D")
DepsHandler = Callable[[D, CommandContext], Awaitable[str | None]]  # a handler that takes its dependencies first


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


class CommandSet(Generic[D]):
    """A feature's commands, declared at module level; each handler takes the dependencies ``D`` first."""

    def __init__(self) -> None:
        self._declared: list[tuple[DepsHandler[D], partial[Command]]] = []

    def command(self, name: str, description: str, *, aliases: tuple[str, ...] = (), args_hint: str = "",
                platforms: frozenset[str] | None = None,
                admin_only: bool = False) -> Callable[[DepsHandler[D]], DepsHandler[D]]:
        def declare(handler: DepsHandler[D]) -> DepsHandler[D]:
            self._declared.append((handler, partial(Command, name, description, aliases=aliases, args_hint=args_hint,
                                                    platforms=platforms, admin_only=admin_only)))
            return handler

        return declare

    def bind(self, deps: D) -> list[Command]:
        return [command(handler=partial(handler, deps)) for handler, command in self._declared]


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

    def include(self, commands: CommandSet[D], deps: D) -> None:
        """Register a feature's commands, each handler bound to ``deps``."""
        for command in commands.bind(deps):
            self.add(command)

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
