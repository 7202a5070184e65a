"""``platforms.discord``: the bot token's variable, where the bot listens, who may talk, where the API is."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, Field, field_validator

from gateway.kernel.configbase import ChatPlatformConfig, id_text


def _snowflake(item: str) -> str:
    if not item.isdigit():
        # A common slip: "alice#1234" or "@alice" is a name; Discord gives every user, role, channel and server
        # a number (Developer Mode on, then right-click -> Copy ID).
        raise ValueError(f"Discord ids are numbers (got {item!r}; with Developer Mode on, right-click -> Copy ID)")
    return item


DiscordId = Annotated[str, AfterValidator(_snowflake)]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def _seconds(value: Any) -> Any:
    """``3600``, ``"90s"``, ``"30m"``, ``"1h"``, ``"2d"`` -> seconds."""
    if isinstance(value, str):
        match = _DURATION.match(value)
        if not match:
            raise ValueError(f"a duration such as 3600, 90s, 30m, 1h or 2d (got {value!r})")
        return float(match.group(1)) * _UNIT[match.group(2)]
    return value


class DiscordConfig(ChatPlatformConfig):
    allowed_users: list[DiscordId] = Field(default_factory=list)
    admins: list[DiscordId] = Field(default_factory=list)
    allowed_channels: list[DiscordId] = Field(default_factory=list)
    # Members holding one of these roles (in a server the bot is in) may talk to it there.
    allowed_roles: list[DiscordId] = Field(default_factory=list)
    token_env: str = "DISCORD_BOT_TOKEN"
    # In server channels and threads the bot answers when mentioned or replied to; false: every message.
    require_mention: bool = True
    # Slash commands are registered in these servers (they appear at once) instead of globally.
    guild_ids: list[DiscordId] = Field(default_factory=list)
    # A Discord-compatible API (a proxy, a test server): the REST base and the gateway's websocket URL.
    api_base_url: str | None = None
    gateway_url: str | None = None
    max_media_mb: float = Field(default=25.0, gt=0, le=500)
    # After a restart or a new gateway session, messages posted meanwhile (in channels the bot talks in) are
    # read back from the channels' history and answered, if no older than this.
    backfill_max_age: float = Field(default=3600.0, ge=0, le=14 * 86400)

    _more_ids = field_validator("allowed_roles", "guild_ids", mode="before")(id_text)
    _duration = field_validator("backfill_max_age", mode="before")(_seconds)

    @field_validator("api_base_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https:// (e.g. http://127.0.0.1:8080/api/v10)")
        return v.rstrip("/") if v else v

    @field_validator("gateway_url")
    @classmethod
    def _ws_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("ws://", "wss://")):
            raise ValueError("must start with ws:// or wss://")
        return v
