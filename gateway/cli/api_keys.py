"""``herald api-key ...``: the keys of the OpenAI-compatible API (``api.enabled``): create one per client (the
key is printed once and only its hash is stored), list them, revoke one. Works beside a running daemon, which
checks every request against the table: a revoked key is refused from its next request.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import typer

from gateway.cli.common import EXIT_FAILED, EXIT_USAGE, fail

app = typer.Typer(no_args_is_help=True, help="Keys of the OpenAI-compatible API (api.enabled): one per client.")

_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
_DURATION = re.compile(r"(\d+)\s*([mhdwy])")


def parse_duration(text: str) -> float:
    """``90d``, ``12h``, ``2w``, ``30m``, ``1y`` -> seconds; ValueError for anything else."""
    found = _DURATION.fullmatch(text.strip().lower())
    if found is None or int(found.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a duration such as 90d, 12h, 2w or 1y")
    return int(found.group(1)) * _UNITS[found.group(2)]


def _run(work: Callable[[Any], Awaitable[Any]]) -> Any:
    from gateway.cli.common import run_on_store
    from gateway.storage.api_keys import ApiKeyStore

    return run_on_store(lambda store: work(ApiKeyStore(store)))


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "-"


@app.command("create")
def create(name: Annotated[str, typer.Argument(help="who holds it, e.g. open-webui: the identity api:NAME")],
           expires: Annotated[str | None, typer.Option("--expires", help="e.g. 90d, 12h, 2w, 1y; default never")]
           = None) -> None:
    """Make a key for NAME and print it: this is the only time it is shown."""
    from gateway.storage.api_keys import KeyProblem

    try:
        expires_at = time.time() + parse_duration(expires) if expires else None
    except ValueError as exc:
        fail(f"--expires: {exc}", EXIT_USAGE)
    try:
        key = _run(lambda keys: keys.create(name, expires_at))
    except KeyProblem as exc:
        fail(str(exc), EXIT_FAILED if "has a key" in str(exc) else EXIT_USAGE)
    typer.echo(key)
    until = f", valid until {_when(expires_at)}" if expires_at else ""
    typer.echo(f"The API key of {name} (identity api:{name}{until}). It is not shown again: only its hash is kept.",
               err=True)


@app.command("list")
def list_(as_json: Annotated[bool, typer.Option("--json", help="one JSON list")] = False) -> None:
    """Every key: its holder, when it was made, until when it is valid, when it was last used, whether revoked."""
    rows = _run(lambda keys: keys.list())
    now = time.time()
    for row in rows:
        row["state"] = ("revoked" if row["revoked_at"] else
                        "expired" if row["expires_at"] and row["expires_at"] <= now else "live")
    if as_json:
        typer.echo(json.dumps(rows))
        return
    if not rows:
        typer.echo("No API keys (herald api-key create NAME makes one).")
        return
    typer.echo(f"{'name':24} {'state':8} {'created':16} {'expires':16} last used")
    for row in rows:
        typer.echo(f"{row['name']:24} {row['state']:8} {_when(row['created_at']):16} {_when(row['expires_at']):16} "
                   f"{_when(row['last_used_at'])}")


@app.command("revoke")
def revoke(name: Annotated[str, typer.Argument()]) -> None:
    """Revoke NAME's key: the daemon refuses it from its next request."""
    if _run(lambda keys: keys.revoke(name)):
        typer.echo(f"Revoked the API key of {name}.")
        return
    fail(f"{name} has no live API key (herald api-key list shows them).", EXIT_FAILED)
