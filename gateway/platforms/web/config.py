"""``platforms.web``: the local web chat (on by default; whoever holds the web token is the owner)."""

from __future__ import annotations

from pydantic import Field

from gateway.kernel.configbase import PlatformConfig


class WebConfig(PlatformConfig):
    enabled: bool = True
    # The bearer token from this environment variable instead of $HERALD_HOME/web_token: give every instance
    # of a cluster (several daemons on one PostgreSQL database behind one address) the same one.
    token_env: str | None = None
    # The largest file the owner may upload with a message, in MB (and the largest the agent may send here).
    max_upload_mb: float = Field(default=20.0, gt=0, le=1000)
