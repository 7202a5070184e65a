"""The cron engine with the real runner, the QA channel and the fake LLM; time is injected, never slept."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from cron.jobs import JobError, build_job, operator_script, public_job
from cron.scheduler import CronScheduler
from gateway.platforms.base import PermanentError, Source
from tests.fakes.llm import Reply
from tests.support.polling import wait_until

T0 = 1_900_000_000.0  # a fixed "now" far from the wall clock: nothing here depends on real time
ORIGIN = Source("qa", "c1", "u1")


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


async def start_cron(make_runner: Any, clock: Clock, db_url: str | None = None,
                     cron: dict[str, Any] | None = None) -> tuple[Any, Any, CronScheduler]:
    """A runner whose own scheduler is off, with a CronScheduler on the injected clock and no timers."""
    runner, qa = await make_runner({"cron": {"enabled": False, "delivery_retry_seconds": 0.01, **(cron or {})}},
                                   db_url=db_url)
    sched = CronScheduler(runner.cron_host(), now=clock)
    runner.cron = sched
    await sched.start(timer=False)
    return runner, qa, sched


async def settle(*scheds: CronScheduler) -> None:
    """Wait until every run and delivery the schedulers started has finished."""
    for _ in range(200):
        pending = [t for s in scheds for t in (*s.running.values(), *s._tasks)]
        if not pending:
            return
        await asyncio.gather(*pending, return_exceptions=True)
    raise AssertionError("cron tasks never settled")


async def create(sched: CronScheduler, origin: Source | None = ORIGIN, **fields: Any) -> dict[str, Any]:
    if fields.get("script"):
        # These tests are about the engine: a script here is the operator's (the agent's scripts wait for a
        # person's approval first; tests/cron/test_cron_scripts.py).
        row = operator_script(build_job(fields, default_tz=None, origin=origin.to_dict() if origin else None,
                                        known_platforms=sched.tool_api.known_platforms(), created_by="cli",
                                        now=sched.now()))
        await sched.store.add_job(row)
        return public_job(row)
    return (await sched.tool_api.do("create", fields, origin))["created"]


async def runs(sched: CronScheduler, job_id: str) -> list[dict[str, Any]]:
    return list(reversed(await sched.store.runs(job_id, 100)))


async def test_due_job_runs_in_its_own_session_and_delivers_with_header(make_runner):
    clock = Clock()
    runner, qa, sched = await start_cron(make_runner, clock)
    job = await create(sched, schedule="every 1h", prompt="summarise the news", name="news")
    await sched.tick()
    await settle(sched)
    assert await runs(sched, job["id"]) == []  # not due yet
    clock.t += 3600
    await sched.tick()
    await settle(sched)
    [run] = await runs(sched, job["id"])
    assert (run["status"], run["delivery_status"], run["trigger"]) == ("ok", "delivered", "scheduled")
    assert run["due_at"] == T0 + 3600 and "summarise the news" in run["output"]
    [text] = qa.texts("c1")
    assert text.startswith(f"⏰ Cron job «news» ({job['id']})") and "summarise the news" in text
    # The run had a session of its own; the chat it was created from has no history from it.
    assert await runner.store.sessions.active(runner.key_for(ORIGIN)) is None
    assert await runner.store.sessions.active(f"cron:{job['id']}:{run['id']}") is not None
    stored = await sched.store.job(job["id"])
    assert stored["next_run_at"] == T0 + 7200 and stored["last_status"] == "ok" and stored["runs_done"] == 1


async def test_silent_answer_is_stored_not_delivered(make_runner, fake_llm):
    clock = Clock()
    _, qa, sched = await start_cron(make_runner, clock)
    job = await create(sched, schedule="30m", prompt="anything new?")
    fake_llm.script(Reply("[SILENT]"))
    clock.t += 1800
    await sched.tick()
    await settle(sched)
    [run] = await runs(sched, job["id"])
    assert (run["status"], run["output"], run["delivery_status"]) == ("ok", "[SILENT]", "silent")
    assert qa.texts() == []
    assert not (await sched.store.job(job["id"]))["enabled"]  # a one-shot is finished
    clock.t += 86_400  # long past the claim the run began with: nothing is owed, nothing is taken over
    assert await sched.resume_deliveries() == 0
    await settle(sched)
    assert qa.texts() == []


async def test_exactly_once_with_two_schedulers_on_one_database(make_runner, db_url):
    clock = Clock()
    _a_runner, a_qa, a = await start_cron(make_runner, clock, db_url=db_url)
    _b_runner, b_qa, b = await start_cron(make_runner, clock, db_url=db_url)
    jobs = [await create(a, schedule="every 1h", script=f"echo job{i}", no_agent=True) for i in range(3)]
    hours = 4
    for _ in range(hours):
        clock.t += 3600
        await asyncio.gather(a.tick(), b.tick(), a.tick(), b.tick())
        await settle(a, b)
    # A run requested once (CLI / chat) is carried out once, too.
    await a.store.update_job(jobs[0]["id"], run_requested_at=clock.t + 0.5)
    await asyncio.gather(a.tick(), b.tick())
    await settle(a, b)
    for job in jobs:
        history = await runs(a, job["id"])
        scheduled = [r for r in history if r["trigger"] == "scheduled"]
        assert [r["due_at"] for r in scheduled] == [T0 + 3600 * h for h in range(1, hours + 1)]
        assert all(r["status"] == "ok" and r["delivery_status"] == "delivered" for r in history)
    assert len([r for r in await runs(a, jobs[0]["id"]) if r["trigger"] == "manual"]) == 1
    delivered = a_qa.texts("c1") + b_qa.texts("c1")
    assert len(delivered) == 3 * hours + 1
    for i in range(3):
        assert sum(f"job{i}" in t for t in delivered) == hours + (1 if i == 0 else 0)


async def test_catch_up_after_restart(make_runner, tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'cron.db'}"
    clock = Clock()
    runner, _, sched = await start_cron(make_runner, clock, db_url=url)
    hourly = await create(sched, schedule="every 1h", script="echo hourly", no_agent=True)
    two_hourly = await create(sched, schedule="every 2h", script="echo two", no_agent=True)
    soon = await create(sched, schedule="3h", script="echo soon", no_agent=True)
    stale = await create(sched, schedule="30m", script="echo stale", no_agent=True, name="stale one")
    await runner.shutdown()

    # Down for a little over three hours.
    clock.t = T0 + 3 * 3600 + 61
    runner, qa, sched = await start_cron(make_runner, clock, db_url=url)
    await sched.tick()
    await sched.tick()
    await settle(sched)
    # hourly: three due times passed; the latest is 61 s late (window 30 min): one run, no burst.
    [run] = await runs(sched, hourly["id"])
    assert (run["due_at"], run["status"]) == (T0 + 3 * 3600, "ok")
    assert (await sched.store.job(hourly["id"]))["next_run_at"] == T0 + 4 * 3600
    # two-hourly: latest due T0+2h is over an hour late (window 1 h): fast-forwarded, recorded as missed.
    [run] = await runs(sched, two_hourly["id"])
    assert (run["status"], run["delivery_status"]) == ("missed", "none")
    assert (await sched.store.job(two_hourly["id"]))["next_run_at"] == T0 + 4 * 3600
    # one-shot 61 s late (grace 2 min): runs.
    [run] = await runs(sched, soon["id"])
    assert run["status"] == "ok"
    # one-shot 2.5 h late: marked missed and its chat is told.
    [run] = await runs(sched, stale["id"])
    assert (run["status"], run["delivery_status"]) == ("missed", "delivered")
    texts = qa.texts("c1")
    assert sorted(t.split("\n\n", 1)[1].strip() for t in texts if "missed" not in t) == ["hourly", "soon"]
    assert [t for t in texts if "stale one" in t and "missed" in t]
    assert len(texts) == 3


async def test_run_past_its_time_limit_is_timed_out_and_reported(make_runner):
    clock = Clock()
    _, qa, sched = await start_cron(make_runner, clock)
    job = await create(sched, schedule="10m", prompt="[sleep=5] slow work", timeout_seconds=0.3, name="slow")
    clock.t += 600
    await sched.tick()
    await settle(sched)
    [run] = await runs(sched, job["id"])
    assert run["status"] == "timed_out" and "time limit" in run["error"]
    assert run["delivery_status"] == "delivered"
    [text] = qa.texts("c1")
    assert "«slow»" in text and "timed out" in text


@pytest.mark.slow
async def test_a_timed_out_run_stops_its_agent_before_the_next_tool(make_runner, tmp_path, fake_llm):
    clock = Clock()
    runner, _qa, sched = await start_cron(make_runner, clock)
    marker = runner.sandbox.workspace / "ran-after-the-limit"
    job = await create(sched, schedule="10m", timeout_seconds=0.3, name="late tool",
                       prompt=f'[sleep=1][tool=terminal:{{"command": "touch {marker}"}}]')
    clock.t += 600
    await sched.tick()
    await settle(sched)
    [run] = await runs(sched, job["id"])
    assert run["status"] == "timed_out"
    await asyncio.sleep(1.5)  # the model's late answer (a tool call) has arrived by now
    assert not marker.exists()
    assert len(fake_llm.requests) == 1  # and the stopped agent never asked the model again


async def test_failed_script_is_a_failed_run(make_runner):
    clock = Clock()
    _, qa, sched = await start_cron(make_runner, clock)
    job = await create(sched, schedule="10m", script="echo partial; echo broken >&2; exit 3", no_agent=True)
    clock.t += 600
    await sched.tick()
    await settle(sched)
    [run] = await runs(sched, job["id"])
    assert run["status"] == "failed" and "status 3" in run["error"] and "broken" in run["error"]
    assert "failed" in qa.texts("c1")[0]


async def test_delivery_failure_is_recorded_and_retried(make_runner):
    clock = Clock()
    _, qa, sched = await start_cron(make_runner, clock, cron={"delivery_attempts": 3})
    failures: list[str] = []

    def hook(chat_id: str, text: str) -> Exception | None:
        # c1 fails its first send only (whichever job's delivery comes first: the scripts race).
        if chat_id == "dead" or (chat_id == "c1" and "c1" not in failures):
            failures.append(chat_id)
            return PermanentError(f"chat {chat_id} is unreachable")
        return None

    qa.send_hook = hook
    flaky = await create(sched, schedule="10m", script="echo flaky", no_agent=True)
    dead = await create(sched, schedule="10m", script="echo dead", no_agent=True, deliver="qa:dead")
    clock.t += 600
    await sched.tick()
    await settle(sched)
    [run] = await runs(sched, flaky["id"])
    assert (run["status"], run["delivery_status"], run["delivery_attempts"]) == ("ok", "delivered", 2)
    assert qa.texts("c1") and "flaky" in qa.texts("c1")[0]
    [run] = await runs(sched, dead["id"])
    assert (run["status"], run["delivery_status"], run["delivery_attempts"]) == ("ok", "failed", 3)
    assert "unreachable" in run["delivery_error"] and "qa:dead" in run["delivery_error"]
    assert failures.count("dead") == 3


async def test_a_delivery_cut_off_by_a_restart_is_finished_once_by_the_next_process(make_runner):
    import socket

    from gateway.storage.tables import cron_runs

    clock = Clock()
    runner, qa, sched = await start_cron(make_runner, clock,
                                         cron={"delivery_attempts": 3, "delivery_retry_seconds": 3600})
    qa.send_hook = lambda chat_id, text: PermanentError("the chat is away")
    job = await create(sched, schedule="10m", script="echo the report", no_agent=True)
    clock.t += 600
    await sched.tick()
    await wait_until(lambda: newest_run(sched, job["id"], lambda r: r["delivery_attempts"] == 1),
                     what="the first delivery attempt")
    # The process dies while waiting to retry: its tasks vanish, the run's delivery claim stays behind.
    for task in [*sched._tasks]:
        task.cancel()
    await asyncio.gather(*sched._tasks, return_exceptions=True)
    gone = await asyncio.create_subprocess_exec("true")
    await gone.wait()
    dead_owner = f"{socket.gethostname()}:{gone.pid}"
    await runner.store.run_write(lambda c: c.execute(cron_runs.update().values(delivery_owner=dead_owner)))
    [run] = await runs(sched, job["id"])
    assert (run["status"], run["delivery_status"]) == ("ok", "failed") and qa.texts("c1") == []

    qa.send_hook = None
    restarted = CronScheduler(runner.cron_host(), now=clock)
    other = CronScheduler(runner.cron_host(), now=clock)  # a second daemon on the same database, starting at once
    await asyncio.gather(restarted.start(timer=False), other.start(timer=False))
    await settle(restarted, other)
    [run] = await runs(restarted, job["id"])
    assert (run["delivery_status"], run["delivery_attempts"]) == ("delivered", 2)
    assert run["delivery_lease_until"] is None
    texts = qa.texts("c1")
    assert len(texts) == 1 and "the report" in texts[0] and "Cron job" in texts[0]


async def test_a_run_cut_off_by_a_stop_is_reported_to_its_chat_by_the_next_process(make_runner):
    """Stopped mid-run (SIGTERM, a deploy): no result, so the chat is told it was interrupted — once, by whoever
    starts next — rather than hearing nothing."""
    clock = Clock()
    runner, qa, sched = await start_cron(make_runner, clock)
    job = await create(sched, schedule="10m", prompt="[sleep=5] long work", name="long")
    clock.t += 600
    await sched.tick()
    await wait_until(lambda: newest_run(sched, job["id"], lambda r: r["delivery_text"]), what="the run's claim written")
    await sched.stop()
    [run] = await runs(sched, job["id"])
    assert run["status"] == "failed" and run["error"].startswith("interrupted")
    assert qa.texts("c1") == []  # the stopping process sends nothing more

    restarted, other = (CronScheduler(runner.cron_host(), now=clock) for _ in range(2))
    await asyncio.gather(restarted.start(timer=False), other.start(timer=False))
    await settle(restarted, other)
    [run] = await runs(restarted, job["id"])
    assert (run["status"], run["delivery_status"]) == ("failed", "delivered")
    [text] = qa.texts("c1")
    assert "«long»" in text and "failed" in text and "interrupted" in text and "not run again" in text
    assert (await sched.store.job(job["id"]))["last_status"] == "failed"


async def test_a_run_whose_process_died_is_failed_and_reported_once(make_runner):
    """Killed mid-run: the row stays 'running' with the claim the run wrote when it began. The next process
    fails the run and delivers the notice the claim carries; a second process starting beside it does not."""
    import socket

    from cron.store import op_claim
    from gateway.storage.tables import cron_runs

    clock = Clock()
    runner, qa, sched = await start_cron(make_runner, clock)
    job = await create(sched, schedule="10m", prompt="work", name="killed")
    row = await sched.store.job(job["id"])
    run_id = await sched.store.write(op_claim(job["id"], row["next_run_at"], row["next_run_at"], None, "scheduled",
                                              "running", clock.t, True))
    await sched.store.update_run(run_id, **sched._delivery_claim(row, "interrupted: x", "failed", lease=3600))
    gone = await asyncio.create_subprocess_exec("true")
    await gone.wait()
    await runner.store.run_write(lambda c: c.execute(
        cron_runs.update().values(delivery_owner=f"{socket.gethostname()}:{gone.pid}")))

    restarted, other = (CronScheduler(runner.cron_host(), now=clock) for _ in range(2))
    await asyncio.gather(restarted.start(timer=False), other.start(timer=False))
    await settle(restarted, other)
    [run] = await runs(restarted, job["id"])
    assert (run["status"], run["delivery_status"]) == ("failed", "delivered")
    assert run["error"].startswith("interrupted") and run["finished_at"] is not None
    [text] = qa.texts("c1")
    assert "«killed»" in text and "interrupted" in text


async def test_a_run_claims_its_interrupted_notice_only_for_as_long_as_it_may_run(make_runner):
    """While a run goes on, its claim is its own: another process starting meanwhile takes nothing over."""
    clock = Clock()
    runner, qa, sched = await start_cron(make_runner, clock)
    job = await create(sched, schedule="10m", script="sleep 0.5; echo done", no_agent=True, name="busy")
    clock.t += 600
    await sched.tick()
    await wait_until(lambda: newest_run(sched, job["id"], lambda r: r["delivery_text"]), what="the run's claim written")
    other = CronScheduler(runner.cron_host(), now=clock)
    await other.start(timer=False)
    clock.t += 86_400  # the wall clock jumps: the claim looks expired, but the run is this process's own
    assert await sched.resume_deliveries() == 0
    await settle(sched, other)
    [run] = await runs(sched, job["id"])
    assert (run["status"], run["delivery_status"]) == ("ok", "delivered")
    [text] = qa.texts("c1")
    assert "done" in text and "interrupted" not in text


async def test_a_delivery_taken_over_sends_only_the_chunks_that_were_not_out(make_runner):
    """A long result goes out in chunks through the outbox (one delivery per run and target): a process that
    dies between chunks leaves the sent ones recorded, and the next one sends the rest, not all again."""
    import socket

    from gateway.storage.tables import cron_runs

    clock = Clock()
    runner, qa, sched = await start_cron(make_runner, clock,
                                         cron={"delivery_attempts": 3, "delivery_retry_seconds": 3600})
    chunks_seen: list[str] = []

    def die_on_the_second_chunk(chat_id: str, text: str) -> Exception | None:
        chunks_seen.append(text)
        return RuntimeError("the process is going down") if len(chunks_seen) == 2 else None

    qa.send_hook = die_on_the_second_chunk
    job = await create(sched, schedule="10m", script="seq 1 2500", no_agent=True)  # ~11 KB: three chunks
    clock.t += 600
    await sched.tick()
    await wait_until(lambda: newest_run(sched, job["id"], lambda r: r["delivery_attempts"] == 1),
                     what="the first delivery attempt")
    for task in [*sched._tasks]:
        task.cancel()
    await asyncio.gather(*sched._tasks, return_exceptions=True)
    gone = await asyncio.create_subprocess_exec("true")
    await gone.wait()
    await runner.store.run_write(lambda c: c.execute(cron_runs.update().values(
        delivery_owner=f"{socket.gethostname()}:{gone.pid}")))
    assert len(qa.texts("c1")) == 1  # the first chunk reached the chat before the process died

    qa.send_hook = None
    restarted = CronScheduler(runner.cron_host(), now=clock)
    await restarted.start(timer=False)
    await settle(restarted)
    [run] = await runs(restarted, job["id"])
    assert run["delivery_status"] == "delivered"
    numbers = [line.strip() for text in qa.texts("c1") for line in text.splitlines() if line.strip().isdigit()]
    assert numbers == [str(n) for n in range(1, 2501)]  # every line once, in order: no chunk sent twice
    # The chunk that may or may not have been out when it died is announced first (QA cannot de-duplicate).
    assert sum("may repeat" in text for text in qa.texts("c1")) == 1


async def test_a_live_deliverers_claim_is_respected_until_its_lease_runs_out(make_runner):
    from gateway.storage.tables import cron_runs

    clock = Clock()
    runner, qa, sched = await start_cron(make_runner, clock,
                                         cron={"delivery_attempts": 2, "delivery_retry_seconds": 3600})
    qa.send_hook = lambda chat_id, text: PermanentError("the chat is away")
    job = await create(sched, schedule="10m", script="echo later", no_agent=True)
    clock.t += 600
    await sched.tick()
    await wait_until(lambda: newest_run(sched, job["id"], lambda r: r["delivery_attempts"] == 1),
                     what="the first delivery attempt")
    # Another machine's process owns it (not checkable from here) and is still within its lease.
    await runner.store.run_write(lambda c: c.execute(cron_runs.update().values(delivery_owner="elsewhere:1")))
    for task in [*sched._tasks]:
        task.cancel()
    await asyncio.gather(*sched._tasks, return_exceptions=True)
    qa.send_hook = None
    other = CronScheduler(runner.cron_host(), now=clock)
    await other.start(timer=False)
    assert await other.resume_deliveries() == 0 and qa.texts("c1") == []
    clock.t += 3600 + 601  # its lease (the retry pause + LEASE_SECONDS) has run out: it is presumed gone
    assert await other.resume_deliveries() == 1
    await settle(other)
    [run] = await runs(other, job["id"])
    assert (run["delivery_status"], run["delivery_attempts"]) == ("delivered", 2) and len(qa.texts("c1")) == 1


async def newest_run(sched: CronScheduler, job_id: str, ok: Any) -> dict[str, Any] | None:
    """The job's newest run once ``ok`` holds for it."""
    found = await sched.store.runs(job_id)
    return found[0] if found and ok(found[0]) else None


