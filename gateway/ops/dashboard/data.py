"""What the dashboard shows, gathered from the daemon's memory (adapters, lanes, pending approvals) and its
database (sessions, cron jobs and runs, failed deliveries, parked messages). Read-only; each view costs a handful
of indexed queries, run off the loop by the store."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from sqlalchemy import desc, select

from gateway.storage.tables import cron_jobs, cron_runs, inbox, outbox, sessions

SESSIONS_SHOWN = 100
RUNS_SHOWN = 50
FAILURES_SHOWN = 15
PARKED_SHOWN = 20
TEXT_SHOWN = 200


@dataclass
class SessionRow:
    key: str
    platform: str
    chat: str
    thread: str | None
    user: str | None
    last_activity: float
    queued: int
    busy_since: float | None  # wall-clock start of the running turn, or None when idle
    step: str | None


@dataclass
class Overview:
    adapters: dict[str, dict[str, Any]]
    sessions: list[SessionRow]
    approvals: list[dict[str, Any]]
    jobs: list[dict[str, Any]]
    failures: list[dict[str, Any]] = field(default_factory=list)
    parked: list[dict[str, Any]] = field(default_factory=list)
    turns_running: int = 0
    turns_waiting: int = 0
    # The audit trail of the agent in the conversation (gateway/storage/audit.py), newest first.
    events: list[dict[str, Any]] = field(default_factory=list)


def is_session_key(key: str) -> bool:
    """``key`` has a session key's shape (gateway/session/keys.py): platform, optional scope, chat type, chat."""
    parts = key.split(":")
    rest = parts[2:] if len(parts) > 1 and parts[1].startswith("s") else parts[1:]
    return (len(key) <= 1024 and bool(parts[0]) and len(rest) >= 2 and rest[0] in ("dm", "group", "channel")
            and bool(rest[1]))


def parse_key(key: str) -> tuple[str, str, str | None, str | None]:
    """(platform, chat, thread, user) from a session key (gateway/session/keys.py), ids decoded."""
    parts = key.split(":")
    platform, rest = parts[0], parts[1:]
    if rest and rest[0].startswith("s"):
        rest = rest[1:]
    chat = unquote(rest[1]) if len(rest) > 1 else ""
    thread = user = None
    for part in rest[2:]:
        if part.startswith("t"):
            thread = unquote(part[1:])
        elif part.startswith("u"):
            user = unquote(part[1:])
    return platform, chat, thread, user


def active_sessions(conn: Any) -> list[dict[str, Any]]:
    stmt = (select(sessions.c.key, sessions.c.platform, sessions.c.updated_at)
            .where(sessions.c.ended_at.is_(None)).order_by(desc(sessions.c.updated_at)).limit(SESSIONS_SHOWN))
    return [dict(r._mapping) for r in conn.execute(stmt)]


def jobs_with_last_run(conn: Any) -> list[dict[str, Any]]:
    jobs = [dict(r._mapping) for r in conn.execute(select(cron_jobs).order_by(cron_jobs.c.created_at))]
    for job in jobs:
        last = conn.execute(select(cron_runs).where(cron_runs.c.job_id == job["id"])
                            .order_by(desc(cron_runs.c.id)).limit(1)).first()
        job["last_run"] = dict(last._mapping) if last else None
    return jobs


def job_and_runs(job_id: str) -> Any:
    def op(conn: Any) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        job = conn.execute(select(cron_jobs).where(cron_jobs.c.id == job_id)).first()
        runs = conn.execute(select(cron_runs).where(cron_runs.c.job_id == job_id)
                            .order_by(desc(cron_runs.c.id)).limit(RUNS_SHOWN))
        return (dict(job._mapping) if job else None), [dict(r._mapping) for r in runs]

    return op


def delivery_failures(conn: Any) -> list[dict[str, Any]]:
    """The latest failed chunks of replies and notices, and cron results that could not be delivered."""
    chunks = conn.execute(select(outbox.c.platform, outbox.c.chat_id, outbox.c.error, outbox.c.updated_at,
                                 outbox.c.created_at).where(outbox.c.status == "failed")
                          .order_by(desc(outbox.c.id)).limit(FAILURES_SHOWN))
    out = [{"what": "reply", "where": f"{r.platform}:{r.chat_id}", "error": r.error,
            "at": r.updated_at or r.created_at} for r in chunks]
    runs = conn.execute(select(cron_runs.c.job_id, cron_runs.c.id, cron_runs.c.delivery_error,
                               cron_runs.c.finished_at, cron_runs.c.due_at)
                        .where(cron_runs.c.delivery_status == "failed").order_by(desc(cron_runs.c.id))
                        .limit(FAILURES_SHOWN))
    out += [{"what": f"cron job {r.job_id} run {r.id}", "where": None, "error": r.delivery_error,
             "at": r.finished_at or r.due_at, "job_id": r.job_id} for r in runs]
    return sorted(out, key=lambda f: f["at"] or 0, reverse=True)[:FAILURES_SHOWN]


def parked_messages(conn: Any) -> list[dict[str, Any]]:
    """The latest messages set aside because their turns kept taking the daemon down (gateway/turns/attempts.py)."""
    rows = conn.execute(select(inbox.c.id, inbox.c.platform, inbox.c.payload, inbox.c.attempts, inbox.c.error,
                               inbox.c.updated_at).where(inbox.c.status == "parked")
                        .order_by(desc(inbox.c.updated_at)).limit(PARKED_SHOWN))
    out = []
    for r in rows:
        payload = r.payload if isinstance(r.payload, dict) else {}
        source = payload.get("source") if isinstance(payload.get("source"), dict) else {}
        text = str(payload.get("text") or "")
        out.append({"id": r.id, "where": f"{r.platform}:{source.get('chat_id', '')}",
                    "who": source.get("user_name") or source.get("user_id"),
                    "text": text if len(text) <= TEXT_SHOWN else text[:TEXT_SHOWN - 1] + "…",
                    "attempts": r.attempts, "error": r.error, "at": r.updated_at})
    return out


def overview_rows(conn: Any) -> tuple[list[dict[str, Any]], ...]:
    """One read: sessions, jobs, failures, parked messages."""
    return active_sessions(conn), jobs_with_last_run(conn), delivery_failures(conn), parked_messages(conn)
