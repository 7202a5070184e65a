"""Who may talk to the agent. Default deny; the web chat's token holder is the owner.

Allowed: the config's allowlists (``access.allowed_users`` as ``platform:id`` plus each platform's
``allowed_users``), admins, senders holding one of a platform's ``allowed_roles`` (the roles the adapter
read with the event, ``Source.roles``), and users approved through pairing (gateway/inbound/pairing.py) — and, in
group chats and channels, only where the platform's ``allowed_channels`` (when set) lists the chat. The check
runs for every inbound message, so it is a lookup in in-memory sets: config sets are built once, paired users are
loaded from the database at start and refreshed every few seconds by the pairing service (a
``herald pairing approve`` run in another process takes effect without a restart).
"""

from __future__ import annotations

from gateway.config import Config
from gateway.platforms.base import Source


def _channel_lists(cfg: Config) -> dict[str, frozenset[str]]:
    """Per platform, the chats (group chats, channels) it may be used in; absent = any."""
    out: dict[str, frozenset[str]] = {}
    for name in type(cfg.platforms).model_fields:
        channels = getattr(getattr(cfg.platforms, name), "allowed_channels", None)
        if channels:
            out[name] = frozenset(channels)
    return out


def _role_lists(cfg: Config) -> dict[str, frozenset[str]]:
    """Per platform that has roles, the ones whose holders may talk to the agent."""
    out: dict[str, frozenset[str]] = {}
    for name in type(cfg.platforms).model_fields:
        roles = getattr(getattr(cfg.platforms, name), "allowed_roles", None)
        if roles:
            out[name] = frozenset(roles)
    return out


def _config_sets(cfg: Config) -> tuple[frozenset[str], frozenset[str]]:
    """(allowed, admins) as ``platform:user_id`` keys; admins are allowed too."""
    allowed = set(cfg.access.allowed_users)
    admins = set(cfg.access.admins)
    for name in type(cfg.platforms).model_fields:
        platform_cfg = getattr(cfg.platforms, name)
        allowed.update(f"{name}:{u}" for u in getattr(platform_cfg, "allowed_users", None) or [])
        admins.update(f"{name}:{u}" for u in getattr(platform_cfg, "admins", None) or [])
    return frozenset(allowed | admins), frozenset(admins)


class AccessControl:
    """The runner's access check: config allowlists + paired users, all in memory."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self._allowed, self._admins = _config_sets(cfg)
        self._open_groups = cfg.access.group_policy == "open"
        self._channels = _channel_lists(cfg)
        self._roles = _role_lists(cfg)
        self._paired: frozenset[str] = frozenset()

    def set_paired(self, keys: frozenset[str]) -> None:
        self._paired = keys

    def add_paired(self, key: str) -> None:
        self._paired = self._paired | {key}

    def known(self, source: Source) -> bool:
        """Configured (by id or role) or paired, whatever the chat (group policy aside)."""
        key = f"{source.platform}:{source.user_id}"
        if key in self._allowed or key in self._paired:
            return True
        roles = self._roles.get(source.platform)
        return bool(roles and source.roles and not roles.isdisjoint(source.roles))

    def channel_allowed(self, source: Source) -> bool:
        channels = self._channels.get(source.platform)
        return channels is None or source.chat_type == "dm" or source.chat_id in channels

    def allowed(self, source: Source, trusted_platform: bool = False) -> bool:
        if trusted_platform:
            return True
        if not self.channel_allowed(source):
            return False
        if self._open_groups and source.chat_type != "dm":
            return True
        return self.known(source)

    def admin(self, source: Source, trusted_platform: bool = False) -> bool:
        return trusted_platform or f"{source.platform}:{source.user_id}" in self._admins
