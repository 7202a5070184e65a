"""What the gateway hides from the agent, where its workspace is, and what start-up says about the sandbox.

The sandbox itself is tools/sandbox.py; this module only knows Herald's own files (``Paths``, the
database URL, the credential lock folder) and turns them into the policy every turn's tools get.
"""

from __future__ import annotations

import os
from pathlib import Path

import structlog

from gateway.cluster.locks import lock_dir
from gateway.config import Config, ConfigError, Paths, herald_base
from tools.sandbox import (
    SandboxPolicy,
    daemon_homes,
    hidden_reason,
    layers,
    make_policy,
    resolve_mode,
    startup_problem,
)

log = structlog.get_logger("herald.sandbox")


def _sqlite_file(url: str | None) -> Path | None:
    if not url or not url.startswith("sqlite"):
        return None
    from sqlalchemy.engine import make_url

    database = make_url(url).database
    if not database or database == ":memory:":
        return None
    return Path(os.path.abspath(database))


# Where the daemon user's own credentials usually live. The whole home is hidden (daemon_homes); these are
# named as well for a workspace that contains the home (tools.terminal.cwd: ~), where they are hidden again
# after the workspace is bound.
CREDENTIAL_PATHS = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker/config.json", ".netrc", ".git-credentials",
                    ".pgpass", ".my.cnf", ".pypirc", ".npmrc", ".vault-token", ".password-store", ".config/gh",
                    ".config/gcloud", ".config/hub", ".local/share/keyrings")


def herald_hidden(cfg: Config, paths: Paths) -> list[Path]:
    """Herald's own files: never visible, and the workspace may not lie inside them."""
    from gateway.platforms import home_files

    hidden = [herald_base(), paths.home, paths.env_file, *(paths.home / name for _, name in home_files()),
              paths.media_dir, paths.logs_dir, paths.backups_dir, paths.config_file, paths.db_file, lock_dir().parent]
    db = _sqlite_file(cfg.database.url)
    if db is not None:
        hidden += [db, *(db.with_name(db.name + suffix) for suffix in ("-wal", "-shm", "-journal"))]
    return hidden


def hidden_paths(cfg: Config, paths: Paths) -> list[Path]:
    """Everything the agent must never see: Herald's files, and the daemon user's home and credential files
    (tools.terminal.hidden_paths is added by make_policy). The workspace may lie inside the home: it is
    bound again after the hides (tools/sandbox.py layers)."""
    homes = daemon_homes()
    return [*herald_hidden(cfg, paths), *homes, *(h / p for h in homes for p in CREDENTIAL_PATHS)]


def default_workspace(paths: Paths) -> Path:
    return paths.home / "workspace"


def workspace(cfg: Config, paths: Paths) -> Path:
    """tools.terminal.cwd, or <profile home>/workspace. ``ConfigError`` when cwd lies inside a hidden folder."""
    configured = cfg.tools.terminal.cwd
    if not configured:
        return default_workspace(paths)
    ws = Path(os.path.realpath(Path(configured).expanduser()))
    default = Path(os.path.realpath(default_workspace(paths)))
    if ws == default or default in ws.parents:
        return ws
    extra = [Path(p).expanduser() for p in cfg.tools.terminal.hidden_paths]
    for hidden in [*herald_hidden(cfg, paths), *extra]:
        real = Path(os.path.realpath(hidden))
        if ws == real or real in ws.parents:
            raise ConfigError(f"tools.terminal.cwd: {configured} lies inside {hidden}, which the agent must not "
                              f"see; use a folder outside it, or leave cwd unset ({default_workspace(paths)})")
    return ws


def policy(cfg: Config, paths: Paths, create: bool = True) -> SandboxPolicy:
    """The policy for every tool call of this daemon; creates the default workspace (0700) when missing."""
    ws = workspace(cfg, paths)
    if create and not cfg.tools.terminal.cwd:
        ws.mkdir(mode=0o700, parents=True, exist_ok=True)
    return make_policy(cfg.tools.terminal, workspace=ws, hidden=hidden_paths(cfg, paths))


def visible_to_agent(cfg: Config, paths: Paths, path: Path) -> bool:
    """Whether the agent's commands or file tools could read ``path`` (all of it, when they run unsandboxed)."""
    try:
        result = policy(cfg, paths, create=False)
    except ConfigError:  # a bad tools.terminal.cwd: judge by the default workspace
        result = make_policy(cfg.tools.terminal, workspace=default_workspace(paths), hidden=hidden_paths(cfg, paths))
    if result.mode == "none":
        return True
    return hidden_reason(os.path.realpath(path), layers(result)) is None


def _local_database(url: str | None) -> str | None:
    """The host of a PostgreSQL database on this machine, which sandboxed commands can reach by network."""
    if not url or not url.startswith("postgresql"):
        return None
    from sqlalchemy.engine import make_url

    host = make_url(url).host or "localhost"  # no host: a unix socket, on this machine
    return host if host in ("localhost", "127.0.0.1", "::1") or host.startswith("/") else None


def warnings(cfg: Config) -> list[str]:
    """The sandbox's start-up warnings: unsandboxed by choice, the terminal off for want of bubblewrap, or
    Herald's own database within the network reach of the agent's commands."""
    terminal = cfg.tools.terminal
    if not terminal.enabled:
        return []
    out = []
    host = _local_database(cfg.database.url)
    if host is not None and terminal.network and terminal.sandbox != "none":
        out.append(f"the agent's commands share this machine's network, where Herald's PostgreSQL listens "
                   f"({host}): make sure it needs a password (not in the agent's reach), or set "
                   "tools.terminal.network: false")
    line = startup_problem(*resolve_mode(terminal.sandbox, terminal.network))
    if line:
        out.append(line)
    if terminal.cwd and os.path.realpath(Path(terminal.cwd).expanduser()) == os.path.realpath(Path.home()):
        out.append("tools.terminal.cwd is the home folder: commands and write_file can change ~/.bashrc and "
                   "other start-up files")
    return out


def setup(cfg: Config, paths: Paths) -> tuple[SandboxPolicy, list[str]]:
    """At start-up: the policy, and the warning lines (logged here; ``herald run`` prints them too)."""
    result = policy(cfg, paths)
    lines = warnings(cfg)
    for line in lines:
        log.warning("sandbox_warning", message=line)
    log.info("sandbox", mode=result.mode, workspace=str(result.workspace), network=result.network,
             max_processes=result.max_processes, counted=result.nproc_scope)
    if result.mode != "off" and result.max_processes and result.nproc_scope == "none":
        log.warning("sandbox_no_process_cap", message="Herald runs as root, whose processes the kernel never holds "
                    "to a process limit: tools.terminal.max_processes cannot apply (run Herald as its own user)")
    return result, lines
