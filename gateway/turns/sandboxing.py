"""What the gateway hides from the agent, where its workspace is, and what start-up says about the sandbox.

The sandbox itself is tools/sandbox.py; this module only knows Herald's own files (``Paths``, the
database URL, the credential lock folder) and turns them into the policy every turn's tools get. With
network on, :func:`setup` also starts the commands' way out (tools/egress.py), which the runner stops.
"""

from __future__ import annotations

import os
from pathlib import Path

import structlog

from gateway.cluster.locks import lock_dir
from gateway.config import Config, ConfigError, Paths, herald_base
from tools import bridge
from tools.egress import Egress, EgressPoint
from tools.sandbox import (
    PRIVATE_TMP,
    SYSTEM_HIDDEN,
    SandboxPolicy,
    daemon_homes,
    hidden_reason,
    layers,
    make_policy,
    resolve_mode,
    startup_problem,
    within,
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


def policy(cfg: Config, paths: Paths, create: bool = True, egress: EgressPoint | None = None) -> SandboxPolicy:
    """The policy for every tool call of this daemon; creates the default workspace (0700) when missing.
    ``egress``: the running proxy, commands' way out when they have network."""
    ws = workspace(cfg, paths)
    if create and not cfg.tools.terminal.cwd:
        ws.mkdir(mode=0o700, parents=True, exist_ok=True)
    return make_policy(cfg.tools.terminal, workspace=ws, hidden=hidden_paths(cfg, paths), egress=egress)


def visible_to_agent(cfg: Config, paths: Paths, path: Path) -> bool:
    """Whether the agent's commands or file tools could read ``path`` (all of it, when they run unsandboxed)."""
    try:
        result = policy(cfg, paths, create=False)
    except ConfigError:  # a bad tools.terminal.cwd: judge by the default workspace
        result = make_policy(cfg.tools.terminal, workspace=default_workspace(paths), hidden=hidden_paths(cfg, paths))
    if result.mode == "none":
        return True
    return hidden_reason(os.path.realpath(path), layers(result)) is None


def _local_database(cfg: Config) -> str | None:
    """Where Herald's PostgreSQL on this machine is within the reach of sandboxed commands: its port among
    tools.terminal.host_ports, or its unix socket in a folder the sandbox shows."""
    url = cfg.database.url
    if not url or not url.startswith("postgresql"):
        return None
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    host = parsed.host or "/run/postgresql"  # no host: libpq's unix socket folder
    query_host = parsed.query.get("host")
    if isinstance(query_host, str) and query_host.startswith("/"):
        host = query_host
    terminal = cfg.tools.terminal
    if host.startswith("/"):
        real = os.path.realpath(host)
        hidden = [os.path.realpath(p) for p in (*SYSTEM_HIDDEN, PRIVATE_TMP)]
        return None if any(within(real, h) for h in hidden) else f"its socket folder {host}"
    port = parsed.port or 5432
    if host in ("localhost", "127.0.0.1", "::1") and terminal.network and port in terminal.host_ports:
        return f"tools.terminal.host_ports opens its port {port}"
    return None


def _no_bridge(cfg: Config) -> str | None:
    terminal = cfg.tools.terminal
    if not terminal.network or resolve_mode(terminal.sandbox, terminal.network)[0] != "bwrap":
        return None
    hidden = [os.path.realpath(p) for p in (herald_base(), *daemon_homes())]
    if bridge.find(lambda real: not any(within(real, h) for h in hidden)) is not None:
        return None
    return ("tools.terminal.network is on, but neither socat nor a python3 the sandbox shows is installed: commands "
            "get no network (apt install socat)")


def warnings(cfg: Config) -> list[str]:
    """The sandbox's start-up warnings: unsandboxed by choice, the terminal off for want of bubblewrap, no
    bridge to the network, or Herald's own database within the reach of the agent's commands."""
    terminal = cfg.tools.terminal
    if not terminal.enabled:
        return []
    out = []
    where = _local_database(cfg) if terminal.sandbox != "none" else None
    if where is not None:
        out.append(f"the agent's commands can reach Herald's PostgreSQL ({where}): make sure it needs a password "
                   "(not in the agent's reach)")
    line = startup_problem(*resolve_mode(terminal.sandbox, terminal.network)) or _no_bridge(cfg)
    if line:
        out.append(line)
    if terminal.cwd and os.path.realpath(Path(terminal.cwd).expanduser()) == os.path.realpath(Path.home()):
        out.append("tools.terminal.cwd is the home folder: commands and write_file can change ~/.bashrc and "
                   "other start-up files")
    return out


def start_egress(cfg: Config) -> Egress | None:
    """The commands' way out to the network, running, when they run in bubblewrap with network on."""
    terminal = cfg.tools.terminal
    if not terminal.network or resolve_mode(terminal.sandbox, terminal.network)[0] != "bwrap":
        return None
    egress = Egress(terminal.allowed_domains, terminal.host_ports)
    try:
        egress.start()
    except OSError as exc:
        log.warning("egress_failed", message=f"the sandbox's network proxy could not start ({exc}): commands get "
                    "no network")
        return None
    return egress


def setup(cfg: Config, paths: Paths) -> tuple[SandboxPolicy, list[str], Egress | None]:
    """At start-up: the policy, the warning lines (logged here; ``herald run`` prints them too), and the
    egress proxy when commands have network (the caller stops it: ``egress.stop()``, off the loop)."""
    egress = start_egress(cfg)
    try:
        result = policy(cfg, paths, egress=egress.point if egress else None)
    except BaseException:
        if egress is not None:
            egress.stop()
        raise
    lines = warnings(cfg)
    for line in lines:
        log.warning("sandbox_warning", message=line)
    log.info("sandbox", mode=result.mode, workspace=str(result.workspace), network=result.network,
             proxied=result.bridged, bridge=result.bridge[0] if result.bridge else None,
             max_processes=result.max_processes, counted=result.nproc_scope,
             memory=f"{result.limits.memory_mb} MB ({'cgroup' if result.limits.memory_scope else 'RLIMIT_AS'})")
    if result.mode != "off" and result.max_processes and result.nproc_scope == "none":
        log.warning("sandbox_no_process_cap", message="Herald runs as root, whose processes the kernel never holds "
                    "to a process limit: tools.terminal.max_processes cannot apply (run Herald as its own user)")
    return result, lines, egress
