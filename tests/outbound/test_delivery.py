from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select, update

from gateway.kernel.chunking import chunk_text, to_plain, utf16_len
from gateway.outbound.delivery import Delivery
from gateway.platforms.base import FormattingError, OutboundMessage, PermanentError, RateLimited, TransientError
from gateway.storage.store import Store
from gateway.storage.tables import inbox, outbox


@pytest.mark.parametrize("limit", [50, 120, 400])
def test_chunks_fit_and_keep_code_blocks_balanced(limit):
    code = "\n".join(f"line_{i} = {i} * 2" for i in range(60))
    text = "Intro paragraph with words. " * 10 + "\n\n```python\n" + code + "\n```\n\nAfter the code. " * 3
    chunks = chunk_text(text, limit)
    assert len(chunks) > 1
    for c in chunks:
        assert len(c) <= limit
        assert c.count("```") % 2 == 0, c
    joined = "".join(chunks)
    for i in range(60):
        assert f"line_{i} = {i} * 2" in joined


def test_chunks_measure_utf16_units():
    text = "😀" * 3000  # 2 UTF-16 units each
    chunks = chunk_text(text, 4096, utf16_len)
    assert all(utf16_len(c) <= 4096 for c in chunks)
    assert "".join(chunks) == text


def test_short_text_is_one_chunk_and_nothing_is_lost():
    assert chunk_text("hi", 10) == ["hi"]
    words = " ".join(f"w{i}" for i in range(500))
    assert "".join(chunk_text(words, 100)).split() == words.split()


def test_plain_keeps_the_words():
    assert to_plain("**bold** and `code` and [link](http://x)") == "bold and code and link (http://x)"


@pytest.fixture
async def store(tmp_path):
    store = Store(f"sqlite+aiosqlite:///{tmp_path / 'd.db'}")
    await store.init()
    yield store
    await store.close()


async def outbox_rows(store):
    async with store.engine.connect() as conn:
        return [dict(r._mapping) for r in await conn.execute(select(outbox).order_by(outbox.c.id))]


class Recorder:
    name = "rec"

    def __init__(self, caps=None):
        from gateway.platforms.base import Capabilities

        self.capabilities = caps or Capabilities(max_message_length=100)
        self.sent = []
        self.keys = []
        self.failures = {}

    def render(self, markdown):
        return markdown

    def measure(self, text):
        return len(text)

    async def send(self, chat_id, text, message, *, idempotency_key=None):
        plan = self.failures.get(chat_id)
        if plan:
            exc = plan.pop(0)
            if exc is not None:
                raise exc
        self.sent.append((chat_id, text))
        self.keys.append(idempotency_key)
        return [f"id{len(self.sent)}"]


async def test_rate_limit_on_one_chat_does_not_hold_up_another(store):
    adapter = Recorder()
    adapter.failures["slow"] = [RateLimited(0.5)]
    delivery = Delivery(store)
    slow = asyncio.create_task(delivery.deliver(adapter, "slow", OutboundMessage("for slow"), inbox_id=1))
    await asyncio.sleep(0.05)
    await delivery.deliver(adapter, "fast", OutboundMessage("for fast"), inbox_id=2)
    assert adapter.sent == [("fast", "for fast")]
    report = await slow
    assert not report.failed
    assert adapter.sent[-1] == ("slow", "for slow")


async def test_transient_errors_are_retried_through_an_outage_then_recorded_as_failed(store):
    """An outage is bounded by time (``max_outage``), not a count: six attempts (~30 s) once lost every reply of
    a longer one. Past the budget the chunk is recorded as failed (shown on the dashboard), never dropped."""
    adapter = Recorder()
    adapter.failures["c"] = [TransientError("net down")] * 40
    delivery = Delivery(store, base_delay=0.001, max_delay=0.002, max_outage=1.0)
    report = await delivery.deliver(adapter, "c", OutboundMessage("after"), inbox_id=6)
    assert not report.failed and adapter.sent == [("c", "after")]  # 40 failures in a row, then through
    adapter.sent.clear()
    adapter.failures["c"] = [TransientError("net down")] * 1000
    delivery = Delivery(store, base_delay=0.01, max_delay=0.02, max_outage=0.2)
    report = await delivery.deliver(adapter, "c", OutboundMessage("x"), inbox_id=7)
    assert report.failed and "gave up" in report.error
    assert (await outbox_rows(store))[-1]["status"] == "failed"
    adapter.failures["c"] = [TransientError("blip")]
    report = await delivery.deliver(adapter, "c", OutboundMessage("y"), inbox_id=8)
    assert not report.failed and adapter.sent == [("c", "y")]


