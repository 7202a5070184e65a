"""``herald cron ...``: manage scheduled jobs from the shell, beside a running daemon or without one.

It writes the jobs table directly (the database HERALD_HOME / --profile / --config point at); a running
daemon re-reads the table every ``cron.poll_seconds`` and picks the change up. ``run ID`` is a request
the daemon carries out.

Whoever runs ``herald cron`` is the operator: a script given to ``add`` (or vouched for with ``approve``) is
trusted, stored with ``script_source="operator"``, and still runs in the sandbox like the agent's commands.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NoReturn

import typer

app = typer.Typer(no_args_is_help=True, help="Scheduled jobs whose results are delivered into chats.")


def _with_store(fn: Callable[[Any, Any], Awaitable[Any]]) -> Any:
    """Run ``fn(cron_store, cfg)`` against this profile's database (its tables created if missing)."""
    from gateway.cli.common import load

    cfg, paths = load()
    url = cfg.database.url
    if not url:
        paths.home.mkdir(parents=True, exist_ok=True)
        url = f"sqlite+aiosqlite:///{paths.db_file}"

    async def main() -> Any:
        from cron.store import engine_store
        from gateway.storage.migrations import upgrade

        store, engine = engine_store(url)
        try:
            async with engine.begin() as conn:
                await conn.run_sync(upgrade)
            return await fn(store, cfg)
        finally:
            await engine.dispose()

    return asyncio.run(main())


def _fail(message: str, code: int = 1) -> NoReturn:
    """Exit 2 for input that is wrong (like a usage error), 1 for a request that can't be done."""
    from gateway.cli.common import fail

    fail(f"cron: {message}", code)


async def _job_or_fail(store: Any, job_id: str) -> dict[str, Any]:
    job = await store.job(job_id)
    if job is None:
        _fail(f"no job {job_id!r} (herald cron list shows the ids)")
    return job


@app.command("add")
def add(
    schedule: Annotated[str, typer.Option("--schedule", "-s", help="30m | every 2h | '0 8 * * *' | ISO-8601")],
    prompt: Annotated[str, typer.Option("--prompt", help="what the agent does on each run")] = "",
    deliver: Annotated[str, typer.Option("--deliver", "-d",
                                         help="targets: platform, platform:chat_id[:thread], local")] = "local",
    name: Annotated[str | None, typer.Option("--name", "-n")] = None,
    tz: Annotated[str | None, typer.Option("--tz", help="IANA timezone (default cron.timezone)")] = None,
    repeat: Annotated[int | None, typer.Option("--repeat", min=1, help="stop after this many runs")] = None,
    script: Annotated[str | None, typer.Option("--script", help="command whose output joins the prompt")] = None,
    no_agent: Annotated[bool, typer.Option("--no-agent", help="deliver the script's output as it is")] = False,
    model: Annotated[str | None, typer.Option("--model", help="another model for this job")] = None,
    timeout: Annotated[float | None, typer.Option("--timeout", help="seconds (default cron.timeout_seconds)")] = None,
) -> None:
    """Add a job; prints its id."""
    from cron.jobs import JobError, build_job, operator_script, parse_targets
    from cron.schedule import ScheduleError, format_time
    from gateway.platforms import PLATFORMS

    fields = {"schedule": schedule, "prompt": prompt, "deliver": deliver, "name": name, "tz": tz, "repeat": repeat,
              "script": script, "no_agent": no_agent, "model": model, "timeout_seconds": timeout}

    async def go(store: Any, cfg: Any) -> dict[str, Any]:
        # Only targets that can ever be reached: a platform this profile runs, and for a bare platform name
        # a home chat (config or /sethome), so a typo or a disabled platform fails now, not at 8 am.
        enabled = {name for name in PLATFORMS if getattr(getattr(cfg.platforms, name, None), "enabled", False)}
        try:
            row = operator_script(build_job(fields, default_tz=cfg.cron.timezone, origin=None,
                                            min_interval=cfg.cron.min_interval_seconds,
                                            known_platforms=enabled, created_by="cli"))
            for target in parse_targets(row["deliver"], enabled, has_origin=False):
                home = getattr(cfg.platforms, target.platform or "", None)
                if target.kind == "home" and not (home and home.home_chat) and not await store.home(target.platform):
                    raise JobError(f"deliver: {target.platform} has no home chat: set platforms.{target.platform}"
                                   ".home_chat in config.yaml, send /sethome in the chat, or give "
                                   f"{target.platform}:CHAT_ID")
        except (JobError, ScheduleError) as exc:
            message = str(exc)
            unknown = [p for p in PLATFORMS if p not in enabled and f"platform {p!r}" in message]
            if unknown:
                message += f"; {unknown[0]} is not enabled (platforms.{unknown[0]}.enabled: true)"
            _fail(message, 2)
        return await store.add_job(row)

    row = _with_store(go)
    typer.echo(f"{row['id']}  added: {row['name']} — next run {format_time(row['next_run_at'], row['tz'])}")