async def test_a_job_never_overlaps_itself(make_runner):
    clock = Clock()
    _, _, sched = await start_cron(make_runner, clock)
    job = await create(sched, schedule="every 1m", script="sleep 0.5; echo done", no_agent=True)
    clock.t += 60
    await sched.tick()
    clock.t += 60
    await sched.tick()  # the first run is still going
    await settle(sched)
    history = await runs(sched, job["id"])
    assert [r["status"] for r in history] == ["ok", "skipped"]


async def test_cronjob_tool_creates_a_job_for_the_chat_it_was_asked_in(make_runner, fake_llm):
    clock = Clock()
    _runner, qa, sched = await start_cron(make_runner, clock)
    args = {"action": "create", "schedule": "every 1h", "prompt": "check the disk", "name": "disk"}
    await qa.say(f"[tool=cronjob:{json.dumps(args)}]", chat_id="c7")
    [reply] = await qa.wait_for(lambda t: len(t) >= 1, chat_id="c7")
    assert "tool said" in reply and '"created"' in reply
    [job] = await sched.store.jobs()
    assert job["origin"]["chat_id"] == "c7" and job["deliver"] == "origin"
    fake_llm.reset()
    clock.t += 3600
    await sched.tick()
    await settle(sched)
    texts = qa.texts("c7")
    assert len(texts) == 2 and texts[1].startswith("⏰ Cron job «disk»") and "check the disk" in texts[1]
    # The job's own run cannot schedule more jobs.
    await qa.say('[tool=cronjob:{"action":"list"}]', chat_id="c7")
    listed = await qa.wait_for(lambda t: len(t) >= 3, chat_id="c7")
    assert job["id"] in listed[2]


