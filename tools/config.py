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


class ToolsConfig(_Strict):
    max_result_chars: int = Field(default=50_000, ge=100)
    terminal: TerminalConfig = Field(default_factory=TerminalConfig)
