"""Building and changing job rows: the one place the CLI, the ``cronjob`` tool and ``/cron`` validate fields.

A job's script is a shell command that runs unattended on every run, so somebody must vouch for it: the
operator (``herald cron add`` / ``herald cron approve``: ``script_source="operator"``) or a person who
approved this exact text in the chat when the agent asked (``script_source="agent"``, with the approver and
the approval's id). :func:`script_problem` is what the scheduler checks before it runs one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from cron.schedule import MIN_INTERVAL, ScheduleError, first_run, format_time, parse_schedule, zone
from cron.store import new_job_id

# Fields a user may set on create and change with update. Never the script_* columns: only the approval
# gate (cron/tool_api.py) and the operator's CLI write those.
JOB_EDITABLE = ("name", "prompt", "schedule", "tz", "deliver", "repeat", "script", "no_agent", "model",
                "timeout_seconds")
SCRIPT_TRUST = ("script_source", "script_approved_by", "script_approval_id")


class JobError(ValueError):
    """A job field is wrong; ``str()`` says which and why."""


@dataclass(frozen=True)
class ScriptApproval:
    """A person's approval of one exact script, from the chat's approval prompt (tools/cronjob.py)."""

    script: str
    approved_by: str  # "platform:user_id"
    approval_id: str

    def fields(self) -> dict[str, Any]:
        return {"script_source": "agent", "script_approved_by": self.approved_by,
                "script_approval_id": self.approval_id}


def operator_script(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with its script vouched for by the operator (who runs `herald cron`: trusted)."""
    if row.get("script"):
        return {**row, "script_source": "operator", "script_approved_by": "operator", "script_approval_id": None}
    return {**row, **dict.fromkeys(SCRIPT_TRUST)}


def script_problem(job: dict[str, Any]) -> str | None:
    """Why this job's script may not run (None: it may, or there is none), from the row alone.

    An agent's script also needs its approval row to match (the scheduler checks that in the database).
    """
    if not job.get("script"):
        return None
    source = job.get("script_source")
    if source == "operator":
        return None
    if source == "agent" and job.get("script_approved_by") and job.get("script_approval_id"):
        return None
    return ("its script has no recorded approval (it comes from an older Herald, or its row was changed "
            "outside Herald), so it was not run and the job is paused: check the script, then approve it with "
            f"`herald cron approve {job.get('id')}`, or have the agent set it again (the chat is asked), or "
            "re-create the job")


def script_trust(job: dict[str, Any]) -> str | None:
    """Who vouches for the script, as `herald cron` and /cron show it (None: no script)."""
    if not job.get("script"):
        return None
    if job.get("script_source") == "operator":
        return "script by the operator"
    if script_problem(job) is None:
        return f"script by the agent, approved by {job['script_approved_by']} (approval {job['script_approval_id']})"
    return "script NOT APPROVED: it will not run"


@dataclass(frozen=True)
class Target:
    kind: str  # origin | home | chat | local
    platform: str | None = None
    chat_id: str | None = None
    thread_id: str | None = None

    def __str__(self) -> str:
        if self.kind == "chat":
            text = f"{self.platform}:{_enc(self.chat_id or '')}"
            return text + (f":{_enc(self.thread_id)}" if self.thread_id else "")
        return self.platform if self.kind == "home" else self.kind  # type: ignore[return-value]


def _enc(value: str) -> str:
    # Ids may contain any character; ':' and ',' separate targets' parts, '%' escapes, and spaces are escaped
    # too: a deliver string's parts are stripped, which would eat one at the end of an id.
    return quote(value, safe="-_.~@+!$&'()*;=/")


def split_chat(text: str) -> tuple[str, str | None]:
    """``chat_id[:thread_id]`` with percent-encoded parts -> (chat_id, thread_id)."""
    chat_id, _, thread_id = text.partition(":")
    return unquote(chat_id), (unquote(thread_id) or None)


def parse_targets(text: str, known_platforms: set[str] | None = None, has_origin: bool = True) -> list[Target]:
    parts = [p.strip() for p in (text or "").split(",") if p.strip()]
    if not parts:
        raise JobError("deliver: give at least one target (origin, local, a platform name, or platform:chat_id)")
    targets: list[Target] = []
    for part in parts:
        if part in ("origin", "local"):
            if part == "origin" and not has_origin:
                raise JobError("deliver: 'origin' needs a job created from a chat; name a platform or "
                               "platform:chat_id instead")
            targets.append(Target(part))
            continue
        platform, _, rest = part.partition(":")
        if known_platforms is not None and platform not in known_platforms:
            raise JobError(f"deliver: unknown platform {platform!r} in {part!r} "
                           f"(known: {', '.join(sorted(known_platforms))})")
        if not rest:
            targets.append(Target("home", platform))
            continue
        chat_id, thread_id = split_chat(rest)
        if not chat_id:
            raise JobError(f"deliver: {part!r} has no chat id")
        targets.append(Target("chat", platform, chat_id, thread_id))
    return targets


