"""``herald pairing ...``: approve pairing codes, list waiting codes and paired users, revoke, clear.

Works beside a running daemon (it re-reads ``paired_users`` every few seconds, lets the user in and tells
them), and finds the database the same way every other subcommand does (HERALD_HOME / --profile / --config).
The CLI is always admin.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import typer

from gateway.cli.common import EXIT_FAILED, fail
from gateway.platforms import chat_platforms

app = typer.Typer(no_args_is_help=True, help="Pairing: let users who DMed the bot in with their one-time code.")


def _run(work: Callable[[Any], Awaitable[Any]]) -> Any:
    from gateway.cli.common import run_on_store
    from gateway.inbound.pairing import Pairing

    return run_on_store(lambda store: work(Pairing(store)))


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


@app.command("approve")
def approve(platform: Annotated[str, typer.Argument(help=f"e.g. {chat_platforms()[0]}")],
            code: Annotated[str, typer.Argument(help="the 8-character code the user was sent")]) -> None:
    """Approve a user's pairing code: they may talk to the agent from then on (and are told so)."""
    from gateway.inbound.pairing import describe

    platform = platform.lower()
    result = _run(lambda p: p.approve(platform, code, "cli"))
    if result.outcome == "approved":
        name = f"{result.user_name} ({result.user_id})" if result.user_name else result.user_id
        typer.echo(f"Approved {platform} user {name}. A running Herald lets them in and tells them within "
                   "a few seconds.")
        return
    fail(describe(result, platform).lstrip("❌🔒 "), EXIT_FAILED)


@app.command("list")
def list_(as_json: Annotated[bool, typer.Option("--json", help="one JSON object")] = False) -> None:
    """Codes waiting for approval, paired users, and platforms whose pairing is locked."""

    async def work(p: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, float]]:
        return await p.pending(), await p.paired(), await p.lockouts()

    pending, paired, locked = _run(work)
    if as_json:
        typer.echo(json.dumps({
            "pending": pending,
            "paired": [{**{k: v for k, v in row.items() if k != "notified_at"},
                        "notified": row["notified_at"] is not None} for row in paired],
            "locked": [{"platform": k, "until": v} for k, v in sorted(locked.items())],
        }))
        return
    typer.echo(f"Waiting codes ({len(pending)}):")
    for row in pending:
        typer.echo(f"  {row['platform']:10} {row['user_id']:>14}  {row['user_name'] or '':20} "
                   f"expires {_when(row['expires_at'])}")
    typer.echo(f"Paired users ({len(paired)}):")
    for row in paired:
        typer.echo(f"  {row['platform']:10} {row['user_id']:>14}  {row['user_name'] or '':20} "
                   f"approved {_when(row['approved_at'])} by {row['approved_by'] or '-'}")
    for platform, until in sorted(locked.items()):
        typer.echo(f"Pairing on {platform} is locked until {_when(until)} (herald pairing clear lifts it).")


@app.command("revoke")
def revoke(platform: Annotated[str, typer.Argument()], user_id: Annotated[str, typer.Argument()]) -> None:
    """Remove a paired user: their messages are denied again within a few seconds."""
    platform = platform.lower()
    if _run(lambda p: p.revoke(platform, user_id)):
        typer.echo(f"Revoked {platform} user {user_id}.")
        return
    fail(f"{platform} user {user_id} is not paired (users in config.yaml are removed there).", EXIT_FAILED)


@app.command("clear")
def clear() -> None:
    """Drop every waiting code and lift pairing lockouts (paired users stay; use revoke for those)."""
    dropped = _run(lambda p: p.clear())
    typer.echo(f"Dropped {dropped} waiting code(s); pairing is open on every platform.")
