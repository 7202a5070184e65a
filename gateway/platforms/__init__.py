"""The platform registry: adding a platform is one module (or package) and one line here.

Each entry names the adapter class and the platform's config model (``platforms.<name>`` in
config.yaml). The config loader imports only the config models, so SDKs load only for enabled platforms.
"""

from __future__ import annotations

import importlib
from typing import Any

# name: (adapter class, config model), as module:attribute under gateway.platforms
PLATFORMS: dict[str, tuple[str, str]] = {
    "web": ("web.adapter:WebAdapter", "web.config:WebConfig"),
    "telegram": ("telegram.adapter:TelegramAdapter", "telegram.config:TelegramConfig"),
    "slack": ("slack.adapter:SlackAdapter", "slack.config:SlackConfig"),
    "discord": ("discord.adapter:DiscordAdapter", "discord.config:DiscordConfig"),
}


def _load(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), attr)


def adapter_class(name: str) -> Any:
    return _load(PLATFORMS[name][0])


def config_class(name: str) -> Any:
    return _load(PLATFORMS[name][1])
