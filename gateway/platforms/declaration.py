"""What the rest of Herald may know of a platform without importing it: its ``Declaration``.

Each platform's package declares one in its ``__init__.py`` (``PLATFORM = Declaration(...)``), which imports
nothing else, so the registry (gateway/platforms/__init__.py) reads every declaration while SDKs load only with
the adapters of enabled platforms. Nothing outside a platform's package names it: whatever the core, the CLI or
the kernel must know of one (its loggers, its credentials' shapes, its files, its page) is said here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Declaration:
    # "module:attribute" inside the platform's package: the adapter class (imported only when it is enabled)
    # and the config model of ``platforms.<name>`` (imported by the config loader: it must not pull an SDK in).
    adapter: str
    config: str
    # How a person calls it: the CLI's help ("Telegram", "web chat"), messages about it.
    label: str
    # Its SDK's loggers, which narrate every request: kept at WARNING unless the log level is debug.
    noisy_loggers: tuple[str, ...] = ()
    # Regular expressions of its credentials' shapes, masked in every log line, stored error and shown text
    # (gateway/kernel/logs.py): anchored at a word's start, possessive, never shorter than 5 characters.
    secret_patterns: tuple[str, ...] = ()
    # (what it is, file name): files it keeps in the profile's home. Owner-only like Herald's own, hidden from
    # the agent's sandbox, listed by ``herald paths``.
    home_files: tuple[tuple[str, str], ...] = ()
    # The path of the page it serves a person on the daemon's http app, whose address with what lets them in
    # ``herald <name>-url`` prints; while the platform is disabled the path says so.
    page: str | None = None
    # Its adapter authorises requests to the daemon's HTTP API (``PlatformAdapter.authorizes``): without one
    # enabled, /api/ and the dashboard are closed.
    guards_api: bool = False
    # What ``herald profile create`` writes under ``platforms.<name>`` (YAML, unindented), or nothing.
    starter: str = ""
