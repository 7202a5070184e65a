"""The base of every config model: strict (an unknown key is an error naming its path), plus what every
platform section has in common, and reading a secret from the environment. Platform modules declare their
own section on top of ``PlatformConfig`` and import only this; gateway/config.py assembles ``platforms.*``
from the platform registry."""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Where a secret may go besides the environment, in words; gateway/ops/preflight.py puts the profile's real path in.
ENV_FILE = "the .env file in Herald's home"


def missing_env(name: str, env_file: str = ENV_FILE) -> str:
    """What to do about a secret's variable that is not set: the same words wherever it is said."""
    return f"the environment variable {name} is not set: export it, or add the line {name}=<value> to {env_file}"


def secret(env_name: str | None) -> str | None:
    """The value of the environment variable a ``*_env`` key names (secrets live only there)."""
    if not env_name:
        return None
    return os.environ.get(env_name) or None


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


def _one_id(v: Any) -> Any:
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    return v.strip() if isinstance(v, str) else v


def id_text(v: Any) -> Any:
    """Platform ids are strings; YAML reads 123456789 as an int, which is accepted and converted."""
    return [_one_id(x) for x in v] if isinstance(v, list) else _one_id(v)


class PlatformConfig(StrictModel):
    enabled: bool = False
    # Where cron jobs delivering to this platform's name send their results: chat id, or chat_id:thread_id
    # (percent-encode a ':' inside an id as %3A). /sethome in a chat overrides it.
    home_chat: str | None = None

    _home = field_validator("home_chat", mode="before")(id_text)

    def problems(self) -> list[tuple[str, str]]:
        """What stops this platform from starting, found without connecting: (key, message) pairs.

        Checked at start-up and by ``herald check-config`` when the platform is enabled. By default: every
        ``*token_env`` key must name a variable that is set (a platform with other required secrets, or
        conditions between its keys, extends this).
        """
        out = []
        for field in type(self).model_fields:
            if field.endswith("token_env"):
                name = getattr(self, field)
                if isinstance(name, str) and not secret(name):
                    out.append((field, missing_env(name)))
        return out


class ChatPlatformConfig(PlatformConfig):
    """A platform whose senders the gateway checks (every platform but the owner's web chat)."""

    # User ids who may talk to the agent here (besides access.allowed_users and paired users).
    allowed_users: list[str] = Field(default_factory=list)
    # User ids who may also run commands that change things for others (/cron remove, /sethome, /pair).
    admins: list[str] = Field(default_factory=list)
    # When set, group chats and channels other than these are ignored (DMs are not affected).
    allowed_channels: list[str] = Field(default_factory=list)

    _ids = field_validator("allowed_users", "admins", "allowed_channels", mode="before")(id_text)
