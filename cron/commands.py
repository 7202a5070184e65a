"""Chat commands for scheduled jobs: ``/cron`` (list, pause, resume, remove, run) and ``/sethome``.

A chat sees and acts on its own jobs; admins (and the web chat's owner) on every job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cron.jobs import JobError, job_line
from cron.store import CronStore
from gateway.commands.registry import CommandContext, CommandSet
from gateway.storage.store import Store

if TYPE_CHECKING:
    from cron.scheduler import CronScheduler

USAGE = "Usage: {c} [list] | {c} pause ID | {c} resume ID | {c} remove ID | {c} run ID"


@dataclass(frozen=True)
class CronDeps:
    store: Store
    scheduler: Callable[[], CronScheduler | None]  # the running scheduler; None while cron is off


CRON_COMMANDS: CommandSet[CronDeps] = CommandSet()


@CRON_COMMANDS.command("cron", "scheduled jobs: list, pause, resume, remove or run one",
                       args_hint="[list | pause ID | resume ID | remove ID | run ID]")
async def cron(deps: CronDeps, ctx: CommandContext) -> str:
    running = deps.scheduler()
    if running is None:
        return "Scheduled jobs are switched off here (cron.enabled: false)."
    verb, _, rest = ctx.args.strip().partition(" ")
    verb = verb.lower() or "list"
    job_id = rest.strip()
    api = running.tool_api
    source = ctx.message.source
    if verb == "list":
        jobs = [j for j in await running.store.jobs() if api.mine(j, source)]
        if not jobs:
            return "No scheduled jobs here. Ask me to schedule one, or use `herald cron add`."
        return "Scheduled jobs:\n" + "\n".join(job_line(j) for j in jobs)
    if verb not in ("pause", "resume", "remove", "run"):
        return USAGE.format(c=ctx.adapter.capabilities.command("cron"))
    if not job_id:
        cron_command = ctx.adapter.capabilities.command("cron")
        return f"Which job? {cron_command} {verb} ID (ids are in {cron_command} list)."
    try:
        result = await api.do(verb, {"id": job_id}, source)
    except JobError as exc:
        return f"Could not {verb} it: {exc}"
    if verb == "resume":
        return f"▶️ Resumed {job_id}; next run {result['next_run_text']}."
    return {"pause": f"⏸ Paused {job_id}.", "remove": f"🗑 Removed {job_id}.",
            "run": f"▶️ Running {job_id} now; its result goes to its usual targets."}[verb]


@CRON_COMMANDS.command("sethome", "make this chat the home for scheduled jobs' results on this platform",
                       admin_only=True)
async def sethome(deps: CronDeps, ctx: CommandContext) -> str:
    src = ctx.message.source
    await CronStore.for_store(deps.store).set_home(src.platform, src.chat_id, src.thread_id, src.user_id)
    return (f"🏠 This chat is now the home chat for {src.platform}: jobs delivering to "
            f"\"{src.platform}\" send their results here.")
