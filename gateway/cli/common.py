"""What every ``herald`` subcommand shares: the global options and loading this profile's config."""

from __future__ import annotations

import typer

from gateway.config import Config, ConfigError, Paths, load_config, resolve_paths


class _State:
    profile: str | None = None
    config: str | None = None


state = _State()


def fail_config(exc: ConfigError) -> None:
    typer.echo(f"herald: config error: {exc}", err=True)
    raise typer.Exit(2)


def load(config_override: str | None = None) -> tuple[Config, Paths]:
    try:
        paths = resolve_paths(state.profile, config_override or state.config)
        return load_config(paths), paths
    except ConfigError as exc:
        fail_config(exc)
        raise  # unreachable