async def test_targets_whose_ids_hold_any_characters_are_delivered_to_that_chat_and_thread(make_runner):
    """Chat and thread ids with '/', ',', '%', ':' and spaces travel in the job's deliver string (percent-encoded)
    and its results reach exactly that chat and thread, also when a target is retried after a failure."""
    from cron.jobs import Target

    clock = Clock()
    _, qa, sched = await start_cron(make_runner, clock, cron={"delivery_attempts": 2})
    weird = [Target("chat", "qa", "room/1,2%3:4", "thread/5,6%7:8 "), Target("chat", "qa", "a:b", None),
             Target("chat", "qa", "50%25,x", "t:1")]
    deliver = ",".join(str(t) for t in weird)
    first: set[str] = set()

    def flaky(chat_id: str, _text: str) -> Exception | None:
        if chat_id == "a:b" and chat_id not in first:  # its first send fails: it is owed, stored, retried
            first.add(chat_id)
            return PermanentError("not yet")
        return None

    qa.send_hook = flaky
    job = await create(sched, schedule="every 1h", script="echo weird ids", no_agent=True, deliver=deliver)
    assert (await sched.store.job(job["id"]))["deliver"] == deliver
    clock.t += 3600
    await sched.tick()
    await settle(sched)
    [run] = await runs(sched, job["id"])
    assert (run["delivery_status"], run["delivery_attempts"]) == ("delivered", 2)
    got = sorted((s.chat_id, s.message.thread_id) for s in qa.sent if "weird ids" in s.text)
    assert got == sorted((t.chat_id, t.thread_id) for t in weird)


