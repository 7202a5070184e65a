"""``herald profile list | create NAME``: several independent Heralds under one HERALD_HOME.

A profile is ``$HERALD_HOME/profiles/NAME`` with its own config.yaml, .env, database, logs and tokens;
``herald --profile NAME …`` (or ``HERALD_PROFILE=NAME``) points every subcommand at it. Profiles may run
side by side; two that use the same bot token are kept apart by the credential lock (gateway/cluster/locks.py).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from gateway.cli.common import EXIT_FAILED, EXIT_USAGE, fail
from gateway.config import ConfigError, profile_names, resolve_paths
from gateway.platforms import PLATFORMS, home_files

app = typer.Typer(no_args_is_help=True, help="Profiles: independent Heralds (config, database, logs"
                  + "".join(f", {what}" for what, _ in home_files()) + ").")

STARTER_CONFIG = """\
# Herald profile "{name}". Every key, its default and its meaning: config.example.yaml in the Herald
# sources. Secrets go in the environment or in {env_file} (keys ending in _env name the variable).
# Run this profile with: herald --profile {name} run

model:
  base_url: null          # e.g. https://api.openai.com/v1
  name: null              # e.g. gpt-4o-mini
  api_key_env: null       # e.g. OPENAI_API_KEY

http:
  port: {port}             # each profile running at the same time needs its own port

platforms:
{platforms}"""


def _starter_platforms() -> str:
    """Each platform's own starter lines (its declaration's), under its name."""
    return "".join(f"  {name}:\n" + "".join(f"    {line}\n" for line in d.starter.splitlines())
                   for name, d in PLATFORMS.items() if d.starter)


@app.command("list")
def list_(as_json: Annotated[bool, typer.Option("--json", help="one JSON array")] = False) -> None:
    """The default profile and every named one; * marks the one this command line selects."""
    from gateway.cli.common import paths_for

    current = paths_for().profile  # an unknown --profile fails here too, listing the profiles
    rows = []
    for name in ["default", *profile_names()]:
        paths = resolve_paths(None if name == "default" else name)
        rows.append({"name": name, "home": str(paths.home), "config": paths.config_file.exists(),
                     "current": name == current})
    if as_json:
        typer.echo(json.dumps(rows))
        return
    for row in rows:
        mark = "*" if row["current"] else " "
        note = "" if row["config"] else "  (no config.yaml: embedded defaults)"
        typer.echo(f"{mark} {row['name']:20} {row['home']}{note}")


@app.command("create")
def create(name: Annotated[str, typer.Argument(help="letters, digits, - and _")]) -> None:
    """Create a profile: its folder, a starter config.yaml, and folders for logs and media."""
    if name == "default":
        fail("'default' is $HERALD_HOME itself; pick another name", EXIT_USAGE)
    try:
        paths = resolve_paths(name)
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    if paths.home.exists():
        fail(f"profile {name} already exists at {paths.home}", EXIT_FAILED)
    paths.home.mkdir(parents=True, mode=0o700)
    for directory in (paths.logs_dir, paths.media_dir):
        directory.mkdir(mode=0o700)
    # Next to the default 8650, one port per existing profile, so a new profile can run beside the others.
    port = 8650 + len(profile_names())
    paths.config_file.write_text(STARTER_CONFIG.format(name=name, env_file=paths.env_file, port=port,
                                                       platforms=_starter_platforms()))
    typer.echo(f"Created profile {name} at {paths.home}\n"
               f"Edit {paths.config_file}, then run: herald --profile {name} run")
