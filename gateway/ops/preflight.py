"""What must hold before the daemon can start, checked the same way by ``herald run`` and ``herald
check-config``: the home is a writable folder, the database opens and its schema can be created or upgraded,
each enabled platform has its secrets, the model section is complete.

Every problem is one line naming what failed (a key path, ``HERALD_HOME``, the database URL with its
password masked) and what to do. ``runtime`` problems are the world failing (PostgreSQL down): exit 1;
the rest are the configuration or the environment it names being wrong: exit 2.
"""

from __future__ import annotations

import errno
import getpass
import ipaddress
import os
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gateway.config import Config, Paths
from gateway.kernel.configbase import ENV_FILE, missing_env, secret


@dataclass(frozen=True)
class Problem:
    key: str  # a config key path, or HERALD_HOME; "" when no key names it (the message names the file)
    message: str
    runtime: bool = False

    def __str__(self) -> str:
        return f"{self.key}: {self.message}" if self.key else self.message


# ---- the config alone ------------------------------------------------------------------------------


def gated(skip: frozenset[str]) -> set[str]:
    """Of the sections salvage() replaced, those some start-up check reads (the model, a platform's secrets, the
    database, the log folder, the workspace): what the schema problems kept from being checked."""
    return {s for s in skip if s in ("model", "database", "logging", "tools") or s.startswith("platforms")}


def salvage(paths: Paths) -> tuple[Config, frozenset[str]] | None:
    """After the config failed to validate: the same config with each section that has a problem (``gateway``,
    ``platforms.telegram``, ...) replaced by its defaults, and the names of those sections, so the checks that
    do not read them can still run and every problem is reported at once. None when the file is not a mapping
    of keys (nothing to salvage)."""
    import yaml
    from pydantic import ValidationError

    try:
        data = yaml.safe_load(paths.config_file.read_text())
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(data, dict):
        return None
    dropped: set[str] = set()
    for _ in range(8):  # each round drops at least one section; a few rounds at most
        try:
            return Config.model_validate(data), frozenset(dropped)
        except ValidationError as exc:
            before = len(dropped)
            for err in exc.errors():
                loc = [str(part) for part in err["loc"]]
                section = loc[:2] if loc[:1] == ["platforms"] and len(loc) > 1 else loc[:1]
                if not section:
                    return None
                parent = data
                for part in section[:-1]:
                    parent = parent.get(part) if isinstance(parent, dict) else None
                if isinstance(parent, dict):
                    parent.pop(section[-1], None)
                dropped.add(".".join(section))
            if len(dropped) == before:
                return None
    return None


def config_problems(cfg: Config, paths: Paths) -> list[Problem]:
    return [*model_problems(cfg, paths), *platform_problems(cfg, paths.env_file), *api_problems(cfg)]


def api_problems(cfg: Config) -> list[Problem]:
    """The API's prompts put in a platform that is off would be denied with nobody asked: said at start instead."""
    target = cfg.api.approvals_to
    if not cfg.api.enabled or target == "dashboard":
        return []
    platform = target.partition(":")[0]
    if getattr(getattr(cfg.platforms, platform, None), "enabled", False):
        return []
    return [Problem("api.approvals_to", f"{platform} is not enabled (platforms.{platform}.enabled), so nobody could "
                                        "answer there: enable it, or name another chat, or dashboard")]


def _is_local(base_url: str) -> bool:
    """A server on this machine or a private network, which may well need no key (Ollama, vLLM, llama.cpp);
    a host name without a dot is a container or LAN name (``http://ollama:11434/v1``)."""
    try:
        host = urlsplit(base_url).hostname or ""
    except ValueError:
        return False
    if host == "localhost" or ("." not in host and ":" not in host) or host.endswith((".local", ".internal", ".lan")):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_link_local


def _endpoint_problems(prefix: str, base_url: str | None, api_key_env: str | None, env_file: Path) -> list[Problem]:
    out = []
    if api_key_env and not base_url:
        out.append(Problem(f"{prefix}.base_url", f"not set, but {prefix}.api_key_env is: give the endpoint's "
                                                 "address too, e.g. https://api.openai.com/v1"))
    if api_key_env and not secret(api_key_env):
        out.append(Problem(f"{prefix}.api_key_env", missing_env(api_key_env, str(env_file))))
    if base_url and not api_key_env and not _is_local(base_url):
        out.append(Problem(f"{prefix}.api_key_env", f"not set, but {base_url} is not a local server and will "
                                                    "want a key: name the environment variable that holds it "
                                                    "(e.g. OPENAI_API_KEY)"))
    return out