async def test_cron_and_sethome_commands(make_runner):
    clock = Clock()
    _, qa, sched = await start_cron(make_runner, clock)
    job = await create(sched, schedule="every 1h", script="echo home", no_agent=True, deliver="qa")
    await qa.say("/cron", chat_id="c2")
    listing = (await qa.wait_for(lambda t: len(t) >= 1, chat_id="c2"))[0]
    assert job["id"] in listing and "every 1h" in listing
    await qa.say(f"/cron pause {job['id']}", chat_id="c2")
    await qa.wait_for(lambda t: len(t) >= 2, chat_id="c2")
    clock.t += 3600
    await sched.tick()
    await settle(sched)
    assert await runs(sched, job["id"]) == []  # paused
    await qa.say(f"/cron resume {job['id']}", chat_id="c2")
    await qa.say("/sethome", chat_id="home")
    await qa.say(f"/cron run {job['id']}", chat_id="c2")
    await qa.wait_for(lambda t: len(t) >= 4, chat_id="c2")
    await settle(sched)
    await qa.wait_for(lambda t: any("home" in x and "Cron job" in x for x in t), chat_id="home")
    [run] = await runs(sched, job["id"])
    assert run["trigger"] == "manual" and run["delivery_status"] == "delivered"
    await qa.say(f"/cron remove {job['id']}", chat_id="c2")
    texts = await qa.wait_for(lambda t: len(t) >= 5, chat_id="c2")
    assert "Removed" in texts[-1] and await sched.store.jobs() == []
    await qa.say("/cron frobnicate", chat_id="c2")
    assert "Usage" in (await qa.wait_for(lambda t: len(t) >= 6, chat_id="c2"))[-1]


