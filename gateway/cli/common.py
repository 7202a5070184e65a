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

from typing import NoReturn

import typer

from gateway.config import Config, ConfigError, Paths, load_config, profile_names, resolve_paths

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
    if paths.profile != "default" and not paths.home.is_dir():
        names = ", ".join(["default", *profile_names()])
        fail(f"no profile {paths.profile!r} (profiles: {names}); create it with: herald profile create "
             f"{paths.profile}", EXIT_USAGE)
    return paths


def load(config_override: str | None = None) -> tuple[Config, Paths]:
    paths = paths_for(config_override)
    try:
        return load_config(paths), paths
    except ConfigError as exc:
        fail_config(exc)
