"""``platforms.web``: the local web chat (on by default; whoever holds the web token is the owner)."""

from __future__ import annotations

from gateway.kernel.configbase import PlatformConfig


class WebConfig(PlatformConfig):
    enabled: bool = True
    # The bearer token from this environment variable instead of $HERALD_HOME/web_token: give every instance
    # of a cluster (several daemons on one PostgreSQL database behind one address) the same one.
    token_env: str | None = None