def build_job(fields: dict[str, Any], *, default_tz: str | None, origin: dict[str, Any] | None,
              known_platforms: set[str] | None, created_by: str | None, now: float | None = None,
              min_interval: float = MIN_INTERVAL) -> dict[str, Any]:
    """A new cron_jobs row from user-given fields; raises JobError / ScheduleError with the reason."""
    now = time.time() if now is None else now
    prompt = str(fields.get("prompt") or "").strip()
    script = (fields.get("script") or None) and str(fields["script"])
    no_agent = bool(fields.get("no_agent"))
    if no_agent and not script:
        raise JobError("no_agent: a job without the agent needs a script whose output is delivered")
    if not prompt and not no_agent:
        raise JobError("prompt: say what the agent should do on each run")
    tz = fields.get("tz") or default_tz or None
    zone(tz)
    schedule = parse_schedule(str(fields.get("schedule") or ""), tz, now, min_interval)
    deliver = str(fields.get("deliver") or ("origin" if origin else "local"))
    parse_targets(deliver, known_platforms, has_origin=origin is not None)
    repeat = fields.get("repeat")
    if repeat is not None and (not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1):
        raise JobError("repeat: must be a whole number of runs, at least 1")
    timeout = fields.get("timeout_seconds")
    if timeout is not None:
        try:
            timeout = float(timeout)
        except (TypeError, ValueError):
            raise JobError("timeout_seconds: must be a number of seconds") from None
        if timeout <= 0:
            raise JobError("timeout_seconds: must be greater than zero")
    name = str(fields.get("name") or "").strip() or (prompt or script or "job")[:60]
    return {
        "id": new_job_id(), "name": name[:200], "prompt": prompt, "schedule": schedule.text, "kind": schedule.kind,
        "tz": tz, "run_at": schedule.run_at, "deliver": deliver, "origin": origin, "enabled": True,
        "repeat": repeat, "runs_done": 0, "script": script, "no_agent": no_agent,
        "model": fields.get("model") or None, "timeout_seconds": timeout,
        "next_run_at": first_run(schedule, now), "last_run_at": None, "last_status": None,
        "run_requested_at": None, "created_by": created_by, "created_at": now, "updated_at": now,
    }


def schedule_of(job: dict[str, Any]) -> Any:
    """The parsed schedule of a stored job (a one-shot keeps the moment it was given)."""
    from cron.schedule import Schedule

    if job["kind"] == "once":
        return Schedule("once", job["schedule"], job["tz"], run_at=job["run_at"])
    # Checked against cron.min_interval_seconds when it was created: a stored job is run as it is.
    return parse_schedule(job["schedule"], job["tz"], job["created_at"], min_interval=0)


def public_job(job: dict[str, Any]) -> dict[str, Any]:
    """What `herald cron list --json` and the tool show."""
    return {
        "id": job["id"], "name": job["name"], "schedule": job["schedule"], "tz": job["tz"],
        "deliver": job["deliver"], "enabled": bool(job["enabled"]), "next_run": job["next_run_at"],
        "next_run_text": format_time(job["next_run_at"], job["tz"]), "last_run": job["last_run_at"],
        "last_status": job["last_status"], "repeat": job["repeat"], "runs_done": job["runs_done"],
        "prompt": job["prompt"], "script": job["script"], "no_agent": bool(job["no_agent"]), "model": job["model"],
        "timeout_seconds": job["timeout_seconds"],
        **{k: job.get(k) for k in SCRIPT_TRUST},
    }


def job_line(job: dict[str, Any]) -> str:
    state = "active" if job["enabled"] else ("paused" if job["next_run_at"] else "finished")
    nxt = f"next {format_time(job['next_run_at'], job['tz'])}" if job["enabled"] and job["next_run_at"] else state
    last = f", last {job['last_status']}" if job["last_status"] else ""
    trust = script_trust(job)
    return f"{job['id']}  {job['name']}  [{job['schedule']}] → {job['deliver']}  ({nxt}{last})" + (
        f"  [{trust}]" if trust else "")


__all__ = ["JOB_EDITABLE", "SCRIPT_TRUST", "JobError", "ScheduleError", "ScriptApproval", "Target", "build_job",
           "job_line", "operator_script", "parse_targets", "public_job", "schedule_of", "script_problem",
           "script_trust"]
