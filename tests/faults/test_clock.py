"""Time: the wall clock jumps an hour forward and an hour back under the cron engine (both clocks injected, a
tick per poll). A jump is the fault ``clock_jump``, counted and logged once; forward, each job does what its
catch-up rule says (one run, no burst; a one-shot too late is reported missed); back, no due time runs twice
and each job goes on from its next due time on the new clock."""

from __future__ import annotations

from collections import Counter
from typing import Any

from cron.scheduler import CLOCK_JUMP_SECONDS, CronScheduler
from tests.cron.test_cron import ORIGIN, T0, create, runs, settle
from tests.faults.conftest import scale

HOUR = 3600.0
CYCLES = int(scale(1, 5))  # forward-and-back pairs in the long run


class Clocks:
    """A wall clock the test can step, and a monotonic one that only ever moves on."""

    def __init__(self) -> None:
        self.wall = T0
        self.mono = 1000.0

    def now(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.mono

    def pass_(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds

    def jump(self, seconds: float) -> None:
        self.wall += seconds


async def start(make_runner: Any, clocks: Clocks) -> tuple[Any, Any, CronScheduler]:
    runner, qa = await make_runner({"cron": {"enabled": False, "delivery_retry_seconds": 0.01}})
    sched = CronScheduler(runner.cron_host(), now=clocks.now, monotonic=clocks.monotonic)
    runner.cron = sched
    await sched.start(timer=False)
    return runner, qa, sched


async def walk(sched: CronScheduler, clocks: Clocks, seconds: float, step: float = 2.0) -> None:
    """Real time passes in polls of ``step`` seconds, each one a tick."""
    for _ in range(int(seconds / step)):
        clocks.pass_(step)
        await sched.tick()
        await settle(sched)


def jumps(runner: Any) -> int:
    return runner.faults.recent().get("clock_jump", 0)


async def test_a_step_of_the_wall_clock_is_a_fault_and_ordinary_ticks_are_not(make_runner):
    clocks = Clocks()
    runner, _qa, sched = await start(make_runner, clocks)
    await walk(sched, clocks, 60)
    clocks.pass_(CLOCK_JUMP_SECONDS - 1)  # a slow poll (a busy loop, a long tick): the clocks still agree
    clocks.jump(0.5)  # and a little drift
    await sched.tick()
    assert jumps(runner) == 0
    clocks.jump(HOUR)
    await walk(sched, clocks, 10)
    assert jumps(runner) == 1  # once per jump, not once per tick after it
    clocks.jump(-HOUR)
    await walk(sched, clocks, 10)
    assert jumps(runner) == 2
    events = [line for line in runner.metrics.render().decode().splitlines()
              if line.startswith('herald_faults_total{fault="clock_jump"}')]
    assert events == ['herald_faults_total{fault="clock_jump"} 2.0']


async def test_forward_an_hour_each_job_catches_up_as_configured(make_runner):
    """cron.schedule catch-up: a recurring job's latest due time runs once if it is within half its period
    (2 min .. 2 h), older ones are skipped without a burst; a one-shot more than 2 min late is missed and its
    chat told."""
    clocks = Clocks()
    _runner, qa, sched = await start(make_runner, clocks)
    minutely = await create(sched, schedule="every 1m", script="echo minutely", no_agent=True)
    two_hourly = await create(sched, schedule="every 2h", script="echo two-hourly", no_agent=True)
    one_shot = await create(sched, schedule="10m", script="echo one-shot", no_agent=True, name="soon")
    await walk(sched, clocks, 5 * 60)
    before = {j["id"]: len(await runs(sched, j["id"])) for j in (minutely, two_hourly, one_shot)}
    assert before == {minutely["id"]: 5, two_hourly["id"]: 0, one_shot["id"]: 0}

    clocks.jump(HOUR)
    await walk(sched, clocks, 20)
    minute_runs = await runs(sched, minutely["id"])
    assert len(minute_runs) == 6  # the sixty due times the jump passed: the latest runs, once
    assert minute_runs[-1]["due_at"] > clocks.wall - 60 and minute_runs[-1]["status"] == "ok"
    # every 2 h, next due 2 h after creation: 65 min later it is not due yet; nothing runs early either.
    assert await runs(sched, two_hourly["id"]) == []
    [missed] = await runs(sched, one_shot["id"])  # due 10 min after creation: 55 min late
    assert (missed["status"], missed["delivery_status"]) == ("missed", "delivered")
    assert any("soon" in t and "missed" in t for t in qa.texts(ORIGIN.chat_id))
    await walk(sched, clocks, 3 * 60)
    assert len(await runs(sched, minutely["id"])) == 6 + 3  # and on it goes, once a minute
    assert_no_due_time_twice(await runs(sched, minutely["id"]))


async def test_back_an_hour_no_due_time_runs_twice(make_runner):
    clocks = Clocks()
    runner, _qa, sched = await start(make_runner, clocks)
    job = await create(sched, schedule="every 1m", script="echo tick", no_agent=True)
    hourly = await create(sched, schedule="every 1h", script="echo hourly", no_agent=True)
    for cycle in range(CYCLES):
        await walk(sched, clocks, 5 * 60)
        ran = len(await runs(sched, job["id"]))
        clocks.jump(HOUR)  # forward, then back where it was: the due times in between ran (once) already
        await walk(sched, clocks, 4)
        assert len(await runs(sched, job["id"])) == ran + 1
        clocks.jump(-HOUR)
        # Until the wall clock is back at the job's next due time, its due times have all run: nothing does.
        stored = (await sched.store.job(job["id"]))["next_run_at"]
        await walk(sched, clocks, stored - clocks.wall - 2)
        assert len(await runs(sched, job["id"])) == ran + 1
        await walk(sched, clocks, 10 * 60)
        assert len(await runs(sched, job["id"])) == ran + 1 + 10  # then once a minute again
        assert jumps(runner) == 2 * (cycle + 1)
    history = await runs(sched, job["id"])
    assert_no_due_time_twice(history)
    assert all(r["status"] == "ok" and r["delivery_status"] == "delivered" for r in history)
    assert_no_due_time_twice(await runs(sched, hourly["id"]))


def assert_no_due_time_twice(history: list[dict[str, Any]]) -> None:
    twice = {due: n for due, n in Counter(r["due_at"] for r in history).items() if n > 1}
    assert not twice, twice
    dues = [r["due_at"] for r in history]
    assert dues == sorted(dues)
