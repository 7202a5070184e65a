"""The cron engine: one timer loop keeps time, the database decides who runs what.

The loop calls ``tick()`` every ``cron.poll_seconds`` (re-reading the jobs table, so `herald cron ...` run
beside the daemon is picked up), sooner when a job's ``next_run_at`` comes first, so a run starts on time
rather than up to a poll late. It waits on the monotonic clock (asyncio's): due times are wall-clock times,
but a wall-clock timer (APScheduler's) set before the clock jumps back an hour would sleep that hour, and no
poll, run request or due time would be seen meanwhile. The job definitions and history live in the database.

Clock jumps: each tick compares how far the wall clock moved with how far the monotonic clock did; a
difference over ``CLOCK_JUMP_SECONDS`` is the fault ``clock_jump`` (counted and logged). Due times stay
wall-clock times, so forward, the catch-up rules below decide (one run, no burst); back, each job waits for
its next due time on the new clock, and no due time runs twice.

``tick()`` claims each due run with a conditional UPDATE (see cron/store.py) before starting it, so two
daemons on one database, or a restart in the middle, never run a due time twice. What counts as due
follows the catch-up rules: a recurring job whose latest due time is within its catch-up window runs
once, older misses fast-forward (one ``missed`` history row, no burst); a one-shot late by at most two
minutes runs, a later one is marked missed and its targets are told.

A job's script runs like the agent's terminal commands: in the sandbox (tools/sandbox.py) with its
allowlisted environment, and only when somebody vouched for it (cron/jobs.py ``script_problem``; for the
agent's scripts also a matching, person-made approval row). A script nobody vouched for is not run and its
job is paused.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from cron import schedule as sch
from cron.delivery import LEASE_SECONDS, deliver_run, deliverable_here, header, owner_id, owner_is_dead
from cron.jobs import schedule_of, script_problem
from cron.store import Claim, CronStore, op_claim, op_claim_request, op_fail_stale_runs
from cron.tool_api import CronToolAPI
from gateway.kernel.attached import with_files
from gateway.kernel.logs import redact
from gateway.kernel.shown import exact_hash
from gateway.media.outgoing import files_sent
from tools.dangerous import classify
from tools.sandbox import SandboxUnavailable, run_sandboxed

if TYPE_CHECKING:
    from cron.host import CronHost

log = structlog.get_logger("herald.cron")

SILENT = "[SILENT]"
# The wall clock moved this much more (or less) than the monotonic clock between two ticks: not drift or a
# slow tick (NTP slews by milliseconds), a step (a manual change, a VM restored, NTP's first sync, a suspend).
CLOCK_JUMP_SECONDS = 30.0
SCRIPT_OUTPUT_LIMIT = 20_000
STALE_AFTER = 120.0  # past its time limit by this much, a run still 'running' belongs to a process that died
INTERRUPTED = ("interrupted: Herald stopped during the run, so it has no result. It is not run again by itself: "
               "what it did before the stop may already have had effects.")
# A silent result ends the claim the run began with (its "interrupted" notice): nothing is owed to any chat.
SILENT_CLAIM = {"delivery_status": "silent", "delivery_text": None, "delivery_targets": None,
                "delivery_owner": None, "delivery_lease_until": None}
NO_SANDBOX = "scripts need the sandbox: install bubblewrap or set tools.terminal.sandbox: none"

CRON_PROMPT = (
    "[Scheduled job «{name}» ({id}), running on its own: nobody is here to answer questions, so do the task "
    "and reply with the result. Your reply is delivered to: {deliver}. If there is nothing worth sending this "
    "time, reply with exactly [SILENT].]\n\n{prompt}"
)


def _fresh_task(coro: Any) -> asyncio.Task[Any]:
    """A task in an empty context: whatever the caller had bound for its log lines (a chat turn's
    session_key and turn_id, when the cronjob tool or /cron woke the scheduler) is not the run's."""
    return asyncio.get_running_loop().create_task(coro, context=contextvars.Context())


