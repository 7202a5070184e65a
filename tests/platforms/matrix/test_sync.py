"""The sync token's rule against the fake homeserver: the position moves (and is saved) only past events the inbox
holds, a restart answers what came meanwhile once, the first start answers no history, a gap is read back."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from gateway.kernel.faults import Unavailable
from gateway.storage.store import Store
from gateway.storage.tables import inbox
from tests.fakes.llm import FakeLLM
from tests.fakes.matrix_api import BOT, FakeMatrix
from tests.platforms.matrix.conftest import ALICE, Factory, answered, model_calls
from tests.support.polling import wait_until


async def saved_position(runner: Any) -> str | None:
    return (await runner.store.cursors.load("matrix")).get(BOT)


async def stored_position(url: str) -> str | None:
    """The position a stopped daemon left in its database."""
    store = Store(url)
    await store.init()
    try:
        return (await store.cursors.load("matrix")).get(BOT)
    finally:
        await store.close()


async def test_the_first_start_answers_no_history_and_saves_where_it_began(start_mx: Factory, fake_mx: FakeMatrix,
                                                                         fake_llm: FakeLLM) -> None:
    room = fake_mx.dm(ALICE)
    fake_mx.user_message(room, ALICE, "from before the bot was here")
    runner = await start_mx()
    assert fake_mx.sync_calls[0]["since"] is None  # an initial sync, its timeline not read
    await wait_until(lambda: saved_position(runner), what="the first position saved")
    fake_mx.user_message(room, ALICE, "now")
    await fake_mx.wait_sent(answered("echo: now"))
    assert model_calls(fake_llm, "from before the bot was here") == 0
    assert fake_mx.texts(room) == ["echo: now"]


async def test_a_restart_answers_what_came_meanwhile_once_and_syncs_from_the_saved_position(
        start_mx: Factory, fake_mx: FakeMatrix, fake_llm: FakeLLM) -> None:
    room = fake_mx.dm(ALICE)
    first = await start_mx()
    asked = fake_mx.user_message(room, ALICE, "before the restart")
    await fake_mx.wait_sent(answered("echo: before the restart"))
    url = first.store.url
    await first.shutdown()
    position = await stored_position(url)
    assert position is not None and int(position[1:]) >= fake_mx.events[asked["event_id"]][1]
    fake_mx.user_message(room, ALICE, "while it was down")
    second = await start_mx()
    resumed = [c for c in fake_mx.sync_calls if c["since"] is not None and c["full_state"]]
    assert resumed and resumed[-1]["since"] == int(position[1:])  # from where the first left off, state again
    await fake_mx.wait_sent(answered("echo: while it was down"))
    fake_mx.user_message(room, ALICE, "after")
    await fake_mx.wait_sent(answered("echo: after"))
    assert fake_mx.texts(room) == ["echo: before the restart", "echo: while it was down", "echo: after"]
    assert model_calls(fake_llm, "before the restart") == 1 and second.counters.messages_duplicate == 0


async def test_the_position_does_not_pass_a_message_the_inbox_could_not_take(start_mx: Factory, fake_mx: FakeMatrix,
                                                                           monkeypatch: Any) -> None:
    room = fake_mx.dm(ALICE)
    runner = await start_mx()
    real_add = runner.store.inbox.add
    refused: list[str] = []

    async def down_twice(platform: str, platform_message_id: str, *args: Any, **kw: Any) -> Any:
        if platform_message_id.endswith(event_id) and len(refused) < 2:
            refused.append(platform_message_id)
            raise Unavailable("database", "database_unavailable", "database unavailable")
        return await real_add(platform, platform_message_id, *args, **kw)

    monkeypatch.setattr(runner.store.inbox, "add", down_twice)
    event_id = fake_mx.user_message(room, ALICE, "kept for later")["event_id"]
    position = fake_mx.events[event_id][1]
    await fake_mx.wait_sent(answered("echo: kept for later"), timeout=15)
    assert len(refused) == 2
    # Asked again from before the message until the inbox took it: never from past it while it was refused.
    after = [c for c in fake_mx.sync_calls if c["since"] is not None and c["since"] >= position]
    refusing = [c for c in fake_mx.sync_calls if c["since"] is not None and c["since"] < position
                and c["at"] > fake_mx.handed_out[event_id]]
    assert len(refusing) >= 2 and after and after[0]["at"] > refusing[-1]["at"]
    assert fake_mx.texts(room).count("echo: kept for later") == 1


async def test_a_gap_longer_than_the_timeline_limit_is_read_back_whole(start_mx: Factory, fake_mx: FakeMatrix,
                                                                     fake_llm: FakeLLM) -> None:
    room = fake_mx.room([ALICE, "@bob:fake.test", BOT], name="busy")  # a room: only mentions are taken
    first = await start_mx()
    await first.shutdown()
    for i in range(70):  # more than the sync filter's timeline limit (50)
        fake_mx.user_message(room, ALICE, f"note {i}", mention=i % 10 == 0)
    second = await start_mx()
    rows = await wait_until(lambda: _rows(second, 7), what="the seven mentions in the inbox")
    assert sorted(r["payload"]["text"] for r in rows) == sorted(f"note {i}" for i in range(0, 70, 10))
    assert room in fake_mx.read_back  # paged through /messages: the sync's timeline held only the last 50


async def _rows(runner: Any, count: int) -> list[dict[str, Any]] | None:
    rows = await runner.store.run_read(
        lambda c: [dict(r._mapping) for r in c.execute(select(inbox).where(inbox.c.platform == "matrix"))])
    return rows if len(rows) >= count else None


async def test_the_position_is_saved_under_the_account_so_another_account_starts_afresh(
        start_mx: Factory, fake_mx: FakeMatrix) -> None:
    room = fake_mx.dm(ALICE)
    runner = await start_mx()
    asked = fake_mx.user_message(room, ALICE, "hello")
    await fake_mx.wait_sent(answered("echo: hello"))
    await wait_until(lambda: _saved_past(runner, fake_mx.events[asked["event_id"]][1]),
                     what="the position saved past the message")
    assert set(await runner.store.cursors.load("matrix")) == {BOT}
    # The bot's own events never come back in its syncs (the filter leaves them out): no wake-up per answer.
    assert asked["event_id"] in fake_mx.handed_out and fake_mx.sent[-1].event_id not in fake_mx.handed_out


async def _saved_past(runner: Any, position: int) -> bool:
    saved = await saved_position(runner)
    return saved is not None and int(saved[1:]) >= position


async def test_a_homeserver_in_trouble_makes_the_adapter_retry_and_lose_nothing(start_mx: Factory,
                                                                              fake_mx: FakeMatrix) -> None:
    room = fake_mx.dm(ALICE)
    runner = await start_mx()
    mx = runner.adapters["matrix"]
    fake_mx.fail("sync", "500", times=2)
    fake_mx.fail("sync", "429", times=1, retry_after_ms=300)
    fake_mx.user_message(room, ALICE, "through the trouble")
    await wait_until(lambda: mx.state == "retrying", what="the adapter retrying")
    await fake_mx.wait_sent(answered("echo: through the trouble"), timeout=30)
    await wait_until(lambda: mx.state == "connected", what="connected again")
    assert fake_mx.texts(room) == ["echo: through the trouble"]


async def test_a_token_revoked_while_running_restarts_the_adapter_which_says_why(start_mx: Factory,
                                                                               fake_mx: FakeMatrix) -> None:
    # The message that wakes the long poll has its turn: its answer cannot go out with the token refused, and a
    # shutdown waits out the drain for it (30 s by default) before leaving it to the next start.
    runner = await start_mx(extra={"gateway": {"drain_seconds": 1}})
    mx = runner.adapters["matrix"]
    del fake_mx.tokens[fake_mx.bot_token]  # logged out elsewhere
    fake_mx.user_message(fake_mx.dm(ALICE), ALICE, "anyone?")  # wakes the long poll
    await wait_until(lambda: "refused the access token" in (mx.last_error or ""), timeout=15,
                     what="the refusal named")
    assert mx.state == "retrying"
