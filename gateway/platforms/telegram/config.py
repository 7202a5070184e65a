"""``platforms.telegram``: the bot token's variable, polling or webhook, groups and media."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from gateway.kernel.configbase import ChatPlatformConfig


def _numeric(item: str) -> str:
    if not item.lstrip("-").isdigit():
        # A common slip: "@alice" is a username; Telegram gives every user and chat a number.
        raise ValueError(f"Telegram ids are numbers (got {item!r}; @userinfobot tells a user's id)")
    return item


TelegramId = Annotated[str, AfterValidator(_numeric)]


class TelegramConfig(ChatPlatformConfig):
    allowed_users: list[TelegramId] = Field(default_factory=list)
    admins: list[TelegramId] = Field(default_factory=list)
    allowed_channels: list[TelegramId] = Field(default_factory=list)
    token_env: str = "TELEGRAM_BOT_TOKEN"
    base_url: str | None = None
    mode: Literal["polling", "webhook"] = "polling"
    public_url: str | None = None
    webhook_path: str = "/telegram/webhook"
    webhook_secret_env: str = "TELEGRAM_WEBHOOK_SECRET"
    require_mention: bool = True
    max_media_mb: float = Field(default=20.0, gt=0, le=2000)

    @field_validator("webhook_path")
    @classmethod
    def _absolute_path(cls, v: str) -> str:
        if not v.startswith("/") or "{" in v:
            raise ValueError("must be an absolute URL path such as /telegram/webhook")
        return v

    def problems(self) -> list[tuple[str, str]]:
        out = super().problems()
        if self.mode == "webhook" and not self.public_url:
            out.append(("public_url", "not set, but mode is webhook: give the https:// address Telegram should "
                                      "post updates to (or use mode: polling)"))
        return out

    @field_validator("base_url", "public_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v
