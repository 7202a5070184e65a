"""Database faults under load: PostgreSQL restarted in the middle of it, SQLite on a disk that fills up.

The real ``herald run`` takes messages through the web API and the Telegram fake while the test breaks its
database. What it promises: it waits and reconnects (no crash, no exit); a message it acknowledged (a 202, a
confirmed Telegram update) is answered exactly once when the database is back; a message that arrives while
the database cannot store it is refused upstream (a 503 with a plain reason, a Telegram update left
unconfirmed) and arrives again later; ``/readyz`` names the condition while it lasts; the fault is counted.
"""

from __future__ import annotations

import asyncio
import errno
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import exc as sa_exc

from gateway.kernel.faults import Unavailable
from gateway.storage.db import unavailable_kind
from gateway.storage.store import Store
from tests.e2e.conftest import Herald, fake_llm, make_herald  # noqa: F401 - fixtures used here
from tests.fakes.telegram_api import FakeTelegramThread
from tests.faults.conftest import scale
from tests.faults.storage import (
    ALICE_TG,
    Load,
    fill,
    metric,
    pg_cluster,
    pg_unavailable_reason,
    small_tmpfs,
    start,  # noqa: F401 - fixture
    tmpfs_unavailable_reason,
)

TG_USERS = (5101, 5102)


@pytest.fixture
def bot(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeTelegramThread]:
    fake = FakeTelegramThread()
    fake.start()
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", fake.token)
    try:
        yield fake
    finally:
        fake.stop()


def telegram(bot: FakeTelegramThread) -> dict[str, Any]:
    # After the fault, Telegram hands out every update it kept at once: a chat's lane may hold more than the
    # default 20 waiting (the 21st is refused with a notice, by design): not what these tests are about.
    return {"platforms": {"telegram": {"enabled": True, "base_url": bot.base_url,
                                       "allowed_users": [str(u) for u in TG_USERS]}},
            "gateway": {"max_queue": 10_000, "drain_seconds": 5}}


def readyz(herald: Herald) -> Any:
    return herald.get("/readyz", auth=False, timeout=15)


