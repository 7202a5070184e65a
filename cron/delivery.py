"""Delivering a run's result to its targets, through the gateway's delivery (the path chat replies take).

Targets are resolved to adapters by name; nothing here knows one platform from another. Delivery is
retried apart from the run (``cron.delivery_attempts``, backoff from ``cron.delivery_retry_seconds``),
only to the targets that failed, and every attempt's outcome is written to the run's row.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import structlog

from cron.jobs import Target, parse_targets, split_chat
from cron.store import CronStore
from gateway.instance import process_gone, process_start
from gateway.logs import redact
from gateway.platforms.base import OutboundMessage, Source

if TYPE_CHECKING:
    from cron.host import CronHost

log = structlog.get_logger("herald.cron")


class TargetError(Exception):
    """A target that cannot be reached (no home chat, platform not enabled)."""


def header(job: dict[str, Any], status: str) -> str:
    name = f"«{job['name']}» ({job['id']})"
    return {
        "ok": f"⏰ Cron job {name}",
        "failed": f"⚠️ Cron job {name} failed",
        "timed_out": f"⏱ Cron job {name} timed out",
        "missed": f"⚠️ Cron job {name} missed its run",
    }.get(status, f"⏰ Cron job {name}")


async def resolve(host: CronHost, store: CronStore, job: dict[str, Any],
                  target: Target) -> tuple[Any, str, str | None]:
    """(adapter, chat_id, thread_id) for a target."""
    if target.kind == "origin":
        if not job.get("origin"):
            raise TargetError("the job was not created from a chat")
        src = Source.from_dict(job["origin"])
        platform, chat_id, thread_id = src.platform, src.chat_id, src.thread_id
    elif target.kind == "home":
        assert target.platform is not None
        platform = target.platform
        home = await store.home(platform)
        if home is not None:
            chat_id, thread_id = home["chat_id"], home["thread_id"]
        else:
            configured = getattr(getattr(host.cfg.platforms, platform, None), "home_chat", None)
            if not configured:
                raise TargetError(f"no home chat (set platforms.{platform}.home_chat, or /sethome in the chat)")
            chat_id, thread_id = split_chat(str(configured))
    else:
        platform, chat_id, thread_id = target.platform or "", target.chat_id or "", target.thread_id
    adapter = host.adapters.get(platform)
    if adapter is None:
        raise TargetError(f"platform {platform!r} is not enabled")
    return adapter, chat_id, thread_id


# A deliverer renews its claim on a run's delivery before each attempt: this long past the attempt (or
# the pause after it), another instance may take the delivery over.
LEASE_SECONDS = 600.0


def owner_id() -> str:
    """This process, as gateway.instance names processes (its start time tells a reused pid apart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{process_start(os.getpid())}"


def owner_is_dead(owner: str | None) -> bool:
    """True when ``owner`` was a process on this machine that is gone (a restart, a crash)."""
    return bool(owner) and process_gone(owner)


async def deliver_run(host: CronHost, store: CronStore, job: dict[str, Any], run_id: int, text: str,
                      status: str, *, resume: dict[str, Any] | None = None,
                      now: Callable[[], float] = time.time) -> str:
    """Send ``text`` (under a header naming the job) to the job's targets; returns the final delivery status.

    ``resume``: a run row whose delivery another process started (its stored message, the targets still
    owed it and the attempts made) — carried on from there.
    """
    cfg = host.cfg.cron
    if resume is not None:
        body = resume["delivery_text"] or ""
        targets = parse_targets(resume["delivery_targets"] or "local")
        first = (resume["delivery_attempts"] or 0) + 1
    else:
        body = f"{header(job, status)}\n\n{text}".rstrip()
        targets = parse_targets(job["deliver"])
        first = 1
    targets = [t for t in targets if t.kind != "local"]
    if not targets:
        await store.update_run(run_id, delivery_status="local", delivery_lease_until=None)
        return "local"
    pending = targets
    delay = cfg.delivery_retry_seconds * 2 ** (first - 1)
    owner = owner_id()
    for attempt in range(first, max(cfg.delivery_attempts, first) + 1):
        await store.update_run(run_id, delivery_text=body, delivery_targets=",".join(str(t) for t in pending),
                               delivery_owner=owner, delivery_lease_until=now() + delay + LEASE_SECONDS)
        errors: dict[Target, str] = {}
        for target in pending:
            try:
                adapter, chat_id, thread_id = await resolve(host, store, job, target)
                report = await host.delivery.deliver(adapter, chat_id, OutboundMessage(body, thread_id=thread_id))
                if report.failed:
                    errors[target] = report.error or "delivery failed"
            except TargetError as exc:
                errors[target] = str(exc)
            except Exception as exc:
                log.exception("cron_delivery_crashed", job_id=job["id"], run_id=run_id, target=str(target))
                errors[target] = f"{type(exc).__name__}: {exc}"
        pending = [t for t in pending if t in errors]
        if not pending:
            await store.update_run(run_id, delivery_status="delivered", delivery_error=None,
                                   delivery_attempts=attempt, delivered_at=time.time(), delivery_lease_until=None,
                                   delivery_targets=None)
            log.info("cron_delivered", job_id=job["id"], run_id=run_id, attempts=attempt)
            return "delivered"
        error = redact("; ".join(f"{t}: {e}" for t, e in errors.items()))  # stored, shown by `herald cron runs`
        last = attempt >= cfg.delivery_attempts
        await store.update_run(run_id, delivery_status="failed", delivery_error=error, delivery_attempts=attempt,
                               delivery_targets=",".join(str(t) for t in pending),
                               **({"delivery_lease_until": None} if last else {}))
        log.warning("cron_delivery_failed", job_id=job["id"], run_id=run_id, attempt=attempt, error=error,
                    retry_in=None if last else delay)
        if last:
            break
        await asyncio.sleep(delay)
        delay *= 2
    return "failed"
