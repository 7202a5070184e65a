"""Schedules: what a job's ``schedule`` string means and when it is next due.

``30m`` / ``2h`` / ``1d``        once, that long after the job was created
``every 30m`` / ``every 2h``     an interval, anchored at the job's creation
``0 8 * * *``                    a 5-field cron expression in the job's timezone
``2026-05-01T08:00[+02:00]``     once, at that moment (a time without an offset is in the job's timezone)

The arithmetic is APScheduler's (CronTrigger, IntervalTrigger): cron expressions follow the wall clock
of their timezone across DST changes; intervals are absolute durations.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

if TYPE_CHECKING:
    from apscheduler.triggers.cron import CronTrigger

Kind = Literal["once", "interval", "cron"]

ONE_SHOT_GRACE = 120.0  # a one-shot missed by at most this many seconds still runs
MIN_CATCH_UP, MAX_CATCH_UP = 120.0, 7200.0

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_UNIT_WORDS = {
    "sec": "s", "secs": "s", "second": "s", "seconds": "s", "min": "m", "mins": "m", "minute": "m",
    "minutes": "m", "hr": "h", "hrs": "h", "hour": "h", "hours": "h", "day": "d", "days": "d", "week": "w",
    "weeks": "w",
}
_DURATION = re.compile(r"^(\d+)\s*([a-z]+)$")
MIN_INTERVAL = 60.0


class ScheduleError(ValueError):
    """An invalid schedule; ``str()`` says what is wrong."""


@dataclass(frozen=True)
class Schedule:
    kind: Kind
    text: str  # as the user wrote it (normalised whitespace)
    tz: str | None = None  # IANA name; None = the machine's local timezone
    run_at: float | None = None  # once
    seconds: float | None = None  # interval

    def describe(self) -> str:
        if self.kind == "once":
            assert self.run_at is not None
            return f"once at {format_time(self.run_at, self.tz)}"
        if self.kind == "interval":
            return f"every {_human(self.seconds or 0)}"
        return f"cron '{self.text}'" + (f" ({self.tz})" if self.tz else "")


def zone(tz: str | None) -> ZoneInfo | None:
    if not tz:
        return None
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(f"unknown timezone {tz!r} (use an IANA name such as Europe/Berlin)") from None


def _local_zone(tz: str | None) -> tzinfo:
    return zone(tz) or datetime.now().astimezone().tzinfo or UTC


def _duration(text: str) -> float:
    m = _DURATION.match(text.strip().lower())
    if not m:
        raise ScheduleError(f"{text!r} is not a duration (use a number and a unit, e.g. 30m, 2h, 1d)")
    unit = _UNIT_WORDS.get(m.group(2), m.group(2))
    if unit not in _UNITS:
        raise ScheduleError(f"unknown unit {m.group(2)!r} in {text!r} (use s, m, h, d or w)")
    seconds = int(m.group(1)) * _UNITS[unit]
    if seconds <= 0:
        raise ScheduleError(f"{text!r}: the duration must be greater than zero")
    return float(seconds)


def _shown(seconds: float) -> str:
    return f"{seconds / 60:g} minute{'s' if seconds != 60 else ''}" if seconds >= 60 else f"{seconds:g} seconds"


def parse_schedule(text: str, tz: str | None = None, now: float | None = None,
                   min_interval: float = MIN_INTERVAL) -> Schedule:
    """Parse ``text``; ``now`` anchors relative one-shots; an interval shorter than ``min_interval`` seconds
    (``cron.min_interval_seconds``) is refused. Raises ``ScheduleError`` naming the problem."""
    if not isinstance(text, str) or not text.strip():
        raise ScheduleError("the schedule is empty (e.g. 30m, every 2h, '0 8 * * *' or 2026-05-01T08:00)")
    text = " ".join(text.split())
    now = time.time() if now is None else now
    zone(tz)  # an unknown timezone is an error whatever the schedule
    lower = text.lower()
    if lower.startswith("every "):
        seconds = _duration(lower[6:])
        if seconds < min_interval:
            raise ScheduleError(f"{text!r}: the shortest interval is {_shown(min_interval)} "
                                "(cron.min_interval_seconds)")
        return Schedule("interval", text, tz, seconds=seconds)
    if lower == "every":
        raise ScheduleError("'every' needs an interval, e.g. every 30m")
    fields = text.split(" ")
    cron_like = all(re.fullmatch(r"[\d*/,\-A-Za-z?]+", f) for f in fields) and any(
        re.search(r"[\d*]", f) for f in fields)
    if len(fields) > 1 and cron_like and not _DURATION.match(lower):
        if len(fields) != 5:
            raise ScheduleError(f"{text!r}: a cron expression has 5 fields (minute hour day month weekday), "
                                f"not {len(fields)}")
        try:
            _cron_trigger(Schedule("cron", text, tz))
        except ValueError as exc:
            raise ScheduleError(f"{text!r} is not a valid cron expression: {exc}") from None
        return Schedule("cron", text, tz)
    if _DURATION.match(lower):
        return Schedule("once", text, tz, run_at=now + _duration(lower))
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ScheduleError(
            f"{text!r} is not a schedule: use a delay (30m, 2h, 1d), an interval (every 30m), a 5-field cron "
            "expression ('0 8 * * *') or an ISO-8601 time (2026-05-01T08:00)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_local_zone(tz))
    run_at = when.timestamp()
    if run_at <= now:
        raise ScheduleError(f"{text!r} is in the past")
    return Schedule("once", text, tz, run_at=run_at)


def _cron_trigger(schedule: Schedule) -> CronTrigger:
    # APScheduler loads with the first schedule computed: a daemon without cron jobs never needs it (its
    # import reads its own package metadata, some tens of ms of start-up).
    from apscheduler.triggers.cron import CronTrigger

    return CronTrigger.from_crontab(schedule.text, timezone=_local_zone(schedule.tz))


def next_after(schedule: Schedule, after: float, anchor: float) -> float | None:
    """The first due time strictly after ``after``; ``anchor`` is when an interval started counting."""
    if schedule.kind == "once":
        assert schedule.run_at is not None
        return schedule.run_at if schedule.run_at > after else None
    if schedule.kind == "interval":
        from apscheduler.triggers.interval import IntervalTrigger

        start = datetime.fromtimestamp(anchor, UTC)
        trigger = IntervalTrigger(seconds=schedule.seconds or 0, start_date=start, timezone=UTC)
        # get_next_fire_time(None, now) answers "the first fire time at or after now".
        nxt = trigger.get_next_fire_time(None, datetime.fromtimestamp(after, UTC) + timedelta(microseconds=1))
        return nxt.timestamp() if nxt else None
    trigger = _cron_trigger(schedule)
    base = datetime.fromtimestamp(after, UTC) + timedelta(seconds=1)
    nxt = trigger.get_next_fire_time(None, base.astimezone(trigger.timezone))
    return nxt.timestamp() if nxt else None


def first_run(schedule: Schedule, created_at: float) -> float | None:
    if schedule.kind == "once":
        return schedule.run_at
    return next_after(schedule, created_at, created_at)


def period(schedule: Schedule, due: float, anchor: float) -> float:
    """How far apart runs are around ``due`` (cron gaps vary: weekdays only, DST)."""
    if schedule.kind == "interval":
        return schedule.seconds or 0.0
    nxt = next_after(schedule, due, anchor)
    return (nxt - due) if nxt else 0.0


def catch_up_window(schedule: Schedule, due: float, anchor: float) -> float:
    """A missed recurring run still runs when it is at most this late: half its period, 2 min .. 2 h."""
    if schedule.kind == "once":
        return ONE_SHOT_GRACE
    return min(MAX_CATCH_UP, max(MIN_CATCH_UP, period(schedule, due, anchor) / 2))


def last_due(schedule: Schedule, first: float, now: float, anchor: float) -> float:
    """The latest due time at or before ``now``, starting from the stored (overdue) ``first``."""
    if schedule.kind == "once":
        return first
    if schedule.kind == "interval":
        step = schedule.seconds or 1.0
        return first + ((now - first) // step) * step
    latest = first
    for _ in range(100_000):  # a minutely job down for two months; bounded either way
        nxt = next_after(schedule, latest, anchor)
        if nxt is None or nxt > now:
            break
        latest = nxt
    return latest


def format_time(ts: float | None, tz: str | None = None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, _local_zone(tz)).strftime("%Y-%m-%d %H:%M %Z").strip()


def _human(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"
