"""The ``herald`` command line. Every subcommand finds the same state through HERALD_HOME / --profile / --config."""

from __future__ import annotations

from typing import Annotated

import typer

from gateway.cli import approvals, cron, daemon, pairing, profile
from gateway.cli.common import fail_config, state
from gateway.config import ConfigError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Herald: a messaging gateway for an AI agent (Telegram, Discord, Slack, web chat).")


@app.callback()
def main_options(
    profile: Annotated[str | None, typer.Option("--profile", "-p", help="use $HERALD_HOME/profiles/NAME")] = None,
    config: Annotated[str | None, typer.Option("--config", "-c", help="path to config.yaml")] = None,
) -> None:
    state.profile = profile
    state.config = config


app.registered_commands += daemon.app.registered_commands
app.add_typer(approvals.app, name="approvals")
app.add_typer(pairing.app, name="pairing")
app.add_typer(profile.app, name="profile")
app.add_typer(cron.app, name="cron")


def main() -> None:
    try:
        app()
    except ConfigError as exc:
        fail_config(exc)


__all__ = ["app", "main", "state"]
