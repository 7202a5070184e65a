"""Who may talk to the agent. Default deny; the web chat's token holder is the owner."""

from __future__ import annotations

from gateway.config import Config
from gateway.platforms.base import Source


def is_allowed(cfg: Config, source: Source, trusted_platform: bool = False) -> bool:
    if trusted_platform:
        # The adapter authenticated the sender itself (the web API's bearer token).
        return True
    platform_cfg = getattr(cfg.platforms, source.platform, None)
    allowed = getattr(platform_cfg, "allowed_users", None) or []
    return str(source.user_id) in {str(u) for u in allowed}
