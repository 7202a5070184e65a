"""``platforms.web``: the local web chat (on by default; whoever holds the web token is the owner)."""

from __future__ import annotations

from gateway.configbase import PlatformConfig


class WebConfig(PlatformConfig):
    enabled: bool = True
