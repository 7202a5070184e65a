"""``herald approvals ...``: the approvals audit trail and the "always approve" list.

Read-only, so it works beside a running daemon; it finds the database the same way every other
subcommand does (HERALD_HOME / --profile / --config, through ``gateway.cli.common.load``).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Annotated, Any

import typer

from gateway.cli.common import EXIT_FAILED, EXIT_USAGE, fail

app = typer.Typer(no_args_is_help=True, help="Dangerous-command approvals: who approved or denied what, and when.")


def _url() -> str | None:
    from gateway.cli.common import load

    cfg, paths = load()
    if cfg.database.url:
        return cfg.database.url
    if not paths.db_file.exists():
        return None
    return f"sqlite+aiosqlite:///{paths.db_file}"


async def _query(url: str, stmt: Any) -> list[dict[str, Any]]:
    from sqlalchemy.exc import OperationalError, ProgrammingError

    from gateway.storage.db import make_engine

    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            return [dict(r._mapping) for r in await conn.execute(stmt)]
    except (OperationalError, ProgrammingError) as exc:
        if "no such table" in str(exc) or "does not exist" in str(exc):
            return []  # a database from before approvals existed
        raise
    finally:
        await engine.dispose()


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def _one_line(text: str, width: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


@app.command("list")
def list_approvals(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="how many, newest first")] = 20,
    pending: Annotated[bool, typer.Option("--pending", help="only those still waiting for an answer")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per line")] = False,
) -> None:
    """Show recent approval requests and their outcomes (who, what, when)."""
    from sqlalchemy import select

    from gateway.storage.tables import approvals

    url = _url()
    stmt = select(approvals).order_by(approvals.c.created_at.desc()).limit(limit)
    if pending:
        stmt = stmt.where(approvals.c.status == "pending")
    rows = asyncio.run(_query(url, stmt)) if url else []
    if as_json:
        for row in rows:
            typer.echo(json.dumps(row, ensure_ascii=False, default=str))
        return
    if not rows:
        typer.echo("No approvals recorded yet.")
        return
    for row in rows:
        outcome = row["status"] + (f" ({row['scope']})" if row["scope"] else "")
        who = f" by {row['decided_by']}" if row["decided_by"] else ""
        via = f" via {row['decided_via']}" if row["decided_via"] else ""
        typer.echo(f"{_when(row['created_at'])}  {row['id']}  {outcome}{who}{via}  "
                   f"[{row['platform']}:{row['chat_id']}, asked by {row['requested_by']}]")
        typer.echo(f"    $ {_one_line(row['command'])}")
        if row["reason"]:
            typer.echo(f"    why: {row['reason']}")


@app.command("allowlist")
def allowlist() -> None:
    """Show the commands someone chose "Always approve" for."""
    from sqlalchemy import select

    from gateway.storage.tables import approval_allowlist

    url = _url()
    rows = asyncio.run(_query(url, select(approval_allowlist).order_by(approval_allowlist.c.created_at))) if url else []
    if not rows:
        typer.echo("No commands are always approved.")
        return
    for row in rows:
        typer.echo(f"#{row['id']}  {_when(row['created_at'])}  by {row['added_by'] or '?'}  "
                   f"$ {_one_line(row['command'], 1000)}")


@app.command("revoke")
def revoke(
    entry: Annotated[str | None, typer.Argument(help="the #number `herald approvals allowlist` shows")] = None,
    revoke_all: Annotated[bool, typer.Option("--all", help="empty the whole list")] = False,
) -> None:
    """Take a command off the "Always approve" list: it asks again next time (a running daemon included)."""
    from sqlalchemy import delete

    from gateway.storage.tables import approval_allowlist

    if (entry is None) == (not revoke_all):
        fail("give one entry number (see `herald approvals allowlist`) or --all", EXIT_USAGE)
    stmt = delete(approval_allowlist)
    if entry is not None:
        number = entry.lstrip("#")
        if not number.isdigit():
            fail(f"{entry!r} is not an entry number (see `herald approvals allowlist`)", EXIT_USAGE)
        stmt = stmt.where(approval_allowlist.c.id == int(number))
    url = _url()
    removed = asyncio.run(_execute(url, stmt)) if url else 0
    if entry is not None and not removed:
        fail(f"no entry #{entry.lstrip('#')} on the list", EXIT_FAILED)
    typer.echo(f"Revoked {removed} command(s); they will ask for approval again.")


async def _execute(url: str, stmt: Any) -> int:
    from sqlalchemy.exc import OperationalError, ProgrammingError

    from gateway.storage.db import make_engine

    engine = make_engine(url)
    try:
        async with engine.begin() as conn:
            return (await conn.execute(stmt)).rowcount
    except (OperationalError, ProgrammingError) as exc:
        if "no such table" in str(exc) or "does not exist" in str(exc):
            return 0
        raise
    finally:
        await engine.dispose()