async def test_a_long_stretch_of_short_rate_limits_is_waited_out_and_a_time_budget_bounds_it(store):
    """A minute of 429s with retry_after 1 used to give a reply up after 12 attempts (lost); the bound is the
    time spent waiting (``max_rate_wait``), and each 429 is counted as a fault."""
    from gateway.kernel.faults import Faults

    faults = Faults()
    adapter = Recorder()
    adapter.failures["c"] = [RateLimited(0.001)] * 30
    delivery = Delivery(store, faults=faults)
    report = await delivery.deliver(adapter, "c", OutboundMessage("x"), inbox_id=1)
    assert not report.failed and adapter.sent == [("c", "x")]
    assert faults.recent() == {"platform_rate_limited": 30}
    adapter.failures["c"] = [RateLimited(0.2)] * 10
    report = await Delivery(store, max_rate_wait=0.5).deliver(adapter, "c", OutboundMessage("y"), inbox_id=2)
    assert report.failed and "still rate limited" in report.error


async def test_permanent_error_is_not_retried(store):
    adapter = Recorder()
    adapter.failures["c"] = [PermanentError("blocked by the user"), None]
    report = await Delivery(store).deliver(adapter, "c", OutboundMessage("x"), inbox_id=1)
    assert report.failed and report.error == "blocked by the user"
    assert adapter.sent == []


async def test_formatting_rejection_resends_the_same_words_plain(store):
    adapter = Recorder()
    adapter.failures["c"] = [FormattingError("can't parse entities")]
    report = await Delivery(store).deliver(adapter, "c", OutboundMessage("**all** the words"), inbox_id=1)
    assert not report.failed
    assert adapter.sent == [("c", "all the words")]


async def test_chunks_already_sent_are_skipped(store):
    adapter = Recorder()
    text = "a" * 50 + "\n\n" + "b" * 50
    inbox_id = await store.inbox.add("rec", "p1", "k", {})
    await store.inbox.mark(inbox_id, "replied")
    await store.outbox.record(inbox_id, "rec", "c", 0, "old", "sent")
    await Delivery(store).deliver(adapter, "c", OutboundMessage(text), inbox_id=inbox_id, resume=True,
                                  finish_inbox=True)
    assert [t for _, t in adapter.sent] == ["b" * 50]
    assert (await store.inbox.get(inbox_id))["status"] == "done"
    assert [r["chunk_index"] for r in await outbox_rows(store)] == [0, 1]


async def test_last_chunk_and_inbox_done_commit_together(store):
    adapter = Recorder()
    inbox_id = await store.inbox.add("rec", "p2", "k", {})
    await store.inbox.mark(inbox_id, "replied")
    report = await Delivery(store).deliver(adapter, "c", OutboundMessage("one"), inbox_id=inbox_id, finish_inbox=True)
    assert report.message_ids == ["id1"]
    assert (await store.inbox.get(inbox_id))["status"] == "done"
    adapter.failures["c"] = [PermanentError("chat not found")]
    failed_id = await store.inbox.add("rec", "p3", "k", {})
    await store.inbox.mark(failed_id, "replied")
    await Delivery(store).deliver(adapter, "c", OutboundMessage("two"), inbox_id=failed_id, finish_inbox=True)
    row = await store.inbox.get(failed_id)
    assert row["status"] == "failed" and row["error"] == "chat not found"