def model_problems(cfg: Config, paths: Paths) -> list[Problem]:
    m = cfg.model
    out = []
    if m.base_url and not m.name:
        out.append(Problem("model.name", "not set, but model.base_url is: say which model to call "
                                         "(e.g. gpt-4o-mini)"))
    if m.name and not m.base_url:
        out.append(Problem("model.base_url", "not set, but model.name is: give the endpoint's address "
                                             "(e.g. https://api.openai.com/v1)"))
    elif m.base_url or m.api_key_env:
        out += _endpoint_problems("model", m.base_url, m.api_key_env, paths.env_file)
    if m.fallbacks and not m.configured:
        out.append(Problem("model.fallbacks", "set, but the primary model is not: fallbacks only follow "
                                              "model.base_url and model.name"))
    for i, f in enumerate(m.fallbacks):
        out += _endpoint_problems(f"model.fallbacks.{i}", f.base_url, f.api_key_env, paths.env_file)
    return out


def platform_problems(cfg: Config, env_file: Path | None = None) -> list[Problem]:
    """Each enabled platform's own problems (its section's ``problems()``), with this profile's .env path in
    the advice for a secret that is not set."""
    from gateway.platforms import PLATFORMS

    out = []
    for name in PLATFORMS:
        section = getattr(cfg.platforms, name, None)
        if section is not None and section.enabled:
            out += [Problem(f"platforms.{name}.{key}", message.replace(ENV_FILE, str(env_file)) if env_file
                            else message) for key, message in section.problems()]
    return out


# ---- the machine -------------------------------------------------------------------------------------


def _home_key(paths: Paths) -> str:
    return "HERALD_HOME" if paths.profile == "default" else f"HERALD_HOME (profile {paths.profile})"


def home_problems(paths: Paths, create: bool) -> list[Problem]:
    """The profile's home must be a folder this user can write (``create``: made 0700 when missing)."""
    home = paths.home
    key = _home_key(paths)
    user = getpass.getuser()
    if home.exists() and not home.is_dir():
        return [Problem(key, f"{home} is a file, not a folder: point HERALD_HOME at a folder, or move the file")]
    if not home.exists():
        parent = next((p for p in home.parents if p.exists()), Path("/"))
        if not parent.is_dir():
            return [Problem(key, f"cannot create {home}: {parent} is a file, not a folder; point HERALD_HOME at "
                                 "a folder")]
        if not create:
            # Not created by a check; a folder made and removed beside it says whether it could be.
            try:
                os.rmdir(tempfile.mkdtemp(dir=parent, prefix=".herald-check-"))
            except OSError as exc:
                return [Problem(key, f"cannot create {home}: {parent} is not writable by {user} "
                                     f"({exc.strerror or exc}); create the folder and give {user} write access, "
                                     "or point HERALD_HOME elsewhere")]
            return []
        try:
            home.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            return [Problem(key, f"cannot create {home} ({exc.strerror or exc}): create it and give {user} write "
                                 "access, or point HERALD_HOME elsewhere")]
    try:
        # os.access says yes to root even on a read-only file system: really write something.
        with tempfile.TemporaryFile(dir=home):
            pass
    except OSError as exc:
        if exc.errno == errno.EROFS:
            return [Problem(key, f"{home} is on a read-only file system: point HERALD_HOME at a writable folder "
                                 "(under systemd's ProtectSystem=strict, one in StateDirectory= or ReadWritePaths=)")]
        return [Problem(key, f"{home} is not writable by {user} ({exc.strerror or exc}): give {user} write "
                             "access to it (chown/chmod), or point HERALD_HOME elsewhere")]
    return []


def database_url(cfg: Config, paths: Paths) -> str:
    return cfg.database.url or f"sqlite+aiosqlite:///{paths.db_file}"


