"""Schedule parsing (good and bad) and next-run arithmetic, including across DST changes."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from cron.jobs import JobError, Target, build_job, parse_targets
from cron.schedule import (
    ScheduleError,
    catch_up_window,
    first_run,
    last_due,
    next_after,
    parse_schedule,
)

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(("text", "kind", "check"), [
    ("30m", "once", lambda s: s.run_at == NOW + 1800),
    ("2h", "once", lambda s: s.run_at == NOW + 7200),
    ("1d", "once", lambda s: s.run_at == NOW + 86400),
    ("45 minutes", "once", lambda s: s.run_at == NOW + 2700),
    ("every 30m", "interval", lambda s: s.seconds == 1800),
    ("Every  2h", "interval", lambda s: s.seconds == 7200),
    ("0 8 * * *", "cron", lambda s: s.text == "0 8 * * *"),
    ("*/15 9-17 * * mon-fri", "cron", lambda s: s.tz == "Europe/Berlin"),
    ("2026-05-01T08:00", "once",
     lambda s: s.run_at == datetime(2026, 5, 1, 8, 0, tzinfo=ZoneInfo("Europe/Berlin")).timestamp()),
    ("2026-05-01T08:00:00+00:00", "once", lambda s: s.run_at == datetime(2026, 5, 1, 8, tzinfo=UTC).timestamp()),
])
def test_good_schedules(text, kind, check):
    s = parse_schedule(text, "Europe/Berlin", NOW)
    assert s.kind == kind
    assert check(s), s


@pytest.mark.parametrize(("text", "tz", "says"), [
    ("", None, "empty"),
    ("every", None, "needs an interval"),
    ("every 10s", None, "shortest interval"),
    ("every banana", None, "not a duration"),
    ("0m", None, "greater than zero"),
    ("3x", None, "unknown unit"),
    ("5 * * *", None, "5 fields"),
    ("0 8 * * * *", None, "5 fields"),
    ("61 * * * *", None, "not a valid cron expression"),
    ("0 25 * * *", None, "not a valid cron expression"),
    ("tomorrow morning", None, "is not a schedule"),
    ("2020-01-01T00:00", None, "in the past"),
    ("0 8 * * *", "Mars/Olympus", "unknown timezone"),
])
def test_bad_schedules_say_what_is_wrong(text, tz, says):
    with pytest.raises(ScheduleError) as err:
        parse_schedule(text, tz, NOW)
    assert says in str(err.value)


def test_cron_follows_wall_clock_across_dst_change():
    tz = "America/New_York"
    s = parse_schedule("0 9 * * *", tz, NOW)
    # DST starts 2026-03-08 02:00 local: 09:00 is 14:00 UTC before and 13:00 UTC after.
    before = datetime(2026, 3, 7, 9, 0, tzinfo=ZoneInfo(tz)).timestamp()
    after = next_after(s, before, before)
    assert datetime.fromtimestamp(after, ZoneInfo(tz)).hour == 9
    assert after - before == 23 * 3600
    assert datetime.fromtimestamp(before, UTC).hour == 14 and datetime.fromtimestamp(after, UTC).hour == 13
    # And back in autumn (2026-11-01): a 25-hour day.
    oct31 = datetime(2026, 10, 31, 9, 0, tzinfo=ZoneInfo(tz)).timestamp()
    assert next_after(s, oct31, oct31) - oct31 == 25 * 3600


def test_cron_time_that_does_not_exist_on_dst_day_runs_once_not_twice():
    tz = "Europe/Berlin"
    s = parse_schedule("30 2 * * *", tz, NOW)  # 02:30 does not exist on 2026-03-29 in Berlin
    start = datetime(2026, 3, 28, 2, 30, tzinfo=ZoneInfo(tz)).timestamp()
    times = [start]
    for _ in range(3):
        times.append(next_after(s, times[-1], start))
    days = [datetime.fromtimestamp(t, ZoneInfo(tz)).date().isoformat() for t in times]
    assert len(set(days)) == len(days), days  # never twice a day
    assert all(b > a for a, b in itertools.pairwise(times))


def test_interval_next_run_is_anchored_and_strictly_after():
    s = parse_schedule("every 30m", None, NOW)
    assert first_run(s, NOW) == NOW + 1800
    assert next_after(s, NOW + 1800, NOW) == NOW + 3600
    assert next_after(s, NOW + 1801, NOW) == NOW + 3600
    assert last_due(s, NOW + 1800, NOW + 3 * 3600 + 5, NOW) == NOW + 3 * 3600


def test_catch_up_window_is_half_the_period_clamped():
    every_2m = parse_schedule("every 2m", None, NOW)
    hourly = parse_schedule("every 1h", None, NOW)
    daily = parse_schedule("0 8 * * *", None, NOW)
    assert catch_up_window(every_2m, NOW, NOW) == 120  # 1 min -> at least 2 minutes
    assert catch_up_window(hourly, NOW, NOW) == 1800
    assert catch_up_window(daily, NOW, NOW) == 7200  # 12 h -> at most 2 hours
    assert catch_up_window(parse_schedule("30m", None, NOW), NOW, NOW) == 120


def test_deliver_targets():
    targets = parse_targets("origin, telegram, web:chat1, telegram:-100:7, local", {"telegram", "web"})
    assert [t.kind for t in targets] == ["origin", "home", "chat", "chat", "local"]
    assert (targets[3].chat_id, targets[3].thread_id) == ("-100", "7")
    with pytest.raises(JobError, match="unknown platform"):
        parse_targets("slack:abc", {"telegram", "web"})
    with pytest.raises(JobError, match="origin"):
        parse_targets("origin", None, has_origin=False)
    with pytest.raises(JobError, match="at least one"):
        parse_targets(" , ")


@pytest.mark.parametrize("chat_id, thread_id", [
    ("C0123/1712345678.000100", None),  # a slash, as in Slack's channel/ts ids
    ("a,b", "t,1"),  # the separator of targets
    ("100%", "50%25"),  # the escape character itself, and something that looks escaped already
    ("x:y", "t:1:2"),  # the separator of a target's parts
    ("/a,b%c:d/", "/e,f%g:h"),
    (" padded ", "ü 😀\ttab "),  # spaces at the ends survive the stripping of a deliver string's parts
    ("ends in a space ", None),
])
def test_chat_targets_with_any_characters_round_trip(chat_id, thread_id):
    target = Target("chat", "slack", chat_id, thread_id)
    text = str(target)
    assert "," not in text and text.count(":") == (2 if thread_id else 1)
    assert parse_targets(text, {"slack"}) == [target]
    other = Target("chat", "qa", "p,q", "r:s")
    assert parse_targets(f"{target}, origin,{other}", {"slack", "qa"}) == [target, Target("origin"), other]


def test_build_job_validates_fields():
    with pytest.raises(JobError, match="prompt"):
        build_job({"schedule": "1h"}, default_tz=None, origin=None, known_platforms=None, created_by=None)
    with pytest.raises(JobError, match="no_agent"):
        build_job({"schedule": "1h", "no_agent": True}, default_tz=None, origin=None, known_platforms=None,
                  created_by=None)
    with pytest.raises(JobError, match="repeat"):
        build_job({"schedule": "every 1h", "prompt": "x", "repeat": 0}, default_tz=None, origin=None,
                  known_platforms=None, created_by=None)
    row = build_job({"schedule": "0 8 * * *", "prompt": "x"}, default_tz="Asia/Tokyo", origin=None,
                    known_platforms=None, created_by="cli", now=NOW)
    assert row["tz"] == "Asia/Tokyo" and row["deliver"] == "local" and row["enabled"]
    assert datetime.fromtimestamp(row["next_run_at"], ZoneInfo("Asia/Tokyo")).hour == 8