def wait_readyz(herald: Herald, predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        assert herald.proc is not None and herald.proc.poll() is None, f"herald exited:\n{herald.stderr()[-3000:]}"
        last = readyz(herald)
        if predicate(last):
            return last
        time.sleep(0.1)
    raise AssertionError(f"/readyz: {what} not seen within {timeout}s; last: {last}")


def condition(resp: Any, name: str) -> dict[str, Any] | None:
    return ((resp.body or {}).get("conditions") or {}).get(name)


def check_answers(load: Load, herald: Herald, timeout: float) -> tuple[int, int]:
    lost, doubled = load.settle(timeout)
    assert not load.ledger.errors, load.ledger.errors[:5]
    assert not lost, f"{len(lost)} acknowledged messages never answered: {lost[:10]}\n{herald.stderr()[-2000:]}"
    assert not doubled, f"answered twice: {doubled[:10]}"
    return len(lost), len(doubled)


@pytest.mark.timeout(300)
def test_postgresql_restarted_under_load(bot, make_herald):  # noqa: F811 - bot first: it outlives the daemon
    reason = pg_unavailable_reason()
    if reason:
        pytest.skip(reason)
    outage = scale(5, 60)
    with pg_cluster() as pg:
        herald = make_herald({**telegram(bot), "database": {"url": pg.url}})
        # Enough chats that none outgrows the 500 lines the web API's history serves (the long version).
        load = Load(herald, bot, web_chats=int(scale(3, 16)), tg_users=TG_USERS).start()
        try:
            time.sleep(scale(1, 10))
            pg.stop()
            stopped = time.monotonic()
            down = wait_readyz(herald, lambda r: r.status == 503 and condition(r, "database"), 30,
                               "the database condition")
            assert condition(down, "database")["reason"] == "database unavailable"
            assert condition(down, "database")["fault"] == "database_unavailable"
            time.sleep(max(0.0, outage - (time.monotonic() - stopped)))
            refused_before = len(load.ledger.refusals)
            pg.start()
            wait_readyz(herald, lambda r: r.status == 200, 120, "ready again")
            time.sleep(scale(1, 10))
        finally:
            load.stop()
        load.resend_refused(30)
        try:
            assert herald.proc is not None and herald.proc.poll() is None  # waited and reconnected: never exited
            lost, doubled = check_answers(load, herald, 60)
            # Messages that came while it was down were refused with a plain reason, not taken and lost.
            assert refused_before > 0 and load.ledger.refusals
            assert all("database unavailable" in r["error"] for r in load.ledger.refusals), load.ledger.refusals[:3]
            injected = metric(herald, "herald_faults_total", fault="database_unavailable")
            assert injected >= 1
            print(f"\nfault database_unavailable: outages 1, counted {injected:g}; web sent "
                  f"{len(load.ledger.web)}, refused {len(load.ledger.refusals)} times; telegram sent "
                  f"{len(load.ledger.telegram)}; lost {lost}, doubled {doubled}")
        finally:
            if herald.proc is not None and herald.proc.poll() is None:
                assert herald.stop() == 0  # before the cluster goes: a clean stop needs its database


@pytest.fixture
def db_dir(tmp_path: Path) -> Iterator[Path]:
    reason = tmpfs_unavailable_reason()
    if reason:
        pytest.skip(reason)
    with small_tmpfs(tmp_path / "dbfs", "16m") as path:
        yield path


async def test_on_a_full_disk_each_write_is_answered_once_and_waiting_ones_finish_when_space_returns(db_dir):
    """Regression: a commit that failed on a full disk (after its op ran) was reported twice, as done and as
    failed; the group commit handed those outcomes out in order, so half the batch was told "stored" (an inbox
    id, a 202, a Telegram update confirmed) for rows that were never committed: acknowledged, then lost."""
    store = Store(f"sqlite+aiosqlite:///{db_dir}/herald.db")
    await store.init()
    ballast = fill(db_dir)
    try:
        async def add(i: int, wait: bool) -> Any:
            try:
                return await store.inbox.add("web", f"m{i}", "k", {"text": "x" * 3000}, wait=wait)
            except Unavailable as exc:
                return exc.fault

        refused: list[Any] = []
        for round_ in range(5):  # batches of writes: a commit fails at the op or at the commit, as pages fall
            batch = (add(round_ * 40 + i, False) for i in range(40))
            refused += await asyncio.wait_for(asyncio.gather(*batch), 30)
        assert "disk_full" in refused and all(r == "disk_full" or isinstance(r, int) for r in refused)
        # A write reported done is stored: the message it acknowledged is there, under the id it was given.
        for i, result in enumerate(refused):
            if isinstance(result, int):
                row = await store.inbox.get(result)
                assert row is not None and row["platform_message_id"] == f"m{i}", (i, result, row)
        assert store.faults.conditions()["disk"]["fault"] == "disk_full"
        waiting = asyncio.ensure_future(add(1000, True))  # work already taken waits for space
        await asyncio.sleep(0.5)
        assert not waiting.done()
    finally:
        ballast.unlink()
    assert isinstance(await asyncio.wait_for(waiting, 30), int)
    assert isinstance(await add(1001, False), int) and "disk" not in store.faults.conditions()
    await store.close()


@pytest.mark.timeout(240)
def test_sqlite_on_a_full_disk_refuses_then_recovers(bot, db_dir, make_herald):  # noqa: F811
    herald = make_herald({**telegram(bot), "database": {"url": f"sqlite+aiosqlite:///{db_dir}/herald.db"}})
    load = Load(herald, bot, web_chats=int(scale(2, 16)), tg_users=TG_USERS)
    for _ in range(4):
        load.tick()
    ballast = fill(db_dir)
    full_for = scale(3, 60)
    try:
        # The WAL may still hold a write or two after the disk fills: the refusal comes with the first that
        # needs a page the disk has not got.
        deadline = time.monotonic() + 30
        while not load.ledger.refusals:
            assert time.monotonic() < deadline, "no message was refused on a full disk"
            load.tick()
            time.sleep(0.02)
        full = wait_readyz(herald, lambda r: r.status == 503 and condition(r, "disk"), 30, "the disk condition")
        assert condition(full, "disk")["fault"] == "disk_full"
        refusal = load.ledger.refusals[0]["error"]
        assert "disk full" in refusal and "send it again" in refusal, refusal
        began = time.monotonic()
        while time.monotonic() - began < full_for:  # messages keep coming while the disk is full
            load.tick()
            time.sleep(0.1)
        assert herald.proc is not None and herald.proc.poll() is None
        # Telegram updates that came meanwhile are not confirmed: the fake still holds them.
        pending = bot.call(lambda fake: [u for u in fake.updates])
        assert pending, "Telegram updates were confirmed while the disk was full"
        # The silence has a reason: each chat was told, in plain words (not once per redelivery).
        for user in TG_USERS:
            told = [t for t in bot.call(lambda fake, u=user: fake.texts(u)) if "cannot take messages" in t]
            assert told and "disk full" in told[0] and len(told) <= 2, told
    finally:
        ballast.unlink()
    for _ in range(4):
        load.tick()
    wait_readyz(herald, lambda r: r.status == 200, 60, "ready again")
    load.resend_refused(30)
    lost, doubled = check_answers(load, herald, 60)
    injected = metric(herald, "herald_faults_total", fault="disk_full")
    assert injected >= 1
    print(f"\nfault disk_full: fillings 1, counted {injected:g}; web sent {len(load.ledger.web)}, refused "
          f"{len(load.ledger.refusals)} times; telegram sent {len(load.ledger.telegram)}; lost {lost}, "
          f"doubled {doubled}")
    assert herald.stop() == 0


class _PgError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(f"sqlstate {sqlstate}")
        self.sqlstate = sqlstate


@pytest.mark.parametrize(("error", "kind"), [
    (ConnectionRefusedError(111, "Connect call failed"), "database"),
    (OSError(errno.ENOSPC, "No space left on device"), "disk"),
    (sa_exc.OperationalError("INSERT", {}, sqlite3.OperationalError("database or disk is full")), "disk"),
    (sa_exc.DBAPIError("SELECT", {}, _PgError("57P01")), "database"),  # terminating: admin shutdown
    (sa_exc.DBAPIError("SELECT", {}, _PgError("08003")), "database"),  # connection does not exist
    (sa_exc.DBAPIError("INSERT", {}, _PgError("53100")), "disk"),  # PostgreSQL's disk full
    (sa_exc.IntegrityError("INSERT", {}, _PgError("23505")), None),  # a duplicate: the op's own error
    (sa_exc.OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: x")), None),
    (ValueError("a bug"), None),
])
def test_which_errors_mean_the_database_is_unavailable(error: Exception, kind: str | None):
    found = unavailable_kind(error)
    assert (found[0] if found else None) == kind


async def test_a_message_whose_insert_was_committed_as_the_connection_dropped_is_answered_once(
        start, fake_tg, monkeypatch):  # noqa: F811
    """The server took the COMMIT and the connection dropped before its answer: the insert looked failed
    (the update was left unconfirmed) but the row is there. Telegram hands the update out again; its insert is
    now a duplicate — and the row, ours and pending, was dispatched by nobody. Regression: it waited for ever
    (its owner, this instance, is not gone, so no recovery took it)."""
    runner = await start("polling", slack=False)
    store = runner.store
    real_add = store.inbox.add
    dropped: list[str] = []

    async def add_then_drop(platform: str, platform_message_id: str, *args: Any, **kw: Any) -> Any:
        stored = await real_add(platform, platform_message_id, *args, **kw)
        if kw.get("payload", args[1] if len(args) > 1 else {}).get("text") == "committed anyway" and not dropped:
            dropped.append(platform_message_id)
            raise Unavailable("database", "database_unavailable", "database unavailable")
        return stored

    monkeypatch.setattr(store.inbox, "add", add_then_drop)
    fake_tg.user_message(ALICE_TG, text="committed anyway")
    await fake_tg.wait_sent(lambda sent: any(s.text == "echo: committed anyway" for s in sent), timeout=15)
    fake_tg.user_message(ALICE_TG, text="next")
    await fake_tg.wait_sent(lambda sent: any(s.text == "echo: next" for s in sent), timeout=15)
    assert dropped and fake_tg.texts(ALICE_TG).count("echo: committed anyway") == 1


async def test_a_credential_lock_whose_database_is_down_is_retried_soon(tmp_path):
    """Regression: with the database down, taking the PostgreSQL credential lock failed with a plain
    connection error, so the supervisor's backoff grew through the outage (1, 2, 4 ... 64 s): Telegram came
    back up to a minute after the database, and replies waiting for it gave up meanwhile."""
    from gateway.cluster.locks import CredentialLocks, LockDatabaseDown
    from gateway.inbound.supervisor import Supervisor
    from tests.e2e.conftest import free_port

    locks = CredentialLocks(f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/none", "default", tmp_path)
    with pytest.raises(LockDatabaseDown):
        await locks.acquire("telegram", [("telegram", "123:abc")])
    assert Supervisor.db_retry_seconds <= 5