async def test_each_chunk_is_marked_sending_before_it_goes_out(store):
    """The outbox says "sending" while the platform call is in flight, "sent" (with its ids) after."""
    seen: list[list[str]] = []

    class Watching(Recorder):
        async def send(self, chat_id, text, message, *, idempotency_key=None):
            seen.append([r["status"] for r in await outbox_rows(store)])
            return await super().send(chat_id, text, message, idempotency_key=idempotency_key)

    adapter = Watching()
    inbox_id = await store.inbox.add("rec", "p4", "k", {})
    await store.inbox.mark(inbox_id, "replied")
    await Delivery(store).deliver(adapter, "c", OutboundMessage("a" * 60 + "\n\n" + "b" * 60), inbox_id=inbox_id,
                                  finish_inbox=True)
    assert seen == [["sending"], ["sent", "sending"]]
    assert [r["status"] for r in await outbox_rows(store)] == ["sent", "sent"]
    assert (await store.inbox.get(inbox_id))["status"] == "done"


@pytest.mark.parametrize("idempotent", [True, False])
async def test_a_chunk_cut_off_mid_send_is_resent_with_its_key_or_announced(store, idempotent):
    """After a crash a "sending" chunk may or may not be out: it goes again with the same idempotency key;
    where the platform can't de-duplicate with it, the user is told first that it may repeat."""
    from gateway.outbound.delivery import MAYBE_REPEATED
    from gateway.platforms.base import Capabilities

    inbox_id = await store.inbox.add("rec", "p5", "k", {})
    await store.inbox.mark(inbox_id, "replied")
    adapter = Recorder(Capabilities(max_message_length=100, idempotent_send=idempotent))

    class Crash(Exception):
        pass

    adapter.failures["c"] = [Crash()]  # the process dies during the platform call: the row stays "sending"
    with pytest.raises(Crash):
        await Delivery(store).deliver(adapter, "c", OutboundMessage("the answer"), inbox_id=inbox_id,
                                      finish_inbox=True)
    (first,) = await outbox_rows(store)
    assert first["status"] == "sending" and first["idempotency_key"]
    await Delivery(store).deliver(adapter, "c", OutboundMessage("the answer"), inbox_id=inbox_id, resume=True,
                                  finish_inbox=True)
    texts = [t for _, t in adapter.sent]
    assert texts == (["the answer"] if idempotent else [MAYBE_REPEATED, "the answer"])
    assert adapter.keys[-1] == first["idempotency_key"]  # the key the first attempt was sent with
    assert (await store.inbox.get(inbox_id))["status"] == "done"
    assert [(r["status"], r["idempotency_key"]) for r in await outbox_rows(store)] == [
        ("sent", first["idempotency_key"])]


async def test_a_chunk_an_older_herald_began_is_resent_with_the_key_it_used(store):
    """Outbox rows from before keys were stored: that version sent with ``herald-<inbox>-<chunk>``."""
    from gateway.platforms.base import Capabilities

    inbox_id = await store.inbox.add("rec", "p5", "k", {})
    await store.inbox.mark(inbox_id, "replied")
    await store.outbox.record(inbox_id, "rec", "c", 0, None, "sending")  # no key stored
    adapter = Recorder(Capabilities(max_message_length=100, idempotent_send=True))
    await Delivery(store).deliver(adapter, "c", OutboundMessage("the answer"), inbox_id=inbox_id, resume=True,
                                  finish_inbox=True)
    assert adapter.keys == [f"herald-{inbox_id}-0"]


async def test_an_inbox_id_sqlite_hands_out_again_gets_new_keys_and_its_answer_is_shown(store, tmp_path):
    """SQLite's inbox ids have no AUTOINCREMENT: once the newest rows are deleted (retention), the next
    message gets the same id. Its answer must not carry the key of the old one's, or the web chat (which
    de-duplicates by key) swallows it while the outbox records it as sent."""
    from gateway.platforms.base import AdapterContext
    from gateway.platforms.web.adapter import WebAdapter
    from gateway.storage.tables import inbox

    web = WebAdapter(AdapterContext(gateway=None, config=None, home=tmp_path, media_dir=tmp_path,  # type: ignore[arg-type]
                                    chat_log=store.chat_log))
    delivery = Delivery(store)
    first = await store.inbox.add("web", "u-1", "web:dm:c", {})
    await store.inbox.mark(first, "replied")
    await delivery.deliver(web, "c", OutboundMessage("old answer"), inbox_id=first, finish_inbox=True)
    # What deleting the newest rows leaves: the chat log keeps the old answer, the id is free again.
    await store.run_write(lambda conn: (conn.execute(outbox.delete()), conn.execute(inbox.delete())))
    second = await store.inbox.add("web", "u-2", "web:dm:c", {})
    assert second == first
    await store.inbox.mark(second, "replied")
    report = await delivery.deliver(web, "c", OutboundMessage("new answer"), inbox_id=second, finish_inbox=True)
    shown = [r["text"] for r in await store.chat_log.recent("web", "c")]
    assert shown == ["old answer", "new answer"]
    assert report.message_ids and (await store.chat_log.get("web", report.message_ids[0]))["text"] == "new answer"


