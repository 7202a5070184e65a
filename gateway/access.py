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


def is_admin(cfg: Config, source: Source, trusted_platform: bool = False) -> bool:
    """May this sender run commands that change things for others? The web token holder is the owner."""
    if trusted_platform:
        return True
    platform_cfg = getattr(cfg.platforms, source.platform, None)
    admins = getattr(platform_cfg, "admins", None) or []
    return str(source.user_id) in {str(u) for u in admins}
