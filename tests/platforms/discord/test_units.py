"""Discord's pieces on their own: rendering to Discord's markdown, error mapping, nonces, config."""

from __future__ import annotations

import aiohttp
import discord
import pytest

from gateway.config import ConfigError, parse_config
from gateway.platforms.base import MaybeSent, PermanentError, RateLimited, TransientError
from gateway.platforms.discord.outbound import render
from gateway.platforms.discord.transport import NONCE_MAX, NONCE_WINDOW, map_error, nonce


def test_render_turns_tables_into_aligned_code_or_lists_and_leaves_code_alone() -> None:
    narrow = "| a | b |\n|---|---|\n| 1 | 22 |"
    assert render(narrow) == "```\na | b\n--+---\n1 | 22\n```"
    wide = ("| name | what it does |\n| --- | --- |\n| " + "x" * 40 + " | " + "y" * 40 + " |\n"
            "| second | short |")
    assert render(wide) == f"- **{'x' * 40}** — what it does: {'y' * 40}\n- **second** — what it does: short"
    code = "```\n| a | b |\n|---|---|\n#### not a heading\n---\n```"
    assert render(code) == code
    assert render("#### Deep\n### Kept\n---\n![chart](https://x/c.png)") == \
        "**Deep**\n### Kept\n\n[chart](https://x/c.png)"
    assert render("a | b without a rule under it") == "a | b without a rule under it"


class _Response:
    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.reason = "reason"
        self.headers = headers or {}


def test_discord_errors_map_to_the_delivery_layers_classes() -> None:
    forbidden = discord.Forbidden(_Response(403), {"code": 50013, "message": "Missing Permissions"})  # type: ignore[arg-type]
    unknown = discord.NotFound(_Response(404), {"code": 10003, "message": "Unknown Channel"})  # type: ignore[arg-type]
    server = discord.DiscordServerError(_Response(502), "bad gateway")  # type: ignore[arg-type]
    cloudflare = discord.HTTPException(_Response(429, {"Retry-After": "7"}), "banned")  # type: ignore[arg-type]
    assert isinstance(map_error(forbidden), PermanentError) and "50013" in str(map_error(forbidden))
    assert isinstance(map_error(unknown), PermanentError)
    assert isinstance(map_error(server), TransientError)
    assert isinstance(map_error(aiohttp.ClientConnectionError("reset")), TransientError)
    # A connection that broke once the request may have been taken: a resend may show twice, unless the nonce
    # (a channel message's, for a few minutes) makes Discord return the message it made.
    refused = aiohttp.ConnectionTimeoutError("connecting took too long")
    assert not isinstance(map_error(refused), MaybeSent) and isinstance(map_error(refused), TransientError)
    cut = map_error(aiohttp.ServerDisconnectedError(), NONCE_WINDOW)
    assert isinstance(cut, MaybeSent) and cut.recognised_for == NONCE_WINDOW
    assert map_error(aiohttp.ClientOSError(104, "Connection reset by peer")).recognised_for == 0.0
    limited = map_error(discord.RateLimited(45.0))
    assert isinstance(limited, RateLimited) and limited.retry_after == 45.0
    limited = map_error(cloudflare)
    assert isinstance(limited, RateLimited) and limited.retry_after == 7.0


def test_nonce_is_short_stable_and_differs_between_profiles_messages() -> None:
    one = nonce("herald-1-0", "100", "555", "hello")
    assert one is not None and len(one) <= NONCE_MAX
    assert one == nonce("herald-1-0", "100", "555", "hello")  # the same chunk resent: the same nonce
    assert one != nonce("herald-1-0", "100", "556", "hello")  # another database's inbox row 1
    assert nonce(None, "100") is None


def test_discord_config_takes_numeric_ids_and_durations() -> None:
    cfg = parse_config({"platforms": {"discord": {"allowed_users": [111], "allowed_roles": ["222"],
                                                  "guild_ids": [333], "backfill_max_age": "30m"}}})
    dc = cfg.platforms.discord  # type: ignore[attr-defined]
    assert dc.allowed_users == ["111"] and dc.allowed_roles == ["222"] and dc.guild_ids == ["333"]
    assert dc.backfill_max_age == 1800.0
    with pytest.raises(ConfigError, match=r"platforms\.discord\.allowed_users.*Copy ID"):
        parse_config({"platforms": {"discord": {"allowed_users": ["@alice"]}}})
    with pytest.raises(ConfigError, match=r"platforms\.discord\.gateway_url"):
        parse_config({"platforms": {"discord": {"gateway_url": "http://x"}}})
    with pytest.raises(ConfigError, match=r"platforms\.discord\.backfill_max_age"):
        parse_config({"platforms": {"discord": {"backfill_max_age": "soon"}}})
