"""The ``herald`` command line: ``run`` (the daemon, through the runner), ``check-config``, ``doctor``, ``web-url``,
``send``, ``cron``, ``approvals``, ``pairing``, ``api-key``, ``backup``, ``db``, ``service`` and ``profile``.
Every subcommand finds the same state through HERALD_HOME / --profile / --config. The top of the house: nothing
imports it.
"""

from __future__ import annotations

from typing import Annotated

import typer

from gateway.cli import (
    address,
    api_keys,
    approvals,
    backup,
    cron,
    daemon,
    db,
    doctor,
    pairing,
    profile,
    send,
    service,
)
from gateway.cli.common import EXIT_CODES_HELP, EXIT_FAILED, EXIT_USAGE, fail, fail_config, state
from gateway.config import ConfigError
from gateway.platforms import PLATFORMS, declare_to_logs


def _platforms() -> str:
    # From the registry, so the help names exactly the platforms this build has: the chat apps, then the pages
    # Herald serves itself.
    return ", ".join(d.label for d in sorted(PLATFORMS.values(), key=lambda d: d.page is not None))


app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help=f"Herald: a messaging gateway for an AI agent ({_platforms()}).\n\n{EXIT_CODES_HELP}")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("herald")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"herald {_version()}")
        raise typer.Exit(0)


@app.callback()
def main_options(
    profile: Annotated[str | None, typer.Option("--profile", "-p", help="use $HERALD_HOME/profiles/NAME")] = None,
    config: Annotated[str | None, typer.Option("--config", "-c", help="path to config.yaml")] = None,
    version: Annotated[bool, typer.Option("--version", callback=_show_version, is_eager=True,
                                          help="print Herald's version and exit")] = False,
) -> None:
    state.profile = profile
    state.config = config
    declare_to_logs()  # before any subcommand logs, stores or shows an error that may quote a bot token


app.registered_commands += daemon.app.registered_commands
for _name, _declared in PLATFORMS.items():  # herald web-url: a page's address with its owner's credential
    if _declared.page:
        app.command(f"{_name}-url")(address.page_command(_name, _declared))
app.command("backup")(backup.backup)
app.command("doctor")(doctor.doctor)
app.command("send")(send.send)
app.add_typer(approvals.app, name="approvals")
app.add_typer(pairing.app, name="pairing")
app.add_typer(profile.app, name="profile")
app.add_typer(cron.app, name="cron")
app.add_typer(service.app, name="service")
app.add_typer(db.app, name="db")
app.add_typer(api_keys.app, name="api-key")


def main() -> None:
    import os

    from gateway.ops.filemodes import PRIVATE_UMASK

    # Whatever a command writes in the home (the home itself, a platform's token, the SQLite file a first `cron add`
    # makes, a backup) is for this user alone, as under `herald run` (gateway/ops/filemodes.py).
    os.umask(PRIVATE_UMASK)
    try:
        app()
    except ConfigError as exc:
        fail_config(exc)
    except Exception as exc:
        # The database (or a file) failing under any subcommand: one line, not a traceback.
        from gateway.ops import preflight

        if not preflight.is_database_error(exc) and not isinstance(exc, OSError):
            raise
        line, code = _describe(exc)
        try:
            fail(line, code)
        except typer.Exit as done:
            raise SystemExit(done.exit_code) from None


def _describe(exc: BaseException) -> tuple[str, int]:
    import socket

    from gateway.config import load_config, resolve_paths
    from gateway.ops import preflight

    try:
        paths = resolve_paths(state.profile, state.config)
        cfg = load_config(paths)
    except Exception:
        return f"{type(exc).__name__}: {exc}", EXIT_FAILED
    # asyncpg raises a refused or unanswered connection as a plain OSError, not wrapped by SQLAlchemy.
    if preflight.is_database_error(exc) or isinstance(exc, ConnectionError | TimeoutError | socket.gaierror):
        problem = preflight.database_problem(cfg, paths, exc)
        return str(problem), EXIT_FAILED if problem.runtime else EXIT_USAGE
    return str(exc), EXIT_FAILED


__all__ = ["app", "main", "state"]
