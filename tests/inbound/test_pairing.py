"""Pairing codes: issuance limits, expiry, lockout (time injected), and the whole flow through the runner."""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from gateway.inbound.pairing import (
    ALPHABET,
    APPROVED_TEXT,
    CODE_TTL,
    LOCKOUT,
    USER_INTERVAL,
    Pairing,
    pairing_codes,
)
from gateway.runner import GatewayRunner  # noqa: F401 - every table defined before Store.init
from gateway.storage.store import Store
from tests.support.qa_channel import UntrustedQAAdapter

T0 = 1_800_000_000.0
CODE = re.compile(r"pairing code: ([A-Z0-9]{8})")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def pairing(db_url: str) -> AsyncIterator[tuple[Pairing, Clock]]:
    store = Store(db_url)
    await store.init()
    clock = Clock()
    yield Pairing(store, clock), clock
    await store.close()


async def code_for(p: Pairing, user: str, platform: str = "telegram") -> str:
    result = await p.request_code(platform, user, f"chat-{user}", f"name-{user}")
    assert result.outcome == "code" and result.code is not None, result
    return result.code


async def test_codes_are_8_unambiguous_characters_and_stored_only_hashed(pairing):
    p, _ = pairing
    code = await code_for(p, "u1")
    assert len(code) == 8 and set(code) <= set(ALPHABET)
    assert not set(code) & set("0O1IL")
    rows = await p.store.run_read(lambda c: [dict(r._mapping) for r in c.execute(select(pairing_codes))])
    assert len(rows) == 1 and rows[0]["code_hash"] == hashlib.sha256(code.encode()).hexdigest()
    assert code not in repr(rows)
    # What `herald pairing list` shows has no code in it either.
    assert code not in repr(await p.pending())
    # Typed loosely (lower case, spaces, dashes) it still matches.
    loose = f"{code[:4].lower()} - {code[4:]}"
    assert (await p.approve("telegram", loose, "cli")).outcome == "approved"


async def test_one_new_code_per_user_per_10_minutes_and_the_newer_replaces_the_older(pairing):
    p, clock = pairing
    first = await code_for(p, "u1")
    clock.now += USER_INTERVAL - 1
    assert (await p.request_code("telegram", "u1", "c", None)).outcome == "wait"
    clock.now += 2
    second = await code_for(p, "u1")
    assert second != first
    assert (await p.approve("telegram", first, "cli")).outcome in ("invalid", "expired")
    assert (await p.approve("telegram", second, "cli")).user_id == "u1"


async def test_at_most_three_codes_wait_per_platform(pairing):
    p, clock = pairing
    for user in ("a", "b", "c"):
        await code_for(p, user)
    assert (await p.request_code("telegram", "d", "c", None)).outcome == "full"
    await code_for(p, "d", platform="discord")  # another platform has its own limit
    assert len(await p.pending()) == 4
    clock.now += CODE_TTL + 1  # the waiting ones expire and free their places
    assert await p.pending() == []
    await code_for(p, "d")


async def test_codes_expire_after_an_hour(pairing):
    p, clock = pairing
    early, late = await code_for(p, "early"), await code_for(p, "late")
    clock.now += CODE_TTL - 1
    assert (await p.approve("telegram", early, "cli")).outcome == "approved"
    clock.now += 2
    result = await p.approve("telegram", late, "cli")
    assert result.outcome == "expired" and result.user_id is None
    assert [r["user_id"] for r in await p.paired()] == ["early"]


async def test_a_code_only_works_on_its_own_platform_and_only_once(pairing):
    p, _ = pairing
    code = await code_for(p, "u1")
    assert (await p.approve("discord", code, "cli")).outcome == "invalid"
    assert (await p.approve("telegram", code, "cli")).outcome == "approved"
    assert (await p.approve("telegram", code, "cli")).outcome == "invalid"


async def test_five_failed_approvals_within_an_hour_lock_the_platform_for_an_hour(pairing):
    p, clock = pairing
    code = await code_for(p, "u1")
    for n in range(1, 5):
        result = await p.approve("telegram", "WRONG234", "cli")
        assert result.outcome == "invalid" and result.failures == n
        clock.now += 60
    assert (await p.approve("telegram", "WRONG234", "cli")).outcome == "locked"
    # Locked: even the right code is refused, and no new codes are handed out there.
    assert (await p.approve("telegram", code, "cli")).outcome == "locked"
    assert (await p.request_code("telegram", "u2", "c", None)).outcome == "locked"
    assert (await p.request_code("discord", "u2", "c", None)).outcome == "code"  # other platforms unaffected
    assert "telegram" in await p.lockouts()
    clock.now += LOCKOUT + 1
    assert await p.lockouts() == {}
    assert (await p.approve("telegram", await code_for(p, "u3"), "cli")).outcome == "approved"


async def test_failures_spread_over_more_than_an_hour_do_not_lock(pairing):
    p, clock = pairing
    for _ in range(4):
        assert (await p.approve("telegram", "WRONG234", "cli")).outcome == "invalid"
    clock.now += 3601
    assert (await p.approve("telegram", "WRONG234", "cli")).outcome == "invalid"


async def test_clear_drops_waiting_codes_and_lifts_the_lock_revoke_removes_a_user(pairing):
    p, _ = pairing
    code = await code_for(p, "u1")
    await p.approve("telegram", code, "cli")
    await code_for(p, "u2")
    for _ in range(5):
        await p.approve("telegram", "WRONG234", "cli")
    assert await p.lockouts()
    assert await p.clear() == 1
    assert await p.pending() == [] and await p.lockouts() == {}
    assert [r["user_id"] for r in await p.paired()] == ["u1"]  # clear leaves paired users alone
    assert await p.revoke("telegram", "u1") is True
    assert await p.revoke("telegram", "u1") is False
    assert await p.paired() == []


