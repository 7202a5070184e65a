"""The platform registry: adding a platform is its package (gateway/platforms/<name>/) and one line here.

A package declares itself in its ``__init__.py`` (``PLATFORM``, a ``Declaration``: gateway/platforms/declaration.py)
and imports nothing heavy there, so reading every declaration costs no SDK: the config loader imports only the
config models, and an SDK loads only with the adapter of an enabled platform. Everything the rest of Herald
needs to know of platforms comes through the functions below; nothing outside a platform's package names it
(tests/platforms/test_platform_names.py).
"""

from __future__ import annotations

import importlib
from typing import Any

from gateway.platforms.declaration import Declaration

# In the order they are configured, started and listed.
_PACKAGES = (
    "web",
    "telegram",
    "slack",
    "discord",
    "whatsapp",
    "matrix",
)

PLATFORMS: dict[str, Declaration] = {name: importlib.import_module(f"{__name__}.{name}").PLATFORM
                                     for name in _PACKAGES}


def _load(name: str, ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(f"{__name__}.{name}.{module}"), attr)


def adapter_class(name: str) -> Any:
    return _load(name, PLATFORMS[name].adapter)


def config_class(name: str) -> Any:
    return _load(name, PLATFORMS[name].config)


def chat_platforms() -> list[str]:
    """The platforms whose senders the gateway checks (their config is a ``ChatPlatformConfig``)."""
    from gateway.kernel.configbase import ChatPlatformConfig

    return [name for name in PLATFORMS if issubclass(config_class(name), ChatPlatformConfig)]


def noisy_loggers() -> list[str]:
    return [logger for d in PLATFORMS.values() for logger in d.noisy_loggers]


def secret_patterns() -> list[str]:
    return [pattern for d in PLATFORMS.values() for pattern in d.secret_patterns]


def home_files() -> list[tuple[str, str]]:
    """(what it is, file name) of every file a platform keeps in the profile's home."""
    return [entry for d in PLATFORMS.values() for entry in d.home_files]


def declare_to_logs() -> None:
    """Every platform's SDK loggers and credential shapes, handed to the log setup (gateway/kernel/logs.py):
    the CLI and the runner call this before anything is logged."""
    from gateway.kernel.logs import declare

    declare(noisy_loggers=noisy_loggers(), secret_patterns=secret_patterns())
