"""What every ``herald`` subcommand shares: the global options, loading this profile's config, and the
exit-code rule.

Exit codes, the same for every subcommand (``herald --help`` says so too):

- 0: done.
- 1: the request could not be carried out — something named does not exist or is in the wrong state
  (no such job, code, entry), or something failed while running (the database is unreachable, the
  port is taken, the daemon stopped on an error).
- 2: the command line or the configuration is wrong — a usage error, an invalid argument, a config
  problem (bad key, missing secret, unwritable home), an unknown profile. Fix the input and run it again.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NoReturn

import typer

from gateway.config import Config, ConfigError, Paths, herald_base, load_config, resolve_paths

EXIT_FAILED = 1
EXIT_USAGE = 2

EXIT_CODES_HELP = ("Exit status: 0 done; 1 the request could not be carried out (not found, wrong state, a "
                   "runtime failure such as an unreachable database); 2 the command line or the configuration "
                   "is wrong (usage, config, missing secret, unknown profile).")


class _State:
    profile: str | None = None
    config: str | None = None


state = _State()


def fail(message: str, code: int = EXIT_FAILED) -> NoReturn:
    """One line on stderr, then exit with ``code`` (EXIT_FAILED or EXIT_USAGE, see the module doc)."""
    typer.echo(f"herald: {message}", err=True)
    raise typer.Exit(code)


def fail_config(exc: ConfigError) -> NoReturn:
    for problem in exc.problems:
        typer.echo(f"herald: config error: {problem}", err=True)
    raise typer.Exit(EXIT_USAGE)


def paths_for(config_override: str | None = None) -> Paths:
    """This command line's profile paths; an unknown --profile (or HERALD_PROFILE) is a usage error that
    lists the profiles there are, instead of silently starting an empty one."""
    try:
        paths = resolve_paths(state.profile, config_override or state.config)
    except ConfigError as exc:
        fail_config(exc)
    require_profile(paths.profile)
    return paths


def require_profile(name: str | None, base: Path | None = None, create_hint: str = "herald profile create") -> None:
    """An unknown profile is a usage error (exit 2) listing the profiles there are under ``base`` (default
    $HERALD_HOME), instead of silently starting an empty one. A ``base`` this user may not look into (a
    system unit's /var/lib/herald, read as another user) cannot be judged from here and passes."""
    if not name or name == "default":
        return
    if not name.replace("-", "").replace("_", "").isalnum():
        fail(f"profile: {name!r} is not a valid profile name (letters, digits, - and _)", EXIT_USAGE)
    root = (base if base is not None else herald_base()) / "profiles"
    try:
        if stat.S_ISDIR(os.stat(root / name).st_mode):
            return
    except PermissionError:
        return
    except OSError:
        pass
    try:
        names = sorted(p.name for p in root.iterdir() if p.is_dir())
    except OSError:
        names = []
    fail(f"no profile {name!r} (profiles: {', '.join(['default', *names])}); create it with: {create_hint} "
         f"{name}", EXIT_USAGE)


def load(config_override: str | None = None) -> tuple[Config, Paths]:
    paths = paths_for(config_override)
    try:
        return load_config(paths), paths
    except ConfigError as exc:
        fail_config(exc)


def load_checked(config: str | None) -> tuple[Config, Paths, list[str], frozenset[str]]:
    """This profile's config for start-up's checks. A config that does not validate does not hide the other
    problems: its schema problems are returned, and the sections that have them are replaced by their
    defaults (their names in the last item) so the checks that do not read them still run."""
    from gateway.ops import preflight as checks

    paths = paths_for(config)
    try:
        return load_config(paths), paths, [], frozenset()
    except ConfigError as exc:
        salvaged = checks.salvage(paths)
        if salvaged is None:  # not even a mapping of keys: nothing else can be checked
            fail_config(exc)
        return salvaged[0], paths, exc.problems, salvaged[1]


def run_on_store(work: Callable[[Any], Awaitable[Any]]) -> Any:
    """``work(store)`` on the profile's database (brought to the newest schema first), for a command that runs
    without the daemon; the store is closed however it ends."""
    import asyncio

    cfg, paths = load()

    async def main() -> Any:
        from gateway.storage.store import Store

        if cfg.database.url is None:
            paths.home.mkdir(parents=True, exist_ok=True)
        store = Store(cfg.database.url or f"sqlite+aiosqlite:///{paths.db_file}")
        try:
            await store.init()
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(main())
