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
from cron.store import CronStore, owns_delivery
from gateway.cluster.instance import process_gone, process_start
from gateway.kernel.logs import redact
from gateway.media.hub import attachments_in
from gateway.platforms.base import OutboundMessage, Source
from gateway.storage.inbox import NotExpected

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
    """This process, as gateway.cluster.instance names processes (its start time tells a reused pid apart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{process_start(os.getpid())}"


def owner_is_dead(owner: str | None) -> bool:
    """True when ``owner`` was a process on this machine that is gone (a restart, a crash)."""
    return bool(owner) and process_gone(owner)


async def deliver_run(host: CronHost, store: CronStore, job: dict[str, Any], run_id: int, text: str,
                      status: str, *, resume: dict[str, Any] | None = None,
                      now: Callable[[], float] = time.time) -> str:
    """Send ``text`` (under a header naming the job) to the job's targets; returns the final delivery status.

    ``resume``: a run row whose delivery another process started (its stored message, the targets still
    owed it and the attempts made) — carried on from there. Each target's chunks go through the outbox (one
    delivery per run and target), so what reached a chat before a crash is not sent again, and a chunk is
    begun only while this process holds the run's delivery. A target whose platform another instance of the
    database is connected to (it holds the credential) is left to that instance ("handed over").
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
    body, files = attachments_in(body)  # a job's answer can carry files (their paths are stored with it)
    targets = [t for t in targets if t.kind != "local"]
    if not targets:
        await store.update_run(run_id, delivery_status="local", delivery_lease_until=None)
        return "local"
    pending = targets
    delay = cfg.delivery_retry_seconds * 2 ** (first - 1)
    owner = owner_id()
    guard = owns_delivery(run_id, owner)
    for attempt in range(first, max(cfg.delivery_attempts, first) + 1):
        if not await store.update_delivery(run_id, owner, delivery_text=body,
                                           delivery_targets=",".join(str(t) for t in pending),
                                           delivery_lease_until=now() + delay + LEASE_SECONDS):
            log.info("cron_delivery_taken_elsewhere", job_id=job["id"], run_id=run_id)
            return "taken"
        errors: dict[Target, str] = {}
        elsewhere: list[Target] = []
        for target in pending:
            try:
                adapter, chat_id, thread_id = await resolve(host, store, job, target)
                if connected_elsewhere(host, adapter):
                    elsewhere.append(target)
                    continue
                out = OutboundMessage(body, thread_id=thread_id, attachments=files)
                report = await host.delivery.deliver(adapter, chat_id, out, resume=True, ref=f"cron:{run_id}:{target}",
                                                     guard=guard)
                if report.failed:
                    errors[target] = report.error or "delivery failed"
            except NotExpected:
                log.info("cron_delivery_taken_elsewhere", job_id=job["id"], run_id=run_id)
                return "taken"
            except TargetError as exc:
                errors[target] = str(exc)
            except Exception as exc:
                log.exception("cron_delivery_crashed", job_id=job["id"], run_id=run_id, target=str(target))
                errors[target] = f"{type(exc).__name__}: {exc}"
        pending = [t for t in pending if t in errors]
        last = attempt >= cfg.delivery_attempts
        if elsewhere and (not pending or last):
            return await hand_over(host, store, job, run_id, owner, elsewhere, errors)
        if not pending and not elsewhere:
            await store.update_delivery(run_id, owner, delivery_status="delivered", delivery_error=None,
                                        delivery_attempts=attempt, delivered_at=time.time(),
                                        delivery_lease_until=None, delivery_targets=None)
            log.info("cron_delivered", job_id=job["id"], run_id=run_id, attempts=attempt)
            return "delivered"
        error = redact("; ".join(f"{t}: {e}" for t, e in errors.items()))  # stored, shown by `herald cron runs`
        await store.update_delivery(run_id, owner, delivery_status="failed", delivery_error=error,
                                    delivery_attempts=attempt,
                                    delivery_targets=",".join(str(t) for t in [*pending, *elsewhere]),
                                    **({"delivery_lease_until": None} if last else {}))
        log.warning("cron_delivery_failed", job_id=job["id"], run_id=run_id, attempt=attempt, error=error,
                    retry_in=None if last else delay)
        if last:
            break
        pending = [*pending, *elsewhere]
        await asyncio.sleep(delay)
        delay *= 2
    return "failed"


def connected_elsewhere(host: CronHost, adapter: Any) -> bool:
    """This platform is another instance's to talk to: it holds the credential (a poller, a gateway
    connection) and this one waits for it. Only among instances sharing the database (``host.peers``)."""
    return (host.peers is not None and host.peers.enabled and adapter.state != "connected"
            and adapter.error_kind == "CredentialLocked")


async def hand_over(host: CronHost, store: CronStore, job: dict[str, Any], run_id: int, owner: str,
                    targets: list[Target], errors: dict[Target, str]) -> str:
    """Leave ``targets`` to an instance connected to their platforms: the delivery's claim is released (its
    lease ends now) and the others are told to look (``CronScheduler.resume_deliveries``)."""
    values: dict[str, Any] = {"delivery_targets": ",".join(str(t) for t in targets), "delivery_owner": None,
                              "delivery_lease_until": time.time(), "delivery_status": "pending"}
    if errors:
        failed = "; ".join(f"{t}: {e}" for t, e in errors.items())
        values.update(delivery_status="failed", delivery_error=redact(failed))
    if not await store.update_delivery(run_id, owner, **values):
        return "taken"
    log.info("cron_delivery_handed_over", job_id=job["id"], run_id=run_id, targets=[str(t) for t in targets])
    if host.peers is not None:
        await host.peers.broadcast("cron", "deliveries")
    return "handed over"


async def deliverable_here(host: CronHost, store: CronStore, row: dict[str, Any]) -> bool:
    """Whether this instance can deliver at least one of the targets a run still owes (its platform is
    connected here): an instance that cannot leaves the run to one that can."""
    if host.peers is None or not host.peers.enabled:
        return True
    job: dict[str, Any] | None = None
    for target in parse_targets(row.get("delivery_targets") or ""):
        if target.kind == "local":
            continue
        platform = target.platform
        if target.kind == "origin":
            job = job or await store.job(row["job_id"])
            platform = (job or {}).get("origin", {}).get("platform") if job and job.get("origin") else None
        adapter = host.adapters.get(platform or "")
        if adapter is not None and adapter.state == "connected":
            return True
    return False
