"""The tools' own settings (``tools.*`` in config.yaml): the terminal and its sandbox, and result sizes.

They live beside the tools, which never import ``gateway``; gateway/config.py puts them into the config tree.
"""

from __future__ import annotations

import os
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Strict(BaseModel):
    # As every config model: an unknown key is an error naming its path.
    model_config = ConfigDict(extra="forbid", validate_default=True)


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOMAIN = re.compile(r"(?=.{1,253}$)([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}"
                     r"[A-Za-z0-9])?)*|[0-9A-Fa-f:.]+")


class TerminalConfig(_Strict):
    enabled: bool = True  # dangerous commands still need approval in the chat (approvals.*)
    # The workspace: the only place commands (and write_file) may write. None = <profile home>/workspace.
    cwd: str | None = None
    timeout_seconds: float = Field(default=120.0, gt=0)
    max_output_chars: int = Field(default=20_000, ge=100)
    # tools/sandbox.py. auto = bubblewrap when it is installed (else the terminal is off); none = unsandboxed.
    sandbox: Literal["auto", "bwrap", "none"] = "auto"
    # false: no network at all. true: through Herald's proxy only (tools/egress.py): public hosts, never this
    # machine's loopback services, its abstract sockets or private addresses.
    network: bool = True
    # Names commands may reach through the proxy ("example.com", "*.example.com" for the names below it);
    # empty: any public host.
    allowed_domains: list[str] = Field(default_factory=list)
    # Ports of the host's loopback (127.0.0.1) commands may use, at the same port on their own loopback.
    host_ports: list[int] = Field(default_factory=list)
    # Names of the daemon's environment variables commands may see (the rest never reach them).
    env_passthrough: list[str] = Field(default_factory=list)
    # More files or folders the agent must not see (besides Herald's home, config, database, lock folder).
    hidden_paths: list[str] = Field(default_factory=list)
    # Tasks (processes and threads) one command may run at once: a fork bomb stops there. 0 = no cap.
    max_processes: int = Field(default=256, ge=0)
    # What one command may consume (tools/limits.py says what happens at each). 0 = no limit.
    max_memory_mb: int = Field(default=2048, ge=0)
    max_cpu_seconds: int = Field(default=300, ge=0)
    max_file_mb: int = Field(default=1024, ge=0)
    max_open_files: int = Field(default=1024, ge=0)
    # Checked after each terminal command; the agent is told when the workspace holds more.
    max_workspace_mb: int = Field(default=10240, ge=0)

    @field_validator("env_passthrough")
    @classmethod
    def _env_names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name (letters, digits and _)")
            if name in ("HOME", "TMPDIR"):
                raise ValueError(f"{name} cannot be passed through: commands always get the workspace and /tmp")
        return v

    @field_validator("allowed_domains")
    @classmethod
    def _domains(cls, v: list[str]) -> list[str]:
        for entry in v:
            name = entry[2:] if entry.startswith("*.") else entry
            if not _DOMAIN.fullmatch(name.rstrip(".")):
                raise ValueError(f"{entry!r} is not a host name, *.domain or IP address")
        return [e.lower().rstrip(".") for e in v]

    @field_validator("host_ports")
    @classmethod
    def _ports(cls, v: list[int]) -> list[int]:
        for port in v:
            if not 1024 <= port <= 65535:
                raise ValueError(f"{port}: only ports 1024-65535 (commands cannot open a lower one on their loopback)")
        return v

    @field_validator("max_open_files")
    @classmethod
    def _enough_files(cls, v: int) -> int:
        if 0 < v < 64:
            raise ValueError("at least 64 (bash and most programs need a few dozen), or 0 for no limit")
        return v

    @field_validator("hidden_paths")
    @classmethod
    def _absolute(cls, v: list[str]) -> list[str]:
        for path in v:
            if not os.path.isabs(os.path.expanduser(path)):
                raise ValueError(f"{path!r} is not an absolute path")
        return v


class ClarifyConfig(_Strict):
    """The agent asks the person a question (tools/clarify.py)."""

    enabled: bool = True
    # How long the agent waits for an answer; then it is told nobody answered and goes on.
    timeout_seconds: float = Field(default=600.0, gt=0)


class SendMessageConfig(_Strict):
    """The agent sends a message to another chat (tools/send_message.py)."""

    enabled: bool = True
    # Targets it may send to without asking the person (the tool's syntax: a platform's name is its home chat,
    # or platform:chat_id[:thread_id]); any other chat but the one it talks in asks, like a dangerous command.
    allow: list[str] = Field(default_factory=list)


class FetchConfig(_Strict):
    """The agent reads a page from the internet (tools/online.py)."""

    enabled: bool = True
    # Loopback, private, link-local and cloud-metadata addresses are refused (checked after DNS, and on every
    # redirect); true lets the agent reach them (a page on this machine or the LAN).
    allow_private: bool = False
    timeout_seconds: float = Field(default=20.0, gt=0, le=300)
    max_bytes: int = Field(default=5_000_000, ge=10_000)  # of the page downloaded; more is not read
    max_chars: int = Field(default=20_000, ge=500)  # of readable text handed to the agent


class SearchConfig(_Strict):
    """The agent searches the internet (tools/online.py) through a search service; off while ``url`` is unset."""

    provider: Literal["searxng"] = "searxng"  # SearXNG's JSON API (format=json enabled in its settings.yml)
    url: str | None = None  # the service's base address, e.g. http://127.0.0.1:8888
    max_results: int = Field(default=5, ge=1, le=20)
    timeout_seconds: float = Field(default=15.0, gt=0, le=120)

    @field_validator("url")
    @classmethod
    def _http(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"https?://[^/\s]+", v):
            raise ValueError("an http(s) address, e.g. http://127.0.0.1:8888")
        return v.rstrip("/") if v else v


class ToolsConfig(_Strict):
    max_result_chars: int = Field(default=50_000, ge=100)
    terminal: TerminalConfig = Field(default_factory=TerminalConfig)
    clarify: ClarifyConfig = Field(default_factory=ClarifyConfig)
    send_message: SendMessageConfig = Field(default_factory=SendMessageConfig)
    web_fetch: FetchConfig = Field(default_factory=FetchConfig)
    web_search: SearchConfig = Field(default_factory=SearchConfig)
