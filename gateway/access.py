"""Who may talk to the agent. Default deny; the web chat's token holder is the owner.

Allowed: the config's allowlists (``access.allowed_users`` as ``platform:id`` plus each platform's
``allowed_users``), admins, and users approved through pairing (gateway/pairing.py). The check runs for
every inbound message, so it is a lookup in in-memory sets: config sets are built once, paired users are
loaded from the database at start and refreshed every few seconds by the pairing service (a
``herald pairing approve`` run in another process takes effect without a restart).
"""

from __future__ import annotations

from gateway.config import Config
from gateway.platforms.base import Source


def _config_sets(cfg: Config) -> tuple[frozenset[str], frozenset[str]]:
    """(allowed, admins) as ``platform:user_id`` keys; admins are allowed too."""
    allowed = set(cfg.access.allowed_users)
    admins = set(cfg.access.admins)
    for name in type(cfg.platforms).model_fields:
        platform_cfg = getattr(cfg.platforms, name)
        allowed.update(f"{name}:{u}" for u in getattr(platform_cfg, "allowed_users", None) or [])
        admins.update(f"{name}:{u}" for u in getattr(platform_cfg, "admins", None) or [])
    return frozenset(allowed | admins), frozenset(admins)


_last: tuple[Config, tuple[frozenset[str], frozenset[str]]] | None = None


def _sets(cfg: Config) -> tuple[frozenset[str], frozenset[str]]:
    global _last
    if _last is None or _last[0] is not cfg:
        _last = (cfg, _config_sets(cfg))
    return _last[1]


def is_allowed(cfg: Config, source: Source, trusted_platform: bool = False) -> bool:
    """The config's answer alone (no paired users): the runner's ``AccessControl.allowed`` is the full one."""
    if trusted_platform:
        return True
    if source.chat_type != "dm" and cfg.access.group_policy == "open":
        return True
    return f"{source.platform}:{source.user_id}" in _sets(cfg)[0]


def is_admin(cfg: Config, source: Source, trusted_platform: bool = False) -> bool:
    """May this sender run commands that change things for others? The web token holder is the owner."""
    if trusted_platform:
        # The adapter authenticated the sender itself (the web API's bearer token).
        return True
    return f"{source.platform}:{source.user_id}" in _sets(cfg)[1]


class AccessControl:
    """The runner's access check: config allowlists + paired users, all in memory."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self._allowed, self._admins = _config_sets(cfg)
        self._open_groups = cfg.access.group_policy == "open"
        self._paired: frozenset[str] = frozenset()

    def set_paired(self, keys: frozenset[str]) -> None:
        self._paired = keys

    def add_paired(self, key: str) -> None:
        self._paired = self._paired | {key}

    def known(self, source: Source) -> bool:
        """Configured or paired, whatever the chat (group policy aside)."""
        key = f"{source.platform}:{source.user_id}"
        return key in self._allowed or key in self._paired

    def allowed(self, source: Source, trusted_platform: bool = False) -> bool:
        if trusted_platform:
            return True
        if self._open_groups and source.chat_type != "dm":
            return True
        return self.known(source)

    def admin(self, source: Source, trusted_platform: bool = False) -> bool:
        return trusted_platform or f"{source.platform}:{source.user_id}" in self._admins
