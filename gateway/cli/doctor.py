"""``herald doctor``: check-config's checks plus live ones (model, platforms, database, sandbox, disk, clock),
one line each; exit 0 only when none failed."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Annotated

import typer

from gateway.cli.common import EXIT_FAILED, load_checked

MARKS = {"ok": "✓", "warn": "!", "fail": "✗"}


def doctor(
    config: Annotated[str | None, typer.Option("--config", "-c", help="path to config.yaml")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON document, for scripts")] = False,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="seconds each live check may take")] = 10.0,
) -> None:
    """Can this installation work? Everything check-config checks, plus: the model answers and accepts its
    key, each platform's credential is valid and not locked by another process, the database and its schema,
    the sandbox runs `true`, the home's permissions, free disk, the clock. Exit 0 only when all pass."""
    from gateway.ops.doctor import Doctor

    cfg, paths, schema, skip = load_checked(config)
    checks = asyncio.run(Doctor(cfg, paths, timeout=timeout, schema=schema, skip=skip).run())
    failed = [c for c in checks if c.status == "fail"]
    if as_json:
        typer.echo(json.dumps({"ok": not failed, "profile": paths.profile, "checks": [c.to_dict() for c in checks]},
                              indent=2, ensure_ascii=False))
    else:
        marks = MARKS if _utf8() else {"ok": "OK", "warn": "!!", "fail": "XX"}
        for c in checks:
            typer.echo(f"{marks[c.status]} {c.name}: {c.message}" + (f" → {c.fix}" if c.fix and c.status != "ok"
                                                                       else ""))
        typer.echo(f"{len(failed)} problem(s)" if failed else "all checks passed")
    if failed:
        raise typer.Exit(EXIT_FAILED)


def _utf8() -> bool:
    return (sys.stdout.encoding or "").lower().replace("-", "") == "utf8"