async def test_a_chat_acts_on_its_own_jobs_and_admins_on_all(make_runner):
    """Jobs belong to the chat they were created in: /cron and the cronjob tool list, change and remove only
    those, unless the sender is an admin. /sethome stays admin-only."""
    from tests.support.qa_channel import UntrustedQAAdapter

    runner, qa = await make_runner({"cron": {"enabled": False},
                                    "access": {"allowed_users": ["qa2:friend", "qa2:other"], "admins": ["qa2:boss"]}},
                                   adapters=[UntrustedQAAdapter])
    sched = CronScheduler(runner.cron_host(), now=Clock())
    runner.cron = sched
    await sched.start(timer=False)
    mine = await create(sched, Source("qa2", "c1", "friend"), schedule="every 1h", prompt="p", deliver="origin")
    theirs = await create(sched, Source("qa2", "c2", "other"), schedule="every 1h", prompt="q", deliver="origin")
    await qa.say("/cron list", chat_id="c1", user_id="friend")
    (listing,) = await qa.wait_for(lambda t: len(t) >= 1, chat_id="c1")
    assert mine["id"] in listing and theirs["id"] not in listing
    for verb in ("pause", "run", "remove"):
        await qa.say(f"/cron {verb} {theirs['id']}", chat_id="c1", user_id="friend")
    await qa.say("/sethome", chat_id="c1", user_id="friend")
    texts = await qa.wait_for(lambda t: len(t) >= 5, chat_id="c1")
    assert all("no job" in t for t in texts[1:4]) and "admins only" in texts[4]
    assert {j["id"] for j in await sched.store.jobs()} == {mine["id"], theirs["id"]}
    assert all(j["enabled"] for j in await sched.store.jobs())
    # The tool answers the same way: another chat's job does not exist for it.
    api = sched.tool_api
    assert [j["id"] for j in (await api.do("list", {}, Source("qa2", "c1", "friend")))["jobs"]] == [mine["id"]]
    for action, extra in (("remove", {}), ("update", {"prompt": "hijacked", "deliver": "qa2:c1"}),
                          ("pause", {}), ("run", {})):
        with pytest.raises(JobError):
            await api.do(action, {"id": theirs["id"], **extra}, Source("qa2", "c1", "friend"))
    (job,) = [j for j in await sched.store.jobs() if j["id"] == theirs["id"]]
    assert job["prompt"] == "q" and job["enabled"] and job["deliver"] == theirs["deliver"]
    # Paused by its own chat, it cannot be resumed from another one, by /cron or by the tool.
    await api.do("pause", {"id": theirs["id"]}, Source("qa2", "c2", "other"))
    await qa.say(f"/cron resume {theirs['id']}", chat_id="c1", user_id="friend")
    assert "no job" in (await qa.wait_for(lambda t: len(t) >= 6, chat_id="c1"))[5]
    with pytest.raises(JobError):
        await api.do("resume", {"id": theirs["id"]}, Source("qa2", "c1", "friend"))
    assert not next(j for j in await sched.store.jobs() if j["id"] == theirs["id"])["enabled"]
    await qa.say(f"/cron remove {mine['id']}", chat_id="c1", user_id="friend")  # its own: fine
    await qa.wait_for(lambda t: any("Removed" in x for x in t), chat_id="c1")
    await qa.say(f"/cron remove {theirs['id']}", chat_id="c1", user_id="boss")  # an admin: anywhere
    await qa.wait_for(lambda t: sum("Removed" in x for x in t) == 2, chat_id="c1")
    assert await sched.store.jobs() == []