# ---------------------------------------------------------------------------------------------- the flow


BOSS, STRANGER = "boss", "stranger"


async def start(make_runner: Any, **kw: Any) -> tuple[Any, UntrustedQAAdapter]:
    return await make_runner({"access": {"admins": [f"qa2:{BOSS}"]}}, adapters=[UntrustedQAAdapter], **kw)


async def code_sent_to(qa: UntrustedQAAdapter, chat: str) -> str:
    texts = await qa.wait_for(lambda t: any(CODE.search(x) for x in t), chat_id=chat)
    match = next(CODE.search(x) for x in texts if CODE.search(x))
    assert match is not None
    return match.group(1)


async def test_stranger_pairs_through_an_admins_pair_command_and_stays_allowed_after_a_restart(
        make_runner, fake_llm):
    runner, qa = await start(make_runner)
    for n in range(5):  # a burst: one code, no spam
        await qa.say(f"let me in {n}", chat_id="dm-s", user_id=STRANGER)
    code = await code_sent_to(qa, "dm-s")
    await asyncio.sleep(0.2)
    assert len(qa.texts("dm-s")) == 1
    assert f"herald pairing approve qa2 {code}" in qa.texts("dm-s")[0]

    await qa.say(f"/pair {code}", chat_id="dm-boss", user_id=BOSS)
    await qa.wait_for(lambda t: any("Paired qa2 user stranger" in x for x in t), chat_id="dm-boss")
    await qa.wait_for(lambda t: APPROVED_TEXT in t, chat_id="dm-s")
    await qa.say("now?", chat_id="dm-s", user_id=STRANGER)
    await qa.wait_for(lambda t: "echo: now?" in t, chat_id="dm-s")
    assert all("let me in" not in str(r["messages"]) for r in fake_llm.requests)

    await runner.shutdown()
    _runner2, qa2 = await start(make_runner)
    await qa2.say("still me", chat_id="dm-s", user_id=STRANGER, message_id="after-restart")
    await qa2.wait_for(lambda t: "echo: still me" in t, chat_id="dm-s")
    assert APPROVED_TEXT not in qa2.texts()  # told once, not at every start


@pytest.mark.slow
async def test_cli_approval_from_another_process_lets_the_user_in_within_seconds_and_revoke_shuts_them_out(
        make_runner, fake_llm):
    from gateway.cli import app

    runner, qa = await start(make_runner)
    await qa.say("hello?", chat_id="dm-s", user_id=STRANGER)
    code = await code_sent_to(qa, "dm-s")
    cli = CliRunner()
    result = await asyncio.to_thread(cli.invoke, app, ["pairing", "approve", "qa2", code])
    assert result.exit_code == 0, result.output
    listed = await asyncio.to_thread(cli.invoke, app, ["pairing", "list", "--json"])
    assert '"user_id": "stranger"' in listed.output and code not in listed.output
    await qa.wait_for(lambda t: APPROVED_TEXT in t, chat_id="dm-s")
    await qa.say("in now", chat_id="dm-s", user_id=STRANGER)
    await qa.wait_for(lambda t: "echo: in now" in t, chat_id="dm-s")

    result = await asyncio.to_thread(cli.invoke, app, ["pairing", "revoke", "qa2", STRANGER])
    assert result.exit_code == 0, result.output
    deadline = asyncio.get_running_loop().time() + 10
    while runner.access.allowed(qa_source()):
        assert asyncio.get_running_loop().time() < deadline, "revocation never reached the daemon"
        await asyncio.sleep(0.05)
    denied = runner.counters.messages_denied
    await qa.say("and now?", chat_id="dm-s", user_id=STRANGER)
    assert runner.counters.messages_denied == denied + 1


def qa_source() -> Any:
    from gateway.platforms.base import Source

    return Source("qa2", "dm-s", STRANGER)


async def test_pending_limit_and_lockout_each_answer_a_stranger_once(make_runner, fake_llm):
    runner, qa = await start(make_runner)
    clock = Clock()
    runner.pairing.clock = runner.pairing.pairing.clock = clock
    for user in ("s1", "s2", "s3"):
        await qa.say("hi", chat_id=f"dm-{user}", user_id=user)
        await code_sent_to(qa, f"dm-{user}")
    for _ in range(3):
        await qa.say("hi", chat_id="dm-s4", user_id="s4")
    await qa.wait_for(lambda t: len(t) == 1, chat_id="dm-s4")
    await asyncio.sleep(0.2)
    assert qa.texts("dm-s4") == ["⏳ Too many pairing requests are waiting; try again later."]

    for n in range(5):
        await qa.say("/pair WRONG234", chat_id="dm-boss", user_id=BOSS)
        await qa.wait_for(lambda t, n=n: len(t) == n + 1, chat_id="dm-boss")
    assert "locked" in qa.texts("dm-boss")[-1]
    clock.now += USER_INTERVAL + 1  # s4 may ask again, but pairing is locked now
    for _ in range(3):
        await qa.say("again", chat_id="dm-s4", user_id="s4")
    await qa.wait_for(lambda t: len(t) == 2, chat_id="dm-s4")
    await asyncio.sleep(0.2)
    assert qa.texts("dm-s4")[1].startswith("🔒 Pairing is paused")
    assert len(qa.texts("dm-s4")) == 2
    assert fake_llm.requests == []
