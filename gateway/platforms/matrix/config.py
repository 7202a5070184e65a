"""``platforms.matrix``: the homeserver and the bot's account, how it logs in, who may talk and where, encryption."""

from __future__ import annotations

import importlib.util
import re
from typing import Annotated, Any
from urllib.parse import quote

from pydantic import AfterValidator, ConfigDict, Field, field_validator

from gateway.kernel.configbase import ChatPlatformConfig, missing_env, secret

_USER_ID = re.compile(r"@[^:\s]+:\S+")
_ROOM_ID = re.compile(r"![^:\s]+:\S+")
# A room id (its server part may carry a port: "!a:example.org:8448"), then a thread's root event after a ':'.
_HOME = re.compile(r"(![^:\s]+:(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::\d{1,5})?)(?::(\$\S+))?")


def _user_id(item: str) -> str:
    if not _USER_ID.fullmatch(item):
        # A common slip: "alice" or "alice:example.org"; Matrix user ids are "@localpart:server".
        raise ValueError(f"Matrix user ids look like @alice:example.org (got {item!r})")
    return item


def _room_id(item: str) -> str:
    if item.startswith("#"):
        raise ValueError(f"{item!r} is a room alias: give the room's id (!…:server, in Element under Room settings "
                         "→ Advanced)")
    if not _ROOM_ID.fullmatch(item):
        raise ValueError(f"Matrix room ids look like !abcdef:example.org (got {item!r})")
    return item


MatrixUserId = Annotated[str, AfterValidator(_user_id)]
MatrixRoomId = Annotated[str, AfterValidator(_room_id)]


class MatrixConfig(ChatPlatformConfig):
    # ``allowed_rooms`` in config.yaml is the contract's allowed_channels (what the access check reads).
    model_config = ConfigDict(serialize_by_alias=True)

    # The homeserver's client-server API root, e.g. https://matrix.example.org (not the server name).
    homeserver: str | None = None
    user_id: MatrixUserId | None = None  # the bot's account
    access_token_env: str | None = "MATRIX_ACCESS_TOKEN"
    # Without an access token: the password's variable, for a first login whose device (and token) is kept in the
    # profile's home (matrix-session.json, 0600); later starts use that and no longer need the password.
    password_env: str | None = None
    device_name: str = "Herald"  # the name the login gives the device (shown in the account's sessions)
    allowed_users: list[MatrixUserId] = Field(default_factory=list)
    admins: list[MatrixUserId] = Field(default_factory=list)
    # The rooms (not DMs) the bot may be used in; empty = any room it is invited to by someone allowed.
    allowed_channels: list[MatrixRoomId] = Field(default_factory=list, alias="allowed_rooms")
    require_mention: bool = True  # in rooms; a thread the bot posted in, or a reply to it, needs no mention
    # End-to-end encrypted rooms (keys in the profile's home, matrix-store/); off: such a room is told once
    # that the bot cannot read it.
    encryption: bool = False
    max_media_mb: float = Field(default=50.0, gt=0, le=2000)

    @field_validator("homeserver")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError("must start with https:// (or http://), e.g. https://matrix.example.org")
        return v.rstrip("/") if v else v

    @field_validator("home_chat", mode="before")
    @classmethod
    def _home_room(cls, v: Any) -> Any:
        """``!room:server`` (or ``!room:server:$thread``) as a target's chat[:thread], its ':'s encoded."""
        if isinstance(v, str) and (match := _HOME.fullmatch(v.strip())):
            room, thread = match.groups()
            return quote(room, safe="!") + (f":{quote(thread, safe='$')}" if thread else "")
        return v

    def problems(self) -> list[tuple[str, str]]:
        out = []
        if not self.homeserver:
            out.append(("homeserver", "not set: the address of the bot's homeserver, e.g. https://matrix.example.org"))
        if not self.user_id:
            out.append(("user_id", "not set: the bot's account, e.g. @herald:example.org"))
        if not secret(self.access_token_env) and not self.password_env:
            name = self.access_token_env or "MATRIX_ACCESS_TOKEN"
            out.append(("access_token_env", f"{missing_env(name)} (or set password_env for a first login)"))
        if self.encryption and importlib.util.find_spec("vodozemac") is None:
            out.append(("encryption", "true, but matrix-nio's encryption support is not installed "
                                      "(pip install 'matrix-nio[e2e]')"))
        return out