def test_cli_add_list_history(home, monkeypatch):
    from typer.testing import CliRunner

    from gateway.cli import app

    cli = CliRunner()
    res = cli.invoke(app, ["cron", "add", "--schedule", "every 2h", "--prompt", "hello", "--deliver", "web:c9",
                           "--name", "greeter"])
    assert res.exit_code == 0, res.output
    res = cli.invoke(app, ["cron", "list", "--json"])
    [job] = json.loads(res.output)
    assert {k: job[k] for k in ("name", "schedule", "deliver", "enabled")} == {
        "name": "greeter", "schedule": "every 2h", "deliver": "web:c9", "enabled": True}
    assert isinstance(job["next_run"], float)
    assert cli.invoke(app, ["cron", "pause", job["id"]]).exit_code == 0
    assert json.loads(cli.invoke(app, ["cron", "list", "--json"]).output)[0]["enabled"] is False
    assert cli.invoke(app, ["cron", "resume", job["id"]]).exit_code == 0
    assert "No runs" in cli.invoke(app, ["cron", "history", job["id"]]).output
    bad = cli.invoke(app, ["cron", "add", "--schedule", "every 5s", "--prompt", "x"])
    assert bad.exit_code == 2 and "shortest interval" in bad.output
    bad = cli.invoke(app, ["cron", "add", "--schedule", "1h", "--prompt", "x", "--deliver", "origin"])
    assert bad.exit_code == 2 and "origin" in bad.output
    assert cli.invoke(app, ["cron", "remove", "nope"]).exit_code == 1
    assert cli.invoke(app, ["cron", "remove", job["id"]]).exit_code == 0
    assert json.loads(cli.invoke(app, ["cron", "list", "--json"]).output) == []