class CronScheduler:
    def __init__(self, host: CronHost, now: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.host = host
        self.cfg = host.cfg.cron
        self.now = now
        self.monotonic = monotonic
        self._clock_mark: tuple[float, float] | None = None  # (wall, monotonic) at the last tick
        self.store = CronStore.for_store(host.store)
        self.running: dict[str, asyncio.Task[None]] = {}  # job id -> its run (a job never overlaps itself)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._sem = asyncio.Semaphore(self.cfg.max_parallel)
        self._tick_lock = asyncio.Lock()
        self._timer: asyncio.Task[None] | None = None
        self._next_due: float | None = None  # the earliest next_run_at the last tick saw
        self._delivering: set[str] = set()  # job ids with a delivery in progress in this process
        self._next_resume_check = 0.0
        self.tool_api = CronToolAPI(self, host)  # the cronjob tool's "cron_api", while this scheduler is the runner's
        if host.peers is not None:  # a delivery another instance left to those connected to its platform
            host.peers.on("cron", lambda _what: self._spawn(self.resume_deliveries()))

    # ---- lifecycle ---------------------------------------------------------------------------------

    async def start(self, timer: bool = True) -> None:
        """Fail runs a dead process left 'running', then (with ``timer``) start the loop that calls ``tick``."""
        # APScheduler (its triggers parse schedules) logs at INFO through stdlib logging; ours say what matters.
        logging.getLogger("apscheduler").setLevel(logging.WARNING)
        jobs = await self.store.jobs()
        longest = max([self.cfg.timeout_seconds, *(j["timeout_seconds"] or 0 for j in jobs)])
        stale = await self.store.write(op_fail_stale_runs(self.now() - longest - STALE_AFTER))
        if stale:
            log.warning("cron_runs_interrupted", runs=stale)
        await self.resume_deliveries()
        if not timer:
            return
        self._timer = _fresh_task(self._keep_time())

    async def _keep_time(self) -> None:
        while not self.host.life.stopping:
            await self.tick()
            wait = self.cfg.poll_seconds
            if self._next_due is not None:
                wait = min(wait, max(0.0, self._next_due - self.now()) + 0.005)
            await asyncio.sleep(wait)  # the monotonic clock: see the module's docstring

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            await asyncio.gather(self._timer, return_exceptions=True)
            self._timer = None
        tasks = [*self.running.values(), *self._tasks]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def wake(self) -> None:
        self._spawn(self.tick())

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = _fresh_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ---- the clock's work --------------------------------------------------------------------------

    async def tick(self) -> None:
        """Start whatever is due now (claimed in the database first) and note when the next one is due."""
        if self.host.life.stopping:
            return
        async with self._tick_lock:
            self._next_due = None  # a tick that fails waits a whole poll before the next try
            try:
                jobs = await self.store.jobs()
                now = self.now()
                self._check_clock(now)
                for job in jobs:
                    if job["run_requested_at"] is not None:
                        await self._take_request(job, now)
                    if job["enabled"] and job["next_run_at"] is not None and job["next_run_at"] <= now:
                        await self._due(job, now)
                self._next_due = min((j["next_run_at"] for j in jobs if j["enabled"] and j["next_run_at"] is not None),
                                     default=None)
                # A lease expires in minutes: no need to look every poll (monotonic: a clock set back an hour
                # must not put this off for an hour).
                if self.monotonic() >= self._next_resume_check:
                    self._next_resume_check = self.monotonic() + 30
                    await self.resume_deliveries()
            except Exception:
                log.exception("cron_tick_failed")

    def _check_clock(self, now: float) -> None:
        """Record a wall-clock jump since the last tick (the fault ``clock_jump``, with its size in seconds)."""
        mono = self.monotonic()
        mark, self._clock_mark = self._clock_mark, (now, mono)
        if mark is None:
            return
        jump = (now - mark[0]) - (mono - mark[1])
        if abs(jump) > CLOCK_JUMP_SECONDS:
            self.host.faults.record("clock_jump", seconds=round(jump, 1),
                                    direction="forward" if jump > 0 else "back")

    async def _take_request(self, job: dict[str, Any], now: float) -> None:
        if job["id"] in self.running:
            return  # taken once the current run is over
        run_id = await self.store.write(op_claim_request(job["id"], job["run_requested_at"], now))
        if run_id is not None:
            self._start(Claim(run_id, job, job["run_requested_at"], "manual"))

    async def _due(self, job: dict[str, Any], now: float) -> None:
        stored = job["next_run_at"]
        try:
            schedule = schedule_of(job)
        except sch.ScheduleError as exc:  # a hand-edited row; say so once and stop the job
            log.error("cron_job_invalid", job_id=job["id"], error=str(exc))
            await self.store.update_job(job["id"], enabled=False, last_status="invalid")
            return
        anchor = job["created_at"]
        if schedule.kind == "once":
            due, nxt = stored, None
        else:
            due = sch.last_due(schedule, stored, now, anchor)
            nxt = sch.next_after(schedule, now, anchor)
        in_window = now - due <= sch.catch_up_window(schedule, due, anchor)
        if not in_window:
            run_id = await self.store.write(op_claim(job["id"], stored, due, nxt, "missed", "missed", now, False))
            if run_id is None:
                return
            log.warning("cron_run_missed", job_id=job["id"], due_at=due, late_seconds=round(now - due, 1))
            self.host.metrics.cron_run("missed")
            if schedule.kind == "once":
                text = (f"It was due at {sch.format_time(due, job['tz'])}, but Herald was not running then; "
                        "it was not run late.")
                await self.store.update_run(run_id, error="missed: Herald was not running at the due time",
                                            **self._delivery_claim(job, text, "missed"))
                self._spawn(self._deliver(job, run_id, text, "missed"))
            else:
                await self.store.update_run(run_id, delivery_status="none", error=(
                    "missed: Herald was not running at the due time; the next run is "
                    f"{sch.format_time(nxt, job['tz'])}"))
            return
        if job["id"] in self.running:
            run_id = await self.store.write(op_claim(job["id"], stored, due, nxt, "scheduled", "skipped", now, False))
            if run_id is not None:
                await self.store.update_run(run_id, delivery_status="none",
                                            error="skipped: the previous run was still going")
                log.info("cron_run_skipped", job_id=job["id"], reason="previous run still going")
                self.host.metrics.cron_run("skipped")
            return
        if job["repeat"] is not None and job["runs_done"] + 1 >= job["repeat"]:
            nxt = None
        run_id = await self.store.write(op_claim(job["id"], stored, due, nxt, "scheduled", "running", now, True))
        if run_id is not None:
            self._start(Claim(run_id, job, due, "scheduled"))

    # ---- one run -----------------------------------------------------------------------------------

    def _start(self, claim: Claim) -> None:
        task = _fresh_task(self._run(claim))
        self.running[claim.job["id"]] = task

        def done(_t: asyncio.Task[None], job_id: str = claim.job["id"]) -> None:
            if self.running.get(job_id) is task:
                del self.running[job_id]

        task.add_done_callback(done)

    async def _run(self, claim: Claim) -> None:
        job, run_id = claim.job, claim.run_id
        limit = job["timeout_seconds"] or self.cfg.timeout_seconds
        structlog.contextvars.bind_contextvars(job_id=job["id"], run_id=run_id)
        status, output, error = "failed", None, None
        try:
            async with self._sem:
                log.info("cron_run_started", trigger=claim.trigger, due_at=claim.due_at)
                try:
                    # Until the result replaces it, the run's delivery claim carries the notice that it was cut
                    # off: if this process dies mid-run, whoever takes the claim over tells the chat.
                    await self.store.update_run(run_id, **self._delivery_claim(
                        job, INTERRUPTED, "failed", lease=limit + STALE_AFTER))
                    output = await asyncio.wait_for(self._produce(job, run_id, limit), limit)
                    status = "ok"
                except TimeoutError:
                    status, error = "timed_out", f"stopped after {sch_duration(limit)} (the job's time limit)"
                except RunFailed as exc:
                    status, error, output = "failed", str(exc), exc.output
                except asyncio.CancelledError:
                    status, error = "failed", INTERRUPTED
                    self.host.metrics.cron_run(status)
                    # The notice is delivered by the next process (or another instance): this one is stopping.
                    # The whole claim, with its lease ended: the stop may have come before the claim was written.
                    await asyncio.shield(self.store.update_run(
                        run_id, job["id"], status, status=status, error=error, finished_at=self.now(),
                        **self._delivery_claim(job, INTERRUPTED, "failed", lease=0)))
                    raise
                except Exception as exc:
                    log.exception("cron_run_crashed")
                    status, error = "failed", f"{type(exc).__name__}: {exc}"
            # The error (an exception's text, a script's stderr) is stored, shown by the CLI and delivered
            # into chats: mask tokens and configured secrets first.
            error = redact(error) if error else error
            silent = status == "ok" and (output or "").strip() == SILENT
            text = output if status == "ok" else error or status
            if status == "failed" and output:
                text = f"{error}\n\n{output}"
            text = text or "(no output)"
            # The result and the claim on its delivery land together: if this process dies before the
            # message is out, another one (or this one after a restart) delivers it.
            await self.store.update_run(run_id, job["id"], status, status=status, output=output, error=error,
                                        finished_at=self.now(), **(SILENT_CLAIM if silent
                                                                   else self._delivery_claim(job, text, status)))
            log.info("cron_run_finished", status=status, silent=silent, error=error)
            self.host.metrics.cron_run(status)
            if not silent:
                self._spawn(self._deliver(job, run_id, text, status))
        finally:
            structlog.contextvars.unbind_contextvars("job_id", "run_id")

    async def _produce(self, job: dict[str, Any], run_id: int, limit: float) -> str:
        prompt = job["prompt"]
        if job["script"]:
            stdout = await self._script(job, limit)
            if job["no_agent"]:
                return stdout
            prompt = f"{prompt}\n\n[Output of the job's script]\n{stdout}"
        content = CRON_PROMPT.format(name=job["name"], id=job["id"], deliver=job["deliver"], prompt=prompt)
        result = await self.host.turns.run_detached_turn(
            f"cron:{job['id']}:{run_id}", content, limit, model=job["model"], extras={"cron_job_id": job["id"]})
        if getattr(result, "status", "ok") != "ok":
            raise RunFailed(f"the agent's turn ended with {result.status}"
                            + (f" ({result.error_kind})" if getattr(result, "error_kind", None) else ""),
                            result.text)
        # The files the agent sent ride with the result as a block of paths: stored with it, delivered after it.
        return with_files(result.text or "", [f.path for f in files_sent(result.messages)])

    async def _script(self, job: dict[str, Any], limit: float) -> str:
        refused = await self._unvouched(job)
        if refused is not None:
            # It would be refused on every run: the job stops until someone approves or changes it.
            await self.store.update_job(job["id"], enabled=False)
            log.warning("cron_script_refused", source=job["script_source"], reason=refused)
            raise RunFailed(f"not run: {refused}")
        if job["script_source"] == "agent" and not self.host.cfg.tools.terminal.enabled:
            raise RunFailed("not run: the agent's scripts are commands like its terminal's, and the terminal is "
                            "off (tools.terminal.enabled: false)")
        policy = self.host.sandbox()
        try:
            if policy is None:
                raise SandboxUnavailable("the sandbox is not set up")
            code, out, err = await run_sandboxed(job["script"], policy, timeout=limit, max_output=SCRIPT_OUTPUT_LIMIT)
        except SandboxUnavailable as exc:
            raise RunFailed(f"not run: {NO_SANDBOX} ({exc})") from None
        except FileNotFoundError as exc:  # the workspace (its working directory) is gone
            raise RunFailed(f"not run: {exc}") from None
        # The environment is an allowlist, but the script may still print a secret it can read: mask them.
        stdout = redact(out[-SCRIPT_OUTPUT_LIMIT:])
        if code != 0:
            tail = err.strip()[-2000:]
            raise RunFailed(f"the script exited with status {code}" + (f": {tail}" if tail else ""), stdout or None)
        return stdout

    async def _unvouched(self, job: dict[str, Any]) -> str | None:
        """Why nobody vouches for this job's script (None: somebody does)."""
        problem = script_problem(job)
        if problem is not None or job["script_source"] != "agent":
            return problem
        script = job["script"]
        verdict = classify(script)
        if verdict.forbidden:  # the classifier learned something since it was approved
            return (f"its script is forbidden ({verdict.reason}); it never runs, with or without approval, and the "
                    "job is paused")
        # The row's approver and approval id must name a person's decision about this exact text (a row
        # changed behind Herald's back does not borrow another command's approval).
        row = await self.store.approval(job["script_approval_id"])
        if (row is None or row["status"] != "approved" or row["decided_via"] not in ("button", "command")
                or row["command_sha256"] != exact_hash(script)
                or f"{row['platform']}:{row['decided_by']}" != job["script_approved_by"]):
            return ("its script does not match the approval recorded for it, so it was not run and the job is "
                    f"paused: check the script, then approve it with `herald cron approve {job['id']}`, or have "
                    "the agent set it again (the chat is asked), or re-create the job")
        return None

    def _delivery_claim(self, job: dict[str, Any], text: str, status: str,
                        lease: float = LEASE_SECONDS) -> dict[str, Any]:
        return {"delivery_text": f"{header(job, status)}\n\n{text}".rstrip(), "delivery_targets": job["deliver"],
                "delivery_status": "pending", "delivery_owner": owner_id(), "delivery_lease_until": self.now() + lease}

    async def resume_deliveries(self) -> int:
        """Take over deliveries whose owner died (this machine) or stopped renewing its lease (any machine)."""
        now, taken = self.now(), 0
        for row in await self.store.unfinished_deliveries():
            if row["delivery_lease_until"] > now and not owner_is_dead(row["delivery_owner"]):
                continue
            if row["delivery_owner"] == owner_id() and row["job_id"] in self.running:
                continue  # a run of ours still going (its lease looks out only after a clock jump)
            if row["job_id"] in self._delivering or not await deliverable_here(self.host, self.store, row):
                continue
            won = await self.store.take_delivery(row["id"], row["delivery_lease_until"], owner_id(),
                                                 now + LEASE_SECONDS)
            if won is None:
                continue  # another instance took it
            if won["status"] == "running":  # its process died mid-run: the claim carries the notice
                won["status"] = "failed"
                await self.store.update_run(won["id"], won["job_id"], "failed", status="failed", error=INTERRUPTED,
                                            finished_at=now)
                self.host.metrics.cron_run("failed")
                log.warning("cron_run_interrupted", job_id=won["job_id"], run_id=won["id"])
            job = await self.store.job(won["job_id"])
            if job is None:
                await self.store.update_run(won["id"], delivery_status="failed", delivery_lease_until=None,
                                            delivery_error="the job was removed before its result was delivered")
                continue
            taken += 1
            log.info("cron_delivery_resumed", job_id=job["id"], run_id=won["id"],
                     attempts_before=won["delivery_attempts"])
            self._spawn(self._deliver(job, won["id"], "", won["status"], resume=won))
        return taken

    async def _deliver(self, job: dict[str, Any], run_id: int, text: str, status: str,
                       resume: dict[str, Any] | None = None) -> None:
        self._delivering.add(job["id"])
        try:
            await deliver_run(self.host, self.store, job, run_id, text, status, resume=resume, now=self.now)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("cron_delivery_crashed", job_id=job["id"], run_id=run_id)
            await self.store.update_run(run_id, delivery_status="failed", delivery_error=redact(str(exc)),
                                        delivery_lease_until=None)
        finally:
            self._delivering.discard(job["id"])

    # ---- requests from the CLI, /cron and the tool -------------------------------------------------

    async def request_run(self, job_id: str) -> bool:
        ok = await self.store.update_job(job_id, run_requested_at=self.now())
        if ok:
            self._spawn(self.tick())
        return ok


class RunFailed(Exception):
    def __init__(self, message: str, output: str | None = None) -> None:
        super().__init__(message)
        self.output = output


def sch_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:g} seconds"
    return f"{seconds / 60:g} minutes"
