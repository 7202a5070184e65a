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


class TerminalConfig(_Strict):
    enabled: bool = True  # dangerous commands still need approval in the chat (approvals.*)
    # The workspace: the only place commands (and write_file) may write. None = <profile home>/workspace.
    cwd: str | None = None
    timeout_seconds: float = Field(default=120.0, gt=0)
    max_output_chars: int = Field(default=20_000, ge=100)
    # tools/sandbox.py. auto = bubblewrap when it is installed (else the terminal is off); none = unsandboxed.
    sandbox: Literal["auto", "bwrap", "none"] = "auto"
    network: bool = True
    # Names of the daemon's environment variables commands may see (the rest never reach them).
    env_passthrough: list[str] = Field(default_factory=list)
    # More files or folders the agent must not see (besides Herald's home, config, database, lock folder).
    hidden_paths: list[str] = Field(default_factory=list)
    # Tasks (processes and threads) one command may run at once: a fork bomb stops there. 0 = no cap.
    max_processes: int = Field(default=256, ge=0)

    @field_validator("env_passthrough")
    @classmethod
    def _env_names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name (letters, digits and _)")
            if name in ("HOME", "TMPDIR"):
                raise ValueError(f"{name} cannot be passed through: commands always get the workspace and /tmp")
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
