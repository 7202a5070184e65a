"""A send whose connection broke after the platform may have taken it (``MaybeSent``): delivery owns the retry.
Where the platform will not know the message again by its key, each resend is announced first: one message
plus one announced resend for one broken connection, never an unannounced double. The same through the real Slack
SDK against the fake Slack is in tests/platforms/slack/test_slack_sends.py."""

from __future__ import annotations

import pytest

from gateway.outbound.delivery import RESENDING, Delivery
from gateway.platforms.base import Capabilities, MaybeSent, OutboundMessage, TransientError
from gateway.storage.store import Store


@pytest.fixture
async def store(tmp_path):
    store = Store(f"sqlite+aiosqlite:///{tmp_path / 'd.db'}")
    await store.init()
    yield store
    await store.close()


class Flaky:
    """A platform whose connection breaks on the sends planned in ``breaks`` (by the text sent): "after" the
    message was taken (it shows), or "before" it left."""

    name = "flaky"

    def __init__(self, caps: Capabilities | None = None, recognised_for: float = 0.0) -> None:
        self.capabilities = caps or Capabilities(max_message_length=1000)
        self.recognised_for = recognised_for
        self.shown: list[str] = []
        self.breaks: dict[str, list[str]] = {}
        self.edits: list[str] = []
        self.keys: dict[str, str] = {}  # idempotency key -> message shown for it

    def render(self, markdown: str) -> str:
        return markdown

    def measure(self, text: str) -> int:
        return len(text)

    async def send(self, chat_id, text, message, *, idempotency_key=None):
        plan = self.breaks.get(text) or []
        how = plan.pop(0) if plan else None
        if how == "before":
            raise TransientError("connection refused")
        known = self.capabilities.idempotent_send and idempotency_key in self.keys
        if not known:
            self.shown.append(text)
            self.keys[idempotency_key] = text
        if how == "after":
            raise MaybeSent("connection reset by peer", self.recognised_for)
        return [f"m{len(self.shown)}"]

    async def edit(self, chat_id, message_id, text, buttons=None, *, thread_id=None):
        plan = self.breaks.get("edit:" + text) or []
        if plan and plan.pop(0) == "after":
            self.edits.append(text)
            raise MaybeSent("connection reset by peer")
        self.edits.append(text)


def delivery(store: Store) -> Delivery:
    return Delivery(store, base_delay=0.001, max_delay=0.002)


async def test_a_send_that_may_have_arrived_is_announced_then_resent_once(store) -> None:
    adapter = Flaky()
    adapter.breaks["the answer"] = ["after"]
    report = await delivery(store).deliver(adapter, "c", OutboundMessage("the answer"), inbox_id=1)
    assert not report.failed
    assert adapter.shown == ["the answer", RESENDING, "the answer"]


async def test_every_resend_after_such_a_failure_is_announced(store) -> None:
    adapter = Flaky()
    adapter.breaks["the answer"] = ["after", "after"]
    report = await delivery(store).deliver(adapter, "c", OutboundMessage("the answer"), inbox_id=1)
    assert not report.failed
    assert adapter.shown == ["the answer", RESENDING, "the answer", RESENDING, "the answer"]


async def test_a_failure_before_it_left_is_retried_quietly_and_after_it_announced_once(store) -> None:
    adapter = Flaky()
    adapter.breaks["the answer"] = ["before", "after", "before", "before"]
    report = await delivery(store).deliver(adapter, "c", OutboundMessage("the answer"), inbox_id=1)
    assert not report.failed
    assert adapter.shown == ["the answer", RESENDING, "the answer"]


async def test_a_platform_that_knows_the_key_gets_the_resend_without_a_word(store) -> None:
    adapter = Flaky(Capabilities(max_message_length=1000, idempotent_send=True))
    adapter.breaks["the answer"] = ["after", "after"]
    report = await delivery(store).deliver(adapter, "c", OutboundMessage("the answer"), inbox_id=1)
    assert not report.failed and adapter.shown == ["the answer"]
    # Recognised for a while only (Discord's nonce): a resend within that time goes quietly too.
    adapter = Flaky(recognised_for=60.0)
    adapter.breaks["the answer"] = ["after"]
    report = await delivery(store).deliver(adapter, "c", OutboundMessage("the answer"), inbox_id=2)
    assert not report.failed and RESENDING not in adapter.shown


async def test_the_announcement_itself_is_never_repeated(store) -> None:
    adapter = Flaky()
    adapter.breaks["the answer"] = ["after"]
    adapter.breaks[RESENDING] = ["after"]
    report = await delivery(store).deliver(adapter, "c", OutboundMessage("the answer"), inbox_id=1)
    assert not report.failed
    assert adapter.shown == ["the answer", RESENDING, "the answer"]


async def test_an_edit_is_simply_done_again(store) -> None:
    adapter = Flaky()
    adapter.breaks["edit:new text"] = ["after"]
    d = delivery(store)
    ids = await d._send_one(adapter, "c", "new text", OutboundMessage("new text"), "", edit_id="m1")
    assert ids == ["m1"] and adapter.edits == ["new text", "new text"] and adapter.shown == []
