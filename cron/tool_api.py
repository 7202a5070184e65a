"""Job management shared by the ``cronjob`` tool and ``/cron``: async on the loop, plus a thread-side door.

Tools run in worker threads; ``CronToolAPI.call`` hands a coroutine to the loop with
``asyncio.run_coroutine_threadsafe`` and waits for its result, the way the approval hook does.

A job's script is a command that will run unattended, again and again. ``create``, and ``update`` setting a
script that is new (or not yet approved), store nothing without a :class:`ScriptApproval` for that exact
text: they answer ``{NEEDS_APPROVAL: {"script": ...}}`` instead, after every other field is checked, and
the ``cronjob`` tool asks the person in the chat and calls again with the answer. The approval travels
beside the fields, never in them: nothing the model writes into a tool call can claim one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from cron import schedule as sch
from cron.jobs import (
    JOB_EDITABLE,
    SCRIPT_TRUST,
    JobError,
    ScriptApproval,
    build_job,
    parse_targets,
    public_job,
    schedule_of,
    script_problem,
)

if TYPE_CHECKING:
    from cron.host import CronHost
    from cron.store import CronStore
    from gateway.platforms.base import Source

CALL_TIMEOUT = 30.0
NEEDS_APPROVAL = "script_needs_approval"


class Scheduling(Protocol):
    """What job management needs from the scheduler (which builds this API)."""

    store: CronStore
    now: Callable[[], float]

    def wake(self) -> None:
        """Re-read the jobs soon (a job was added or changed)."""

    async def request_run(self, job_id: str) -> None: ...


class CronToolAPI:
    def __init__(self, scheduler: Scheduling, host: CronHost) -> None:
        self.scheduler = scheduler
        self.host = host
        self.store = scheduler.store

    # ---- thread side -------------------------------------------------------------------------------

    def call(self, action: str, args: dict[str, Any], origin: Source | None,
             approval: dict[str, str] | None = None) -> Any:
        """``approval``: {"script", "approved_by", "approval_id"} from the chat's answer (tools/cronjob.py)."""
        loop = self.host.life.loop
        if loop is None or loop.is_closed():
            raise RuntimeError("the gateway is shutting down")
        granted = ScriptApproval(**approval) if approval is not None else None
        future = asyncio.run_coroutine_threadsafe(self.do(action, args, origin, granted), loop)
        return future.result(timeout=CALL_TIMEOUT)

    # ---- loop side ---------------------------------------------------------------------------------

    def known_platforms(self) -> set[str]:
        from gateway.platforms import PLATFORMS

        return set(PLATFORMS) | set(self.host.adapters)

    async def do(self, action: str, args: dict[str, Any], origin: Source | None,
                 approval: ScriptApproval | None = None) -> Any:
        handler = getattr(self, f"_{action}", None) if action in ACTIONS else None
        if handler is None:
            raise JobError(f"action: unknown action {action!r} (one of {', '.join(ACTIONS)})")
        if action in ("create", "update"):
            return await handler(args, origin, approval)
        return await handler(args, origin)

    @staticmethod
    def _vouched(script: str, approval: ScriptApproval | None) -> dict[str, Any] | None:
        """The script_* columns when ``approval`` covers exactly ``script``; None when it must be asked."""
        if approval is None or approval.script != script or not approval.approved_by or not approval.approval_id:
            return None
        return approval.fields()

    def mine(self, job: dict[str, Any], origin: Source | None) -> bool:
        """Jobs belong to the chat they were created in; admins (and the web chat's owner) see them all."""
        if origin is None:
            return False
        if self.host.is_admin(origin):
            return True
        made_in = job.get("origin") or {}
        return (made_in.get("platform") == origin.platform and made_in.get("chat_id") == origin.chat_id
                and made_in.get("scope") == origin.scope)

    async def _job(self, args: dict[str, Any], origin: Source | None) -> dict[str, Any]:
        job_id = str(args.get("id") or args.get("job_id") or "").strip()
        if not job_id:
            raise JobError("id: which job? (the id from list)")
        job = await self.store.job(job_id)
        if job is None or not self.mine(job, origin):  # another chat's job is not shown to exist
            raise JobError(f"id: no job {job_id!r} in this chat")
        return job

    async def _create(self, args: dict[str, Any], origin: Source | None,
                      approval: ScriptApproval | None = None) -> dict[str, Any]:
        row = build_job(args, default_tz=self.host.cfg.cron.timezone, origin=origin.to_dict() if origin else None,
                        min_interval=self.host.cfg.cron.min_interval_seconds,
                        known_platforms=self.known_platforms(),
                        created_by=f"{origin.platform}:{origin.user_id}" if origin else None,
                        now=self.scheduler.now())
        if row["script"]:
            vouched = self._vouched(row["script"], approval)
            if vouched is None:
                return {NEEDS_APPROVAL: {"script": row["script"]}}
            row.update(vouched)
        await self.store.add_job(row)
        self.scheduler.wake()
        return {"created": public_job(row)}

    async def _list(self, args: dict[str, Any], origin: Source | None) -> dict[str, Any]:
        return {"jobs": [public_job(j) for j in await self.store.jobs() if self.mine(j, origin)]}

    async def _update(self, args: dict[str, Any], origin: Source | None,
                      approval: ScriptApproval | None = None) -> dict[str, Any]:
        job = await self._job(args, origin)
        changes = {k: v for k, v in args.items() if k in JOB_EDITABLE}
        if not changes:
            raise JobError(f"nothing to change (fields: {', '.join(JOB_EDITABLE)})")
        merged = {**job, **changes}
        now = self.scheduler.now()
        # Rebuild through the same validation as a new job; keep the id, history and counters.
        fresh = build_job(merged, default_tz=None, origin=job["origin"], known_platforms=self.known_platforms(),
                          min_interval=self.host.cfg.cron.min_interval_seconds,
                          created_by=job["created_by"], now=now)
        values = {k: fresh[k] for k in ("name", "prompt", "deliver", "repeat", "script", "no_agent", "model",
                                        "timeout_seconds")}
        if "schedule" in changes or "tz" in changes:
            values.update({k: fresh[k] for k in ("schedule", "kind", "tz", "run_at", "next_run_at")})
            values["created_at"] = now  # intervals count from the change
        if not fresh["script"]:
            values.update(dict.fromkeys(SCRIPT_TRUST))
        elif fresh["script"] != job["script"] or ("script" in changes and script_problem(job) is not None):
            # A new script is a new command: the same gate as create (and the way to approve one that lost it).
            vouched = self._vouched(fresh["script"], approval)
            if vouched is None:
                return {NEEDS_APPROVAL: {"script": fresh["script"]}}
            values.update(vouched)
        await self.store.update_job(job["id"], **values)
        self.scheduler.wake()
        return {"updated": public_job({**job, **values})}

    async def _pause(self, args: dict[str, Any], origin: Source | None) -> dict[str, Any]:
        job = await self._job(args, origin)
        if not job["enabled"]:
            raise JobError(f"job {job['id']} is not active")
        await self.store.update_job(job["id"], enabled=False)
        return {"paused": job["id"]}

    async def _resume(self, args: dict[str, Any], origin: Source | None) -> dict[str, Any]:
        job = await self._job(args, origin)
        if job["enabled"]:
            raise JobError(f"job {job['id']} is already active")
        now = self.scheduler.now()
        schedule = schedule_of(job)
        # Runs that fell due while it was paused are skipped, not made up.
        nxt = sch.next_after(schedule, now, job["created_at"])
        if nxt is None:
            raise JobError(f"job {job['id']} has no run left (its time has passed); create a new one")
        await self.store.update_job(job["id"], enabled=True, next_run_at=nxt)
        self.scheduler.wake()
        return {"resumed": job["id"], "next_run": nxt, "next_run_text": sch.format_time(nxt, job["tz"])}

    async def _remove(self, args: dict[str, Any], origin: Source | None) -> dict[str, Any]:
        job = await self._job(args, origin)
        await self.store.remove_job(job["id"])
        return {"removed": job["id"]}

    async def _run(self, args: dict[str, Any], origin: Source | None) -> dict[str, Any]:
        job = await self._job(args, origin)
        parse_targets(job["deliver"])
        await self.scheduler.request_run(job["id"])
        return {"run_requested": job["id"]}


ACTIONS = ("create", "list", "update", "pause", "resume", "remove", "run")
