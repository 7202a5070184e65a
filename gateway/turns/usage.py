"""Token usage and what it costs: stored per turn (table ``usage``, one row per model), shown by ``/usage``,
and ``gateway.daily_token_budget``, checked before a user's turn calls the model.

The figures are the API's own usage fields (agent_core/usage.py gathers them during the turn); a response
without them is counted from an estimate and /usage says so. Cost is an estimate from ``model.prices``.
A day runs from local midnight to midnight. Cron runs are recorded with no user: nobody's budget pays.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Integer, and_, cast, func, insert, select

from agent_core.usage import UsageMeter
from gateway.commands.registry import CommandContext, CommandSet
from gateway.config import ModelPrice
from gateway.platforms.base import Source
from gateway.session.manager import SessionManager
from gateway.storage.store import Store
from gateway.storage.tables import sessions, usage


@dataclass
class Totals:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    calls: int = 0
    estimated: bool = False

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def day_start(now: float) -> float:
    """Local midnight before ``now``."""
    local = dt.datetime.fromtimestamp(now)
    return local.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


def next_day(now: float) -> float:
    local = dt.datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
    return (local + dt.timedelta(days=1)).timestamp()


def cost_of(by_model: dict[str, Totals], prices: dict[str, ModelPrice]) -> tuple[float, list[str]]:
    """The estimated cost of ``by_model`` and the models without a price (left out of it)."""
    total = 0.0
    unpriced = []
    for model, t in sorted(by_model.items()):
        price = prices.get(model)
        if price is None:
            if t.tokens:
                unpriced.append(model)
            continue
        cached = min(t.cached_tokens, t.prompt_tokens)
        cached_price = price.cached_input_per_million
        total += (t.prompt_tokens - cached) * price.input_per_million / 1e6
        total += cached * (price.input_per_million if cached_price is None else cached_price) / 1e6
        total += t.completion_tokens * price.output_per_million / 1e6
    return total, unpriced


_USAGE_INSERT = insert(usage)  # built once: a row per turn


class UsageLedger:
    def __init__(self, store: Store, prices: dict[str, ModelPrice], daily_budget: int | None,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.prices = prices
        self.daily_budget = daily_budget
        self.clock = clock

    async def record(self, meter: UsageMeter, *, session_id: str | None, inbox_id: int | None, platform: str,
                     user_id: str | None) -> None:
        rows = [{"session_id": session_id, "inbox_id": inbox_id, "platform": platform, "user_id": user_id,
                 "model": model[:200], "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                 "cached_tokens": u.cached_tokens, "calls": u.calls, "estimated": u.estimated,
                 "created_at": self.clock()}
                for model, u in meter.snapshot().items() if u.calls]
        if rows:
            await self.store.run_write(lambda conn: conn.execute(_USAGE_INSERT, rows))

    async def by_sessions(self, session_ids: list[str]) -> dict[str, Totals]:
        return await self._totals(usage.c.session_id.in_(session_ids))

    async def by_user_since(self, platform: str, user_id: str, since: float) -> dict[str, Totals]:
        return await self._totals(and_(usage.c.platform == platform, usage.c.user_id == user_id,
                                       usage.c.created_at >= since))

    async def _totals(self, where: Any) -> dict[str, Totals]:
        stmt = (select(usage.c.model, func.sum(usage.c.prompt_tokens), func.sum(usage.c.completion_tokens),
                       func.sum(usage.c.cached_tokens), func.sum(usage.c.calls),
                       func.sum(cast(usage.c.estimated, Integer)))
                .where(where).group_by(usage.c.model))
        rows = await self.store.run_read(lambda conn: conn.execute(stmt).all())
        return {r[0]: Totals(int(r[1] or 0), int(r[2] or 0), int(r[3] or 0), int(r[4] or 0), bool(r[5]))
                for r in rows}

    async def spent_today(self, platform: str, user_id: str) -> int:
        now = self.clock()
        return sum(t.tokens for t in (await self.by_user_since(platform, user_id, day_start(now))).values())

    async def budget_notice(self, source: Source | None) -> str | None:
        """What to tell a user whose daily budget is spent (no model call may be made), or None."""
        if self.daily_budget is None or source is None:
            return None
        spent = await self.spent_today(source.platform, source.user_id)
        if spent < self.daily_budget:
            return None
        return (f"⛔ You have used today's token budget ({spent:,} of {self.daily_budget:,} tokens), so I "
                f"won't call the model for you until it resets {_reset_time(self.clock())}.")


def _reset_time(now: float) -> str:
    reset = next_day(now)
    left = max(0, int(reset - now))
    hours, minutes = divmod((left + 59) // 60, 60)
    span = f"{hours} h {minutes} min" if hours else f"{minutes} min"
    zone = dt.datetime.fromtimestamp(reset).astimezone().tzname() or "local time"
    return f"at midnight (00:00 {zone}, in {span})"


async def lineage(store: Store, session: dict[str, Any]) -> list[str]:
    """The session's id and those of the sessions it continues through compression (newest first)."""
    ids = [session["id"]]
    parent_id = session.get("parent_id")
    while parent_id and len(ids) < 1000:
        parent = await store.run_read(
            lambda conn, pid=parent_id: conn.execute(
                select(sessions.c.id, sessions.c.parent_id, sessions.c.end_reason).where(sessions.c.id == pid)
            ).first())
        if parent is None or parent.end_reason != "compressed":
            break
        ids.append(parent.id)
        parent_id = parent.parent_id
    return ids


