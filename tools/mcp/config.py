"""``mcp.servers.<name>``: the MCP servers the agent may use (gateway/config.py puts ``mcp`` into the tree).

A server is either a command (stdio, run in the sandbox) or a URL (streamable HTTP, or SSE where a server still
needs it). Secrets never appear in the config: a stdio server's variables and an HTTP server's headers are named
by ``*_env`` keys whose values are the daemon's environment variables to read.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")
SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
# What the sandbox sets itself: a server cannot be handed these (it always gets the workspace and its own /tmp).
_RESERVED = ("HOME", "TMPDIR", "PATH")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class ToolFilter(_Strict):
    # Globs over the server's own tool names: only these (empty: all), then without these.
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)

    def allows(self, name: str) -> bool:
        if self.include and not any(fnmatch.fnmatchcase(name, g) for g in self.include):
            return False
        return not any(fnmatch.fnmatchcase(name, g) for g in self.exclude)


class McpServerConfig(_Strict):
    enabled: bool = True
    # stdio: the program and its arguments, started in the workspace inside the sandbox.
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    # The only variables the server gets besides PATH, HOME (the workspace), locale and the proxy: "NAME_env: VAR"
    # hands it NAME with the value of the daemon's variable VAR.
    env: dict[str, str] = Field(default_factory=dict)
    # auto: inside bubblewrap like the terminal's commands (the server does not start without it); none: unsandboxed,
    # with the daemon's view of the machine (warned at start).
    sandbox: Literal["auto", "none"] = "auto"
    # The server's network goes through the sandbox's proxy (tools.terminal.network and allowed_domains); false: none.
    network: bool = True
    # Tasks (processes and threads) the server may run at once; 0 = no cap.
    max_processes: int = Field(default=64, ge=0)
    # Memory of the server's processes (as tools.terminal.max_memory_mb; 0 = no limit: runtimes such as node reserve
    # far more address space than they use).
    max_memory_mb: int = Field(default=0, ge=0)
    # HTTP: the server's endpoint, and headers whose values come from the environment ("Authorization: VAR").
    url: str | None = None
    headers_env: dict[str, str] = Field(default_factory=dict)
    transport: Literal["streamable_http", "sse"] = "streamable_http"
    # Reach a loopback, private or link-local address (a server on this machine or the LAN); off: public ones only.
    allow_private: bool = False
    # One tool call may take this long; then the model is told it timed out.
    timeout_seconds: float = Field(default=60.0, gt=0, le=3600)
    # Starting and listing tools may take this long before the server counts as down (and is retried).
    startup_timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    tools: ToolFilter = Field(default_factory=ToolFilter)
    # never: no tool asks; dangerous: tools not marked read-only (readOnlyHint) ask; always: every call asks.
    approve: Literal["never", "dangerous", "always"] = "dangerous"
    # Calls one at a time (a server that cannot take concurrent requests).
    serialize: bool = False
    # A result longer than this is cut (None: tools.max_result_chars).
    max_result_chars: int | None = Field(default=None, ge=100)

    @field_validator("env")
    @classmethod
    def _env(cls, v: dict[str, str]) -> dict[str, str]:
        for key, source in v.items():
            name = key[:-4] if key.endswith("_env") else None
            if not name or not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{key!r}: keys are NAME_env (the value names the daemon's variable to read; "
                                 "literal values are not taken, so no secret sits in the config)")
            if name in _RESERVED:
                raise ValueError(f"{name} cannot be set: the sandbox sets it")
            if not _ENV_NAME.fullmatch(source):
                raise ValueError(f"{key}: {source!r} is not an environment variable name")
        return v

    @field_validator("headers_env")
    @classmethod
    def _headers(cls, v: dict[str, str]) -> dict[str, str]:
        for header, source in v.items():
            if not _HEADER.fullmatch(header):
                raise ValueError(f"{header!r} is not an HTTP header name")
            if not _ENV_NAME.fullmatch(source):
                raise ValueError(f"{header}: {source!r} is not an environment variable name")
        return v

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{v!r} is not an http(s) URL")
        if parts.username or parts.password:
            raise ValueError("no credentials in the URL: use headers_env")
        return v

    @model_validator(mode="after")
    def _one_kind(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("set either command (a stdio server) or url (an HTTP server)")
        if self.url is not None and (self.args or self.env):
            raise ValueError("args and env are for a command; an HTTP server takes headers_env")
        if self.command is not None and self.headers_env:
            raise ValueError("headers_env is for a url; a command takes env")
        return self

    @property
    def kind(self) -> str:
        return "stdio" if self.command is not None else self.transport


class McpConfig(_Strict):
    servers: dict[str, McpServerConfig] = Field(default_factory=dict)

    @field_validator("servers")
    @classmethod
    def _names(cls, v: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        for name in v:
            if not SERVER_NAME.fullmatch(name):
                raise ValueError(f"{name!r}: a server's name is 1-32 letters, digits, - and _ (it names its tools)")
        return v

    def enabled(self) -> dict[str, McpServerConfig]:
        return {name: s for name, s in self.servers.items() if s.enabled}
