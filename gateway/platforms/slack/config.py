"""``platforms.slack``: Socket Mode or HTTP (Events API), the tokens' variables, mentions and threads."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from gateway.kernel.configbase import ChatPlatformConfig, missing_env, secret

_USER_ID = re.compile(r"[UW][A-Z0-9]{2,}")


def _user_id(item: str) -> str:
    if not _USER_ID.fullmatch(item):
        # A common slip: "@alice" or a display name. Slack shows a member's id under their profile's "⋮" menu.
        raise ValueError(f"Slack user ids look like U0123ABCD (got {item!r}; a profile's ⋮ menu has "
                         "'Copy member ID')")
    return item


SlackUserId = Annotated[str, AfterValidator(_user_id)]


class SlackConfig(ChatPlatformConfig):
    allowed_users: list[SlackUserId] = Field(default_factory=list)
    admins: list[SlackUserId] = Field(default_factory=list)
    # socket: Socket Mode over an outbound websocket (the app token), nothing public needed.
    # http: Slack POSTs events, button presses and /herald to <public url>/slack/events (the signing secret).
    mode: Literal["socket", "http"] = "socket"
    bot_token_env: str = "SLACK_BOT_TOKEN"  # xoxb-…
    app_token_env: str = "SLACK_APP_TOKEN"  # xapp-… with connections:write (socket mode)
    signing_secret_env: str = "SLACK_SIGNING_SECRET"  # http mode
    # slack_sdk's base_url: GovSlack (https://slack-gov.com/api/), a proxy, or a test fake.
    api_base_url: str | None = None
    require_mention: bool = True  # in channels; threads the bot is in need no mention
    reply_in_thread: bool = True  # a channel message is answered in its thread (the thread is the session)
    max_file_mb: float = Field(default=20.0, gt=0, le=1000)  # files people share are downloaded up to this

    @field_validator("api_base_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v if v.endswith("/") else v + "/"

    def problems(self) -> list[tuple[str, str]]:
        """The bot token, and the one secret the mode connects with: Socket Mode the app-level token, HTTP mode
        the signing secret. The other one is never read, so it need not be set (the default check asks for
        every ``*token_env``, the app token included, whatever the mode)."""
        out = []
        if not secret(self.bot_token_env):
            out.append(("bot_token_env", missing_env(self.bot_token_env)))
        if self.mode == "socket":
            if not secret(self.app_token_env):
                out.append(("app_token_env", f"{missing_env(self.app_token_env)} (mode: socket connects with this "
                                             "app-level xapp-… token; or use mode: http)"))
        elif not secret(self.signing_secret_env):
            out.append(("signing_secret_env", f"{missing_env(self.signing_secret_env)} (mode: http checks Slack's "
                                              "requests with this signing secret: Basic Information > Signing "
                                              "Secret)"))
        return out