@pytest.mark.parametrize("bad", [{"cron": {"timezone": "Nowhere/Land"}}, {"cron": {"max_parallel": 0}}])
def test_cron_config_errors_name_the_key(bad):
    from gateway.config import ConfigError, parse_config

    with pytest.raises(ConfigError, match=r"cron\."):
        parse_config(bad)


@pytest.mark.parametrize("mode", ["deny", "allow"])
async def test_dangerous_command_in_a_run_follows_cron_mode(make_runner, tmp_path, mode):
    clock = Clock()
    runner, qa, sched = await start_cron(make_runner, clock)
    runner.cfg.approvals.cron_mode = mode
    victim = runner.sandbox.workspace / "victim"  # the only place the agent's commands may change
    victim.mkdir()
    (victim / "f").write_text("x")
    command = json.dumps({"command": f"rm -rf {victim}"})
    job = await create(sched, schedule="10m", prompt=f"[tool=terminal:{command}]", name="cleanup")
    clock.t += 600
    await sched.tick()
    await settle(sched)
    [run] = await runs(sched, job["id"])
    assert run["status"] == "ok" and "tool said" in run["output"]
    assert victim.exists() is (mode == "deny")
    assert ("cron_mode is deny" in run["output"]) is (mode == "deny")
    assert not qa.texts("c1")[0].count("Approve once")  # nobody was asked


