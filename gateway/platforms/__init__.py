"""The platform registry: adding a platform is one module and one line here."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gateway.platforms.base import PlatformAdapter

PLATFORMS: dict[str, str] = {
    "web": "gateway.platforms.web:WebAdapter",
    "telegram": "gateway.platforms.telegram:TelegramAdapter",
}


def adapter_class(name: str) -> type[PlatformAdapter]:
    module, _, attr = PLATFORMS[name].partition(":")
    return getattr(importlib.import_module(module), attr)
