"""End-to-end encryption against the fake homeserver's key server: a person's own nio client (keys on disk) and the
bot with ``encryption: true``. The question is read, the answer goes back encrypted; a message whose room key
comes late waits for it, and the saved sync position stays before it meanwhile, across a restart too."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.storage.store import Store
from tests.fakes.matrix_api import BOT, FakeMatrix
from tests.platforms.matrix.conftest import ALICE, Factory
from tests.support.polling import wait_until


@pytest.fixture
async def alice(fake_mx: FakeMatrix, tmp_path: Path) -> AsyncIterator[Any]:
    from nio import AsyncClient, AsyncClientConfig

    store = tmp_path / "alice-store"
    store.mkdir()
    client = AsyncClient(fake_mx.url, ALICE, device_id="ALICEDEV", store_path=str(store),
                         config=AsyncClientConfig(encryption_enabled=True))
    client.restore_login(ALICE, "ALICEDEV", fake_mx.token_for(ALICE, "ALICEDEV"))
    await client.keys_upload()
    yield client
    await client.close()


async def say(client: Any, room: str, text: str) -> None:
    await client.sync(timeout=0, full_state=True)
    if client.should_query_keys:
        await client.keys_query()
    await client.room_send(room, "m.room.message", {"msgtype": "m.text", "body": text},
                           ignore_unverified_devices=True)


async def answer(client: Any, room: str, text: str, timeout: float = 20) -> str:
    """The bot's answer ending in ``text``, decrypted by the person's client (it must have come encrypted)."""
    from nio import RoomMessageNotice, RoomMessageText

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = await client.sync(timeout=500)
        info = response.rooms.join.get(room) if hasattr(response, "rooms") else None
        for event in info.timeline.events if info else []:
            if isinstance(event, RoomMessageText | RoomMessageNotice) and event.sender == BOT \
                    and event.body.endswith(text):
                assert event.decrypted, "the bot answered in the clear in an encrypted room"
                return str(event.body)
    raise AssertionError(f"no answer to {text!r}")


async def test_an_encrypted_question_is_read_and_answered_encrypted(start_mx: Factory, fake_mx: FakeMatrix,
                                                                  alice: Any, home: Path) -> None:
    room = fake_mx.room([ALICE, BOT], encrypted=True)
    await start_mx(encryption=True)
    await say(alice, room, "a secret")
    assert await answer(alice, room, "a secret") == "echo: a secret"
    assert fake_mx.sent == []  # nothing the homeserver could read: every message of the bot's was encrypted
    store = home / "matrix-store"
    assert [p.stat().st_mode & 0o777 for p in store.iterdir()] == [0o600] * len(list(store.iterdir()))


async def test_a_message_whose_key_comes_late_waits_for_it_and_holds_the_saved_position_across_a_restart(
        start_mx: Factory, fake_mx: FakeMatrix, alice: Any) -> None:
    room = fake_mx.room([ALICE, BOT], encrypted=True)
    first = await start_mx(encryption=True)
    fake_mx.hold_to_device(BOT)  # the room key is on its way, but not here yet
    await say(alice, room, "patience")
    [event_id] = [e for e, (r, _p, ev) in fake_mx.events.items() if r == room and ev["type"] == "m.room.encrypted"]
    position = fake_mx.events[event_id][1]
    sync = first.adapters["matrix"].sync  # type: ignore[attr-defined]
    await wait_until(lambda: int(sync.position[1:]) >= position, what="the sync moved on past the message")
    assert sync.hold is not None
    url = first.store.url
    await first.shutdown()
    store = Store(url)
    await store.init()
    try:
        saved = (await store.cursors.load("matrix"))[BOT]
    finally:
        await store.close()
    assert int(saved[1:]) < position  # held before it: the next start reads it again
    fake_mx.release_to_device(BOT)
    await start_mx(encryption=True)
    assert await answer(alice, room, "patience") == "echo: patience"
    await say(alice, room, "and again")
    assert await answer(alice, room, "and again") == "echo: and again"


async def test_a_message_whose_key_never_comes_is_given_up_on_with_a_word_and_the_position_moves_on(
        start_mx: Factory, fake_mx: FakeMatrix, alice: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.platforms.matrix import crypto
    from gateway.platforms.matrix.adapter import CANNOT_DECRYPT

    monkeypatch.setattr(crypto, "KEY_WAIT", 0.0)  # given up on at the first look after the sync that held it
    room = fake_mx.room([ALICE, BOT], encrypted=True)
    runner = await start_mx(encryption=True)
    fake_mx.hold_to_device(BOT)
    await say(alice, room, "lost key")
    assert await answer(alice, room, CANNOT_DECRYPT[-30:]) == CANNOT_DECRYPT
    sync = runner.adapters["matrix"].sync  # type: ignore[attr-defined]
    [lost] = [p for r, p, ev in fake_mx.events.values() if r == room and ev["sender"] == ALICE
              and ev["type"] == "m.room.encrypted"]
    assert sync.hold is None and int(sync.position[1:]) >= lost
