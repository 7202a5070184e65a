"""Delivering a run's result to its targets, through the runner's delivery (the path chat replies take).

Targets are resolved to adapters by name; nothing here knows one platform from another. Delivery is
retried apart from the run (``cron.delivery_attempts``, backoff from ``cron.delivery_retry_seconds``),
only to the targets that failed, and every attempt's outcome is written to the run's row.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import structlog

from cron.jobs import Target, parse_targets
from cron.store import CronStore
from gateway.platforms.base import OutboundMessage, Source

if TYPE_CHECKING:
    from gateway.runner import GatewayRunner

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


async def resolve(runner: GatewayRunner, store: CronStore, job: dict[str, Any],
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
            configured = getattr(getattr(runner.cfg.platforms, platform, None), "home_chat", None)
            if not configured:
                raise TargetError(f"no home chat (set platforms.{platform}.home_chat, or /sethome in the chat)")
            chat_id, _, thread = str(configured).partition(":")
            thread_id = thread or None
    else:
        platform, chat_id, thread_id = target.platform or "", target.chat_id or "", target.thread_id
    adapter = runner.adapters.get(platform)
    if adapter is None:
        raise TargetError(f"platform {platform!r} is not enabled")
    return adapter, chat_id, thread_id


async def deliver_run(runner: GatewayRunner, store: CronStore, job: dict[str, Any], run_id: int, text: str,
                      status: str) -> str:
    """Send ``text`` (under a header naming the job) to the job's targets; returns the final delivery status."""
    cfg = runner.cfg.cron
    targets = [t for t in parse_targets(job["deliver"]) if t.kind != "local"]
    if not targets:
        await store.update_run(run_id, delivery_status="local")
        return "local"
    body = f"{header(job, status)}\n\n{text}".rstrip()
    pending = targets
    delay = cfg.delivery_retry_seconds
    for attempt in range(1, cfg.delivery_attempts + 1):
        errors: dict[Target, str] = {}
        for target in pending:
            try:
                adapter, chat_id, thread_id = await resolve(runner, store, job, target)
                report = await runner.delivery.deliver(adapter, chat_id, OutboundMessage(body, thread_id=thread_id))
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
                                   delivery_attempts=attempt, delivered_at=time.time())
            log.info("cron_delivered", job_id=job["id"], run_id=run_id, attempts=attempt)
            return "delivered"
        error = "; ".join(f"{t}: {e}" for t, e in errors.items())
        await store.update_run(run_id, delivery_status="failed", delivery_error=error, delivery_attempts=attempt)
        log.warning("cron_delivery_failed", job_id=job["id"], run_id=run_id, attempt=attempt, error=error,
                    retry_in=delay if attempt < cfg.delivery_attempts else None)
        if attempt < cfg.delivery_attempts:
            await asyncio.sleep(delay)
            delay *= 2
    return "failed"
