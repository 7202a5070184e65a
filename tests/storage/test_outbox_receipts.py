"""Receipts on the outbox (gateway/storage/outbox.py): what a platform says later of a message it took (delivered,
read, failed) lands on the row that holds the message's id, the furthest state winning; a failure fails the row
(the dashboard's list of failed deliveries shows it); a message sent again under new ids keeps its row."""

from __future__ import annotations

from sqlalchemy import select

from gateway.ops.dashboard.data import delivery_failures
from gateway.storage.store import Store
from gateway.storage.tables import outbox


async def _row(store: Store, row_id: int) -> dict:
    rows = await store.run_read(
        lambda c: [dict(r._mapping) for r in c.execute(select(outbox).where(outbox.c.id == row_id))])
    return rows[0]


async def test_receipts_move_forward_only_and_a_failure_is_shown(db_url: str) -> None:
    store = Store(db_url)
    await store.init()
    try:
        one = await store.outbox.begin(None, "chat", "+1555", 0, key="k1")
        await store.outbox.finish(one, "sent", ["wamid.A"], None, None, None)
        two = await store.outbox.begin(None, "chat", "+1555", 1, key="k2")
        await store.outbox.finish(two, "sent", ["wamid.B1", "wamid.B2", "wamid.B3"], None, None, None)
        other = await store.outbox.begin(None, "elsewhere", "+1555", 0, key="k3")
        await store.outbox.finish(other, "sent", ["wamid.A"], None, None, None)

        assert await store.outbox.receipt("chat", "wamid.A", "delivered")
        assert await store.outbox.receipt("chat", "wamid.A", "read")
        assert await store.outbox.receipt("chat", "wamid.A", "delivered")  # late: changes nothing
        row = await _row(store, one)
        assert (row["receipt"], row["status"]) == ("read", "sent")
        assert (await _row(store, other))["receipt"] is None  # the same id on another platform is another message

        # One of a chunk's several ids; one that only looks like it (a LIKE wildcard) is not it.
        assert await store.outbox.receipt("chat", "wamid.B2", "delivered")
        assert not await store.outbox.receipt("chat", "wamid_B2", "delivered")
        assert not await store.outbox.receipt("chat", "wamid.B", "delivered")
        assert (await _row(store, two))["receipt"] == "delivered"
        assert await store.outbox.receipt("chat", "wamid.B3", "failed", "the person blocked the number")
        row = await _row(store, two)
        assert (row["receipt"], row["status"], row["error"]) == ("failed", "failed", "the person blocked the number")
        failures = await store.run_read(delivery_failures)
        assert [(f["where"], f["error"]) for f in failures] == [("chat:+1555", "the person blocked the number")]

        assert not await store.outbox.receipt("chat", "wamid.unknown", "read")
    finally:
        await store.close()


async def test_a_message_sent_again_in_another_form_keeps_its_row(db_url: str) -> None:
    store = Store(db_url)
    await store.init()
    try:
        row_id = await store.outbox.begin(None, "chat", "+1555", 0, key="k1")
        await store.outbox.finish(row_id, "sent", ["wamid.X", "wamid.Y"], None, None, None)
        assert await store.outbox.receipt("chat", "wamid.Y", "delivered")
        assert await store.outbox.replace("chat", "wamid.Y", ["wamid.T1", "wamid.T2"])
        row = await _row(store, row_id)
        assert row["platform_message_id"] == "wamid.X wamid.T1 wamid.T2"
        assert (row["status"], row["receipt"]) == ("sent", None)
        assert await store.outbox.receipt("chat", "wamid.T2", "read")
        assert not await store.outbox.replace("chat", "wamid.gone", ["wamid.Z"])
    finally:
        await store.close()


async def test_one_of_several_ids_is_looked_for_among_the_newest_rows_only(db_url: str, monkeypatch) -> None:
    """The LIKE search for an id among a chunk's several is bounded to the newest rows: a receipt that finds
    nothing (one that outran its send's record, asked again a few times) must not scan the whole outbox in the
    writer thread each time."""
    from gateway.storage import outbox as outbox_store

    monkeypatch.setattr(outbox_store, "SEVERAL_IDS_WITHIN", 3)
    store = Store(db_url)
    await store.init()
    try:
        old = await store.outbox.begin(None, "chat", "+1555", 0, key="old")
        await store.outbox.finish(old, "sent", ["wamid.O1", "wamid.O2"], None, None, None)
        for n in range(3):
            row = await store.outbox.begin(None, "chat", "+1555", 0, key=f"k{n}")
            await store.outbox.finish(row, "sent", [f"wamid.{n}"], None, None, None)
        recent = await store.outbox.begin(None, "chat", "+1555", 0, key="recent")
        await store.outbox.finish(recent, "sent", ["wamid.R1", "wamid.R2"], None, None, None)

        assert await store.outbox.receipt("chat", "wamid.R2", "delivered")
        assert (await _row(store, recent))["receipt"] == "delivered"
        assert not await store.outbox.receipt("chat", "wamid.O2", "delivered")  # four rows back: outside
        assert (await _row(store, old))["receipt"] is None
        assert await store.outbox.receipt("chat", "wamid.O1", "delivered") is False
        assert await store.outbox.receipt("chat", "wamid.0", "read")  # a whole column: found at any age
    finally:
        await store.close()