def masked(url: str) -> str:
    """The URL with its password shown as ***."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url.split("@")[-1]


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or e in seen:
            continue
        seen.append(e)
        todo += [getattr(e, "orig", None), e.__cause__, e.__context__]
    return seen


def database_problem(cfg: Config, paths: Paths, exc: BaseException) -> Problem:
    """A failure to open or set up the database as one line: which database, what failed, what to check."""
    url = database_url(cfg, paths)
    key = "database.url" if cfg.database.url else "HERALD_HOME"
    chain = _chain(exc)
    names = {type(e).__name__ for e in chain}
    text = " ".join(str(e) for e in chain).lower()
    if url.startswith("sqlite"):
        path = sqlite_path(url)
        where = f"SQLite database {path}"
        if "not a database" in text or "malformed" in text:
            return Problem(key, f"{where} is not a usable SQLite database: move the file away (a new one is "
                                "created) or point database.url elsewhere")
        if "readonly" in text or "read-only" in text:
            return Problem(key, f"{where} is read-only for {getpass.getuser()}: give it write access")
        return Problem(key, f"cannot open {where}: check that {path.parent if path else 'its folder'} exists and "
                            f"{getpass.getuser()} may write there ({_short(exc)})")
    parsed = urlsplit(url.replace("postgresql+asyncpg", "postgresql", 1))
    server = f"{parsed.hostname or 'localhost'}:{parsed.port or 5432}"
    where = f"database {masked(url)}"
    if "InvalidPasswordError" in names or "password authentication failed" in text:
        return Problem(key, f"{where}: password authentication failed for user {parsed.username!r}: check the "
                            "user and password in database.url")
    if "InvalidAuthorizationSpecificationError" in names or "no pg_hba.conf entry" in text:
        return Problem(key, f"{where}: the server refused user {parsed.username!r} (pg_hba.conf or role): "
                            "check the user in database.url and the server's access rules")
    if "InvalidCatalogNameError" in names or ("database" in text and "does not exist" in text):
        return Problem(key, f"{where}: the database does not exist: create it (createdb "
                            f"{(parsed.path or '/').lstrip('/')}) or fix database.url")
    if "InsufficientPrivilegeError" in names or "permission denied" in text:
        return Problem(key, f"{where}: user {parsed.username!r} may not create or change Herald's tables: "
                            "grant it CREATE on the database (or the schema)")
    if any(isinstance(e, socket.gaierror) for e in chain):
        return Problem(key, f"{where}: the host {parsed.hostname!r} is unknown: check the host in database.url")
    if any(isinstance(e, ConnectionRefusedError | TimeoutError | OSError) for e in chain) or "connect" in text:
        return Problem(key, f"{where}: cannot connect to {server} ({_short(exc)}): is PostgreSQL running and "
                            "accepting connections there? Check the host and port in database.url",
                       runtime=True)
    return Problem(key, f"{where}: {_short(exc)}", runtime=True)


def _short(exc: BaseException) -> str:
    from gateway.kernel.logs import redact

    inner = _chain(exc)[-1] if getattr(exc, "orig", None) is None else exc.orig  # type: ignore[attr-defined]
    first = (str(inner).strip().splitlines() or [type(inner).__name__])[0]
    return redact(first)[:200]


def sqlite_path(url: str) -> Path | None:
    from sqlalchemy.engine import make_url

    database = make_url(url).database
    return Path(os.path.abspath(database)) if database and database != ":memory:" else None


async def database_problems(cfg: Config, paths: Paths) -> list[Problem]:
    """The database opens, and Herald's schema can be created or upgraded in it (in a transaction that is
    rolled back on PostgreSQL; on SQLite, where DDL commits by itself, the folder and file are checked)."""
    url = database_url(cfg, paths)
    if url.startswith("sqlite"):
        return _sqlite_problems(cfg, paths, url)
    from gateway.storage.db import make_engine
    from gateway.storage.migrations import upgrade

    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            trans = await conn.begin()
            try:
                await conn.run_sync(upgrade)
            finally:
                await trans.rollback()
    except Exception as exc:
        return [database_problem(cfg, paths, exc)]
    finally:
        await engine.dispose()
    return []


def _sqlite_problems(cfg: Config, paths: Paths, url: str) -> list[Problem]:
    import sqlite3

    path = sqlite_path(url)
    if path is None:
        return []
    key = "database.url" if cfg.database.url else "HERALD_HOME"
    user = getpass.getuser()
    if not path.exists():
        folder = path.parent
        if cfg.database.url is None and not folder.exists():
            return []  # the home is created at start (home_problems says when it cannot be)
        if not folder.is_dir():
            return [Problem(key, f"cannot create SQLite database {path}: {folder} is not a folder; create it or "
                                 "point database.url elsewhere")]
        if not os.access(folder, os.W_OK | os.X_OK):
            return [Problem(key, f"cannot create SQLite database {path}: {folder} is not writable by {user}")]
        return []
    try:
        conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=5)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return [database_problem(cfg, paths, exc)]
    return []


def logs_problems(cfg: Config, paths: Paths) -> list[Problem]:
    """The log folder ($HERALD_HOME/logs, made at start when missing) must be a folder this user can write."""
    if not cfg.logging.file:
        return []
    logs = paths.logs_dir
    key = _home_key(paths)
    user = getpass.getuser()
    if not logs.exists():
        return []
    if not logs.is_dir():
        return [Problem(key, f"{logs} is a file, not a folder: Herald writes its log files there; move that file "
                             "away, or set logging.file: false to log to stdout only")]
    try:
        with tempfile.TemporaryFile(dir=logs):
            pass
    except OSError as exc:
        return [Problem(key, f"the log folder {logs} is not writable by {user} ({exc.strerror or exc}): give {user} "
                             "write access to it, or set logging.file: false to log to stdout only")]
    return []


async def check(cfg: Config, paths: Paths, create_home: bool = False, skip: frozenset[str] = frozenset()
                ) -> list[Problem]:
    """Everything at once: the config's own problems, the home and its log folder, the database. ``skip``: the
    config sections that did not validate (their defaults stand in; the checks that read them are left out)."""
    problems = config_problems(cfg, paths)
    problems += home_problems(paths, create_home)
    if not any(p.key.startswith("HERALD_HOME") for p in problems):
        if "logging" not in skip:
            problems += logs_problems(cfg, paths)
        if "database" not in skip:
            problems += await database_problems(cfg, paths)
    return problems


def describe_failure(cfg: Config, paths: Paths, exc: BaseException) -> Problem | None:
    """A start-up failure that has a one-line explanation (the database, the http port, a file), or None."""
    from sqlalchemy.exc import DBAPIError, InterfaceError

    chain = _chain(exc)
    if any(isinstance(e, DBAPIError | InterfaceError) for e in chain) or any(
            type(e).__module__.startswith(("asyncpg", "sqlite3")) for e in chain):
        return database_problem(cfg, paths, exc)
    return listen_problem(cfg, paths, exc) or file_problem(paths, exc)


def listen_problem(cfg: Config, paths: Paths, exc: BaseException) -> Problem | None:
    """The http server could not listen on http.host:http.port (the only socket Herald binds)."""
    host, port = cfg.http.host, cfg.http.port
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    for e in _chain(exc):
        if not isinstance(e, OSError):
            continue
        if e.errno == errno.EADDRINUSE:
            return Problem("http.port", f"{address} is already in use (another Herald, or another program, "
                                        f"listens there): stop that one, or set http.port in {paths.config_file} "
                                        "to a free port", runtime=True)
        if "bind" not in str(e):
            continue
        if e.errno == errno.EADDRNOTAVAIL:
            return Problem("http.host", f"cannot listen on {address}: {host} is not an address of this machine: "
                                        "set http.host to 127.0.0.1 (this machine only) or 0.0.0.0 (every "
                                        "interface)")
        if e.errno == errno.EACCES:
            return Problem("http.port", f"cannot listen on {address}: ports below 1024 need privileges: set "
                                        "http.port to 1024 or above (a reverse proxy can serve port 80/443)")
    return None


def file_problem(paths: Paths, exc: BaseException) -> Problem | None:
    """A file or folder Herald could not create, read or write, named with what to do about it."""
    user = getpass.getuser()
    for e in _chain(exc):
        if isinstance(e, OSError) and e.filename:
            where = Path(str(e.filename))
            key = _home_key(paths) if where.is_relative_to(paths.home) else ""
            if isinstance(e, PermissionError):
                return Problem(key, f"{where}: permission denied for {user}: give {user} access to it (chown/chmod)")
            if isinstance(e, NotADirectoryError | FileExistsError | IsADirectoryError):
                return Problem(key, f"{where}: {e.strerror}: something of the wrong kind is in the way; move it "
                                    "away")
            return Problem(key, f"{where}: {e.strerror or e}", runtime=True)
    return None


def is_database_error(exc: BaseException) -> Any:
    from sqlalchemy.exc import SQLAlchemyError

    return any(isinstance(e, SQLAlchemyError) or type(e).__module__.startswith(("asyncpg", "sqlite3"))
               for e in _chain(exc))