async def test_platform_target_uses_configured_home_chat_until_sethome(make_runner):
    clock = Clock()
    runner, qa = await make_runner({"cron": {"enabled": False, "delivery_retry_seconds": 0.01},
                                    "platforms": {"web": {"enabled": True, "home_chat": "webhome"}}})
    sched = CronScheduler(runner.cron_host(), now=clock)
    runner.cron = sched
    await sched.start(timer=False)
    job = await create(sched, schedule="every 1h", script="echo to the web", no_agent=True, deliver="web, qa")
    clock.t += 3600
    await sched.tick()
    await settle(sched)
    [row] = await runner.store.chat_log.recent("web", "webhome")
    assert row["text"].startswith("⏰ Cron job") and "to the web" in row["text"]
    # qa has no home chat yet: that target failed (and was retried), the web one was not sent twice.
    [run] = await runs(sched, job["id"])
    assert run["delivery_status"] == "failed" and "qa: no home chat" in run["delivery_error"]
    assert len(await runner.store.chat_log.recent("web", "webhome")) == 1
    await qa.say("/sethome", chat_id="qahome")
    await qa.wait_for(lambda t: len(t) >= 1, chat_id="qahome")
    clock.t += 3600
    await sched.tick()
    await settle(sched)
    assert any("to the web" in t for t in qa.texts("qahome"))
    assert (await runs(sched, job["id"]))[-1]["delivery_status"] == "delivered"