def _line(label: str, by_model: dict[str, Totals], prices: dict[str, ModelPrice]) -> list[str]:
    total = Totals()
    for t in by_model.values():
        total.prompt_tokens += t.prompt_tokens
        total.completion_tokens += t.completion_tokens
        total.cached_tokens += t.cached_tokens
        total.calls += t.calls
        total.estimated = total.estimated or t.estimated
    if not total.calls:
        return [f"{label}: no model calls yet."]
    cost, unpriced = cost_of(by_model, prices)
    text = (f"{label}: {total.prompt_tokens:,} tokens in, {total.completion_tokens:,} out "
            f"({total.calls} model call{'s' if total.calls != 1 else ''}")
    if total.cached_tokens:
        text += f", {total.cached_tokens:,} of the input cached"
    text += ")"
    if len(unpriced) < len([m for m, t in by_model.items() if t.tokens]):
        text += f", about ${cost:.4f}"
    lines = [text]
    if unpriced:
        lines.append(f"  no price for {', '.join(unpriced)} (model.prices): not in the cost")
    if total.estimated:
        lines.append("  some figures are estimates: the endpoint did not report usage")
    return lines


@dataclass(frozen=True)
class UsageDeps:
    ledger: UsageLedger
    sessions: SessionManager
    store: Store


USAGE_COMMANDS: CommandSet[UsageDeps] = CommandSet()


@USAGE_COMMANDS.command("usage", "tokens and estimated cost of this conversation and of today")
async def usage_(deps: UsageDeps, ctx: CommandContext) -> str:
    source = ctx.message.source
    session = deps.sessions.peek(ctx.session_key) or await deps.store.sessions.active(ctx.session_key)
    lines = []
    if session is None:
        lines.append("This conversation: no model calls yet.")
    else:
        lines += _line("This conversation", await deps.ledger.by_sessions(await lineage(deps.store, session)),
                       deps.ledger.prices)
    now = deps.ledger.clock()
    today = await deps.ledger.by_user_since(source.platform, source.user_id, day_start(now))
    lines += _line("You today", today, deps.ledger.prices)
    if deps.ledger.daily_budget is not None:
        spent = sum(t.tokens for t in today.values())
        lines.append(f"Daily budget: {spent:,} of {deps.ledger.daily_budget:,} tokens used; it resets "
                     f"{_reset_time(now)}.")
    return "\n".join(lines)
