"""``platforms.whatsapp``: the Cloud API number, the secrets' variables, who may talk, the notify template."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator

from gateway.kernel.configbase import ChatPlatformConfig, StrictModel, id_text, missing_env, secret

_NUMBER = re.compile(r"\+?[0-9]{6,15}")
TEXT = "{text}"  # in a template's parameters: the message's words


def e164(value: str) -> str:
    """``+15551230001``, ``15551230001`` or ``+1 555-123-0001`` -> ``+15551230001``: the one form Herald keeps a
    number in (Meta writes it without the ``+``; people with one, and with spaces)."""
    compact = re.sub(r"[\s().-]", "", value)
    if not _NUMBER.fullmatch(compact):
        raise ValueError(f"WhatsApp numbers are written in E.164 form, such as +15551230001 (got {value!r})")
    return "+" + compact.lstrip("+")


def _number(item: Any) -> Any:
    return e164(item) if isinstance(item, str) else item


Number = Annotated[str, BeforeValidator(id_text), AfterValidator(_number)]


class Template(StrictModel):
    """An approved message template: outside the 24-hour window WhatsApp delivers nothing else."""

    # The template's name as approved in WhatsApp Manager; empty: none (a message that needs one is refused).
    name: str = Field(default="", max_length=512)
    language: str = Field(default="en_US", min_length=2, max_length=15)  # the template's language code
    # What fills the template body's parameters: a list for {{1}}, {{2}} ... in order, or a mapping for named
    # parameters ({{message}}). "{text}" in a value is the message, on one line (WhatsApp refuses a parameter
    # with a line break or a tab); anything else is sent as written.
    body: list[str] | dict[str, str] = Field(default_factory=lambda: [TEXT])
    # The most characters of the message one template carries; a longer one goes in several, numbered.
    max_text: int = Field(default=1000, ge=50, le=32_000)

    @model_validator(mode="after")
    def _carries_the_text(self) -> Template:
        values = self.body.values() if isinstance(self.body, dict) else self.body
        if not any(TEXT in v for v in values):
            raise ValueError(f"body must carry the message: put \"{TEXT}\" in one of its parameters")
        return self


class Templates(StrictModel):
    # What a message outside the window is sent as (a cron job's result, a notice to the home chat).
    notify: Template = Field(default_factory=Template)


class WhatsAppConfig(ChatPlatformConfig):
    # E.164 numbers of the people who may talk to the agent (+15551230001; with or without the "+").
    allowed_users: list[Number] = Field(default_factory=list)
    admins: list[Number] = Field(default_factory=list)
    home_chat: Number | None = None
    # The business number's id (WhatsApp Manager > Phone numbers, or the app's API Setup page): not the number.
    phone_number_id: str = ""
    access_token_env: str = "WHATSAPP_ACCESS_TOKEN"  # a system user's permanent token (whatsapp_business_messaging)
    app_secret_env: str = "WHATSAPP_APP_SECRET"  # signs every webhook POST (X-Hub-Signature-256)
    verify_token_env: str = "WHATSAPP_VERIFY_TOKEN"  # any string you choose, given to Meta with the callback URL
    # The Graph API root with its version; a proxy or a test fake.
    api_base_url: str = "https://graph.facebook.com/v23.0"
    templates: Templates = Field(default_factory=Templates)
    max_media_mb: float = Field(default=25.0, gt=0, le=100)  # files people send are downloaded up to this

    _phone_id = field_validator("phone_number_id", mode="before")(id_text)

    @field_validator("phone_number_id")
    @classmethod
    def _digits(cls, v: str) -> str:
        if v and not v.isdigit():
            raise ValueError("the phone number id is a number given by Meta (API Setup), not the phone number itself")
        return v

    @field_validator("api_base_url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https:// (e.g. https://graph.facebook.com/v23.0)")
        return v.rstrip("/")

    def problems(self) -> list[tuple[str, str]]:
        out = super().problems()
        if not self.phone_number_id:
            out.append(("phone_number_id", "not set: give the id of the business number (WhatsApp Manager > Phone "
                                           "numbers, or the app's WhatsApp > API Setup page)"))
        if not secret(self.app_secret_env):
            out.append(("app_secret_env", missing_env(self.app_secret_env)))
        return out