async def test_every_id_a_send_returns_is_recorded(store):
    class Splitting(Recorder):
        async def send(self, chat_id, text, message, *, idempotency_key=None):
            await super().send(chat_id, text, message)
            return ["x1", "x2"]

    inbox_id = await store.inbox.add("rec", "p6", "k", {})
    await store.inbox.mark(inbox_id, "replied")
    report = await Delivery(store).deliver(Splitting(), "c", OutboundMessage("hi"), inbox_id=inbox_id)
    assert report.message_ids == ["x1", "x2"]
    assert (await outbox_rows(store))[0]["platform_message_id"] == "x1 x2"


@pytest.mark.parametrize("limit", [64, 200, 1000])
def test_chunks_fit_a_measure_that_is_not_the_character_count(limit):
    """Telegram measures the text after converting markdown to entities: chunks fit that measure."""
    from gateway.platforms.telegram.outbound import TelegramOutbound

    out = TelegramOutbound(lambda: None)
    measure = lambda s: len(out.convert(s)[0].encode("utf-16-le")) // 2  # noqa: E731
    text = "\n\n".join(f"## Part {i}\n**bold {i}** and `code {i}` and 😀 text " * 3 for i in range(40))
    chunks = chunk_text(text, limit, measure)
    assert all(measure(c) <= limit for c in chunks)
    for c in chunks:  # no inline span cut in half
        for line in c.split("\n"):
            assert line.count("`") % 2 == 0 and line.count("**") % 2 == 0, line


async def test_an_answer_is_sent_only_while_its_inbox_row_is_this_instances(db_url):
    """Outbox claims: a chunk is begun only while this instance owns the row (checked under a row lock in the
    chunk's own transaction). An instance whose row was taken over stops before its next chunk, and the
    taker carries on from the chunks already out."""
    from gateway.platforms.base import Capabilities
    from gateway.storage.inbox import NotExpected

    store = Store(db_url)
    await store.init()
    try:
        row = await store.inbox.add("rec", "m1", "rec:dm:c", {"text": "q"}, owner="instance-a")
        await store.inbox.mark(row, "replied", reply="x", expected="pending")
        text = " ".join(f"word{i}" for i in range(60))  # several chunks of at most 100 characters
        stranger, a = Recorder(Capabilities(max_message_length=100)), Recorder(Capabilities(max_message_length=100))
        with pytest.raises(NotExpected):
            await Delivery(store, owner="instance-b").deliver(stranger, "c", OutboundMessage(text), inbox_id=row)
        assert stranger.sent == []

        real_send = a.send

        async def send_then_lose_the_row(chat_id, chunk, message, *, idempotency_key=None):
            ids = await real_send(chat_id, chunk, message, idempotency_key=idempotency_key)
            if len(a.sent) == 2:  # another instance takes the row over (this one stalled past its lease)
                await store.run_write(lambda conn: conn.execute(
                    update(inbox).where(inbox.c.id == row).values(owner="instance-b")))
            return ids

        a.send = send_then_lose_the_row
        with pytest.raises(NotExpected):
            await Delivery(store, owner="instance-a").deliver(a, "c", OutboundMessage(text), inbox_id=row,
                                                              finish_inbox=True)
        assert len(a.sent) == 2
        b = Recorder(Capabilities(max_message_length=100))
        report = await Delivery(store, owner="instance-b").deliver(b, "c", OutboundMessage(text), inbox_id=row,
                                                                   resume=True, finish_inbox=True)
        assert not report.failed
        assert [t for _, t in a.sent + b.sent] == chunk_text(text, 100)  # every chunk once, in order
        assert (await store.inbox.get(row))["status"] == "done"
    finally:
        await store.close()