@app.command("list")
def list_jobs(as_json: Annotated[bool, typer.Option("--json", help="a JSON array")] = False) -> None:
    """Show the jobs."""
    from cron.jobs import job_line, public_job

    async def go(store: Any, cfg: Any) -> list[dict[str, Any]]:
        return await store.jobs()

    jobs = _with_store(go)
    if as_json:
        typer.echo(json.dumps([public_job(j) for j in jobs], ensure_ascii=False))
        return
    if not jobs:
        typer.echo("No scheduled jobs.")
    for job in jobs:
        typer.echo(job_line(job))


def _change(job_id: str, fn: Callable[[Any, dict[str, Any]], Awaitable[str]]) -> None:
    async def go(store: Any, cfg: Any) -> str:
        return await fn(store, await _job_or_fail(store, job_id))

    typer.echo(_with_store(go))


@app.command("remove")
def remove(job_id: Annotated[str, typer.Argument(metavar="ID")]) -> None:
    """Delete a job (its history stays)."""
    async def fn(store: Any, job: dict[str, Any]) -> str:
        await store.remove_job(job["id"])
        return f"removed {job['id']}"

    _change(job_id, fn)


@app.command("pause")
def pause(job_id: Annotated[str, typer.Argument(metavar="ID")]) -> None:
    """Stop a job from running until it is resumed."""
    async def fn(store: Any, job: dict[str, Any]) -> str:
        if not job["enabled"]:
            _fail(f"job {job['id']} is not active")
        await store.update_job(job["id"], enabled=False)
        return f"paused {job['id']}"

    _change(job_id, fn)


@app.command("resume")
def resume(job_id: Annotated[str, typer.Argument(metavar="ID")]) -> None:
    """Let a paused job run again (runs missed while paused are skipped)."""
    from cron.jobs import schedule_of
    from cron.schedule import format_time, next_after

    async def fn(store: Any, job: dict[str, Any]) -> str:
        if job["enabled"]:
            _fail(f"job {job['id']} is already active")
        nxt = next_after(schedule_of(job), time.time(), job["created_at"])
        if nxt is None:
            _fail(f"job {job['id']} has no run left (its time has passed)")
        await store.update_job(job["id"], enabled=True, next_run_at=nxt)
        return f"resumed {job['id']}; next run {format_time(nxt, job['tz'])}"

    _change(job_id, fn)


@app.command("approve")
def approve(job_id: Annotated[str, typer.Argument(metavar="ID")]) -> None:
    """Vouch for a job's script as the operator (one that lost its approval, or came from an older Herald)."""
    async def fn(store: Any, job: dict[str, Any]) -> str:
        from cron.jobs import SCRIPT_TRUST, operator_script

        if not job["script"]:
            _fail(f"job {job['id']} has no script")
        vouched = operator_script(job)
        await store.update_job(job["id"], **{k: vouched[k] for k in SCRIPT_TRUST})
        return (f"approved the script of {job['id']} as the operator (herald cron resume {job['id']} if it was "
                f"paused):\n{job['script']}")

    _change(job_id, fn)


@app.command("run")
def run(job_id: Annotated[str, typer.Argument(metavar="ID")]) -> None:
    """Ask the running daemon to run a job now (it picks the request up within cron.poll_seconds)."""
    async def fn(store: Any, job: dict[str, Any]) -> str:
        await store.update_job(job["id"], run_requested_at=time.time())
        return f"run of {job['id']} requested; the daemon starts it within a few seconds (herald cron history)"

    _change(job_id, fn)


@app.command("history")
def history(
    job_id: Annotated[str, typer.Argument(metavar="ID")],
    limit: Annotated[int, typer.Option("--limit", "-n", min=1)] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="a JSON array")] = False,
) -> None:
    """A job's runs, newest first: run status and delivery status."""
    from cron.jobs import script_trust
    from cron.schedule import format_time

    async def go(store: Any, cfg: Any) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        return await store.job(job_id), await store.runs(job_id, limit)

    job, runs = _with_store(go)
    if as_json:
        typer.echo(json.dumps(runs, ensure_ascii=False, default=str))
        return
    trust = script_trust(job) if job is not None else None
    if trust:
        typer.echo(f"{job_id}: {trust}")
    if not runs:
        typer.echo(f"No runs recorded for {job_id}.")
    for r in runs:
        delivery = r["delivery_status"] + (f" ({r['delivery_error']})" if r["delivery_error"] else "")
        line = f"{r['id']:>5}  due {format_time(r['due_at'])}  {r['trigger']:9} {r['status']:9} delivery: {delivery}"
        if r["error"]:
            line += f"\n       {r['error']}"
        typer.echo(line)
