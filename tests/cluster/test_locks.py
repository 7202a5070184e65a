"""Credential locks: the file lock and the PostgreSQL advisory lock, and the runner's supervision of them."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from gateway.cluster.locks import CredentialLock, CredentialLocked, PgCredentialLock, advisory_key
from gateway.runner import GatewayRunner  # noqa: F401 - every table defined before Store.init
from gateway.storage.store import Store
from tests.support.polling import wait_until
from tests.support.qa_channel import QAAdapter


@pytest.fixture(autouse=True)
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Never touch the real ~/.local/state/herald/locks."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


def test_file_lock_refuses_a_second_holder_naming_the_first_and_is_free_after_release(tmp_path):
    first = CredentialLock("telegram", "123:secret", holder={"pid": os.getpid(), "profile": "work", "host": "box"})
    first.acquire()
    assert str(first.path).startswith(str(tmp_path / "state" / "herald" / "locks"))
    assert "123:secret" not in first.path.name  # keyed by a digest, never the token itself
    second = CredentialLock("telegram", "123:secret")
    with pytest.raises(CredentialLocked) as info:
        second.acquire()
    assert f"pid {os.getpid()}, profile work, host box" in str(info.value)
    assert info.value.holder_pid == os.getpid()
    CredentialLock("telegram", "456:other").acquire()  # another credential: its own lock
    first.release()
    second.acquire()
    assert second.held


def test_a_killed_holder_leaves_no_stale_file_lock(tmp_path):
    code = ("import sys, time; from gateway.cluster.locks import CredentialLock; "
            "CredentialLock('telegram', 'tok:kill', holder={'pid': 1, 'profile': 'p', 'host': 'h'}).acquire(); "
            "print('held', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=os.environ.copy())
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"held"
        with pytest.raises(CredentialLocked):
            CredentialLock("telegram", "tok:kill").acquire()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    CredentialLock("telegram", "tok:kill").acquire()


def test_advisory_keys_depend_on_scope_and_credential() -> None:
    assert advisory_key("telegram", "a") == advisory_key("telegram", "a")
    assert len({advisory_key("telegram", "a"), advisory_key("telegram", "b"), advisory_key("slack", "a")}) == 3
    assert -(2**63) <= advisory_key("telegram", "a") < 2**63


async def test_postgres_advisory_lock_refuses_a_second_holder_and_is_released_when_its_connection_dies(pg_url):
    store = Store(pg_url)
    await store.init()
    try:
        token = f"pg-{uuid.uuid4().hex}"
        first = PgCredentialLock(pg_url, "telegram", token, {"pid": 4242, "profile": "alpha", "host": "machine-a"})
        await first.acquire()
        await first.check()
        second = PgCredentialLock(pg_url, "telegram", token, {"pid": 5353, "profile": "beta", "host": "machine-b"})
        with pytest.raises(CredentialLocked) as info:
            await second.acquire()
        assert "pid 4242, profile alpha, host machine-a" in str(info.value)
        other = PgCredentialLock(pg_url, "telegram", f"{token}-2")
        await other.acquire()  # another credential is independent
        await other.release()
        await first.release()
        await second.acquire()
        # The holder crashes (its connection ends): the database frees the lock, the holder notices.
        unsigned = second.key & 0xFFFFFFFFFFFFFFFF
        await store.run_write(lambda c: c.execute(text(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
            "AND classid::bigint = :hi AND objid::bigint = :lo AND objsubid = 1"),
            {"hi": unsigned >> 32, "lo": unsigned & 0xFFFFFFFF}))
        with pytest.raises(ConnectionError):
            await second.check()
        third = PgCredentialLock(pg_url, "telegram", token)
        await third.acquire()
        await third.release()
        await second.release()
    finally:
        await store.close()


async def test_webhook_receivers_of_one_database_share_a_credential_a_poller_gets_it_alone(pg_url, tmp_path):
    from gateway.cluster.locks import CredentialLocks

    store = Store(pg_url)
    await store.init()
    token = f"hook-{uuid.uuid4().hex}"
    machines = [CredentialLocks(pg_url, f"m{i}", directory=tmp_path / f"m{i}") for i in range(3)]
    try:
        # Two instances receiving by webhook hold it together...
        await machines[0].acquire("telegram", [("telegram", token)], exclusive=False)
        await machines[1].acquire("telegram", [("telegram", token)], exclusive=False)
        # ...and a poller (another instance, or a misconfigured daemon) is kept out while they do,
        with pytest.raises(CredentialLocked):
            await machines[2].acquire("telegram", [("telegram", token)], exclusive=True)
        await machines[0].release("telegram")
        await machines[1].release("telegram")
        # as webhook receivers are kept out while a poller holds it.
        await machines[2].acquire("telegram", [("telegram", token)], exclusive=True)
        with pytest.raises(CredentialLocked):
            await machines[0].acquire("telegram", [("telegram", token)], exclusive=False)
    finally:
        for locks in machines:
            await locks.release("telegram")
        await store.close()


# ---------------------------------------------------------------------------------------------- supervision


def locked_adapter(token: str, lock_dir: Path | None = None) -> type[QAAdapter]:
    class Locked(QAAdapter):
        name = "locked"

        def __init__(self, ctx: Any) -> None:
            super().__init__(ctx)
            runner = ctx.gateway
            runner.supervisor.lock_retry_seconds = 0.3
            if lock_dir is not None:
                runner.locks.directory = lock_dir  # another machine: its own lock folder

        def credentials(self) -> list[tuple[str, str]]:
            return [("qa", token)]

    return Locked


@pytest.mark.slow
async def test_second_runner_is_refused_only_for_that_adapter_then_takes_over(make_runner, db_url, tmp_path,
                                                                              monkeypatch):
    await refused_then_takes_over(make_runner, db_url, tmp_path, monkeypatch, [None, None])


@pytest.mark.slow
async def test_on_postgresql_a_runner_on_another_machine_is_refused_too(make_runner, pg_url, tmp_path, monkeypatch):
    # Each runner has its own lock folder (another machine): only the advisory lock keeps them apart.
    await refused_then_takes_over(make_runner, pg_url, tmp_path, monkeypatch, [tmp_path / "m1", tmp_path / "m2"])


async def refused_then_takes_over(make_runner: Any, db_url: str, tmp_path: Path, monkeypatch: Any,
                                  dirs: list[Path | None]) -> None:
    token = f"tok-{uuid.uuid4().hex}"
    first, _ = await make_runner({"database": {"url": db_url}}, adapters=[locked_adapter(token, dirs[0])])
    await wait_until(lambda: first.adapters["locked"].state == "connected")
    monkeypatch.setenv("HERALD_HOME", str(tmp_path / "home2"))
    second, _ = await make_runner({"database": {"url": db_url}},
                                  adapters=[locked_adapter(token, dirs[1]), QAAdapter])
    locked = second.adapters["locked"]
    await wait_until(lambda: locked.state == "retrying")
    ready, states = second.readiness()
    assert not ready
    assert states["locked"]["error"] == "CredentialLocked"  # the class only: /readyz is unauthenticated
    detail = second.readiness(detail=True)[1]["locked"]["last_error"]
    assert f"pid {os.getpid()}, profile default, host {socket.gethostname()}" in detail
    assert states["qa"]["state"] == "connected"  # the rest of the daemon runs
    await asyncio.sleep(0.5)  # its retries (every 0.3 s) are refused as the first was
    # ("starting" is a retry caught in its attempt)
    assert locked.state in ("retrying", "starting") and first.adapters["locked"].state == "connected"
    assert second.readiness()[1]["locked"]["error"] == "CredentialLocked"
    await first.shutdown()
    await wait_until(lambda: locked.state == "connected", timeout=15)
    assert second.readiness()[0]
