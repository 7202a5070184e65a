"""Rooms, threads, mentions and invites; encrypted rooms without encryption; the homeserver's rate limit."""

from __future__ import annotations

import json
import time

from gateway.platforms.base import OutboundMessage, RateLimited
from gateway.platforms.matrix.adapter import CANNOT_READ
from gateway.platforms.matrix.transport import error_of
from tests.fakes.llm import FakeLLM, last_user_message, message_text
from tests.fakes.matrix_api import BOT, FakeMatrix
from tests.platforms.matrix.conftest import ALICE, BOB, CAROL, STRANGER, Factory, answered, model_calls
from tests.support.polling import wait_until


def request_for(llm: FakeLLM, text: str) -> str:
    """The whole conversation the model was given when it answered ``text``."""
    return next(json.dumps(r["messages"]) for r in llm.requests if message_text(last_user_message(r)) == text)


async def test_a_thread_is_its_own_session_and_its_answers_go_into_it(start_mx: Factory, fake_mx: FakeMatrix,
                                                                    fake_llm: FakeLLM) -> None:
    room = fake_mx.room([ALICE, BOB, BOT], name="general")
    await start_mx()
    fake_mx.user_message(room, ALICE, "in the room", mention=True)
    main = (await fake_mx.wait_sent(answered("echo: in the room")))[-1]
    assert main.thread is None
    root = fake_mx.user_message(room, ALICE, "a topic of its own")["event_id"]  # no mention: not for the bot
    asked = fake_mx.user_message(room, ALICE, "in the thread", thread=root, mention=True)
    reply = (await fake_mx.wait_sent(answered("echo: in the thread")))[-1]
    assert reply.thread == root and reply.reply_to == asked["event_id"]
    # The bot posted in the thread: a follow-up there needs no mention.
    fake_mx.user_message(room, ALICE, "and a follow-up", thread=root)
    follow = (await fake_mx.wait_sent(answered("echo: and a follow-up")))[-1]
    assert follow.thread == root
    assert "in the room" not in request_for(fake_llm, "in the thread")  # another session than the room's
    assert "in the thread" in request_for(fake_llm, "and a follow-up")
    assert model_calls(fake_llm, "a topic of its own") == 0


async def test_mentions_by_pill_by_display_name_or_a_reply_to_the_bot_and_nothing_else(
        start_mx: Factory, fake_mx: FakeMatrix, fake_llm: FakeLLM) -> None:
    room = fake_mx.room([ALICE, BOB, BOT], name="general")
    await start_mx()
    fake_mx.user_message(room, ALICE, "talking among ourselves")
    fake_mx.user_message(room, ALICE, "Herald, what time is it?")
    await fake_mx.wait_sent(answered("echo: what time is it?"))  # the leading name is not part of the question
    fake_mx.user_message(room, ALICE, "by pill", mention=True)
    pill = (await fake_mx.wait_sent(answered("echo: by pill")))[-1]
    fake_mx.user_message(room, BOB, "a reply to the bot", reply_to=pill.event_id)
    await fake_mx.wait_sent(answered("echo: a reply to the bot"))
    fake_mx.user_message(room, ALICE, "> <@herald:fake.test> echo: by pill\n\nquoting it", reply_to=pill.event_id)
    await fake_mx.wait_sent(answered("echo: quoting it"))  # the reply's quoted fallback is not the user's
    assert model_calls(fake_llm, "talking among ourselves") == 0
    assert all(m.content.get("m.mentions") == {} for m in fake_mx.sent)  # answers ping nobody by accident


async def test_without_require_mention_every_message_in_a_room_is_taken(start_mx: Factory, fake_mx: FakeMatrix) -> None:
    room = fake_mx.room([ALICE, BOB, BOT], name="general")
    await start_mx(require_mention=False)
    fake_mx.user_message(room, BOB, "no mention needed")
    await fake_mx.wait_sent(answered("echo: no mention needed"))


async def test_invites_from_allowed_users_are_accepted_others_declined(start_mx: Factory, fake_mx: FakeMatrix) -> None:
    await start_mx()
    welcome = fake_mx.invite(ALICE)
    refused = fake_mx.invite(STRANGER)
    room_of_a_stranger = fake_mx.invite(CAROL, direct=False, members=[ALICE])
    await wait_until(lambda: fake_mx.joined(welcome), what="the bot joined Alice's DM")
    await wait_until(lambda: refused in fake_mx.left and room_of_a_stranger in fake_mx.left,
                     what="the strangers' invites declined")
    fake_mx.user_message(welcome, ALICE, "thanks for coming")
    await fake_mx.wait_sent(answered("echo: thanks for coming"))
    assert fake_mx.texts(refused) == [] and not fake_mx.joined(refused)


async def test_invites_to_a_room_outside_allowed_rooms_are_declined(start_mx: Factory, fake_mx: FakeMatrix) -> None:
    listed = fake_mx.room([ALICE, BOB])
    await start_mx(allowed_rooms=[listed])
    elsewhere = fake_mx.invite(ALICE, direct=False, members=[BOB])
    fake_mx.invite(ALICE, direct=False, room_id=listed)
    await wait_until(lambda: fake_mx.joined(listed) and elsewhere in fake_mx.left, what="invites answered")


async def test_an_encrypted_room_without_encryption_is_told_once_that_it_cannot_be_read(
        start_mx: Factory, fake_mx: FakeMatrix, fake_llm: FakeLLM) -> None:
    secret_room = fake_mx.room([ALICE, BOT], encrypted=True)
    strangers = fake_mx.room([STRANGER, BOT], encrypted=True)
    runner = await start_mx()
    fake_mx.encrypted_message(secret_room, ALICE)
    fake_mx.encrypted_message(strangers, STRANGER)
    [notice] = await fake_mx.wait_sent(lambda sent: len(sent) >= 1)
    assert notice.room_id == secret_room and notice.text == CANNOT_READ and notice.content["msgtype"] == "m.notice"
    fake_mx.encrypted_message(secret_room, ALICE)
    # Nothing is sent there in the clear either: a delivery into the room is refused.
    report = await runner.delivery.deliver(runner.adapters["matrix"], secret_room, OutboundMessage("a job's result"))
    assert report.failed and "encrypted" in (report.error or "")
    await runner.shutdown()
    again = await start_mx()
    fake_mx.encrypted_message(secret_room, ALICE)
    room = fake_mx.dm(BOB)
    fake_mx.user_message(room, BOB, "still here?")
    await fake_mx.wait_sent(answered("echo: still here?"))
    assert [m.text for m in fake_mx.sent_to(secret_room)] == [CANNOT_READ]  # once, across the restart too
    assert fake_mx.sent_to(strangers) == [] and fake_llm.requests and again.counters.messages_accepted == 1


async def test_m_limit_exceeded_holds_back_that_room_only_for_the_time_the_homeserver_says(
        start_mx: Factory, fake_mx: FakeMatrix) -> None:
    flooded, calm = fake_mx.dm(ALICE), fake_mx.dm(BOB)
    await start_mx()
    fake_mx.flood(flooded, 1.5)
    started = time.monotonic()
    fake_mx.user_message(flooded, ALICE, "during the flood")
    fake_mx.user_message(calm, BOB, "elsewhere")
    calm_answer = (await fake_mx.wait_sent(answered("echo: elsewhere")))[-1]
    late = (await fake_mx.wait_sent(answered("echo: during the flood"), timeout=15))[-1]
    assert calm_answer.monotonic - started < 1.5 <= late.monotonic - started
    assert fake_mx.texts(flooded).count("echo: during the flood") == 1


def test_m_limit_exceeded_is_rate_limited_for_its_retry_after_ms() -> None:
    from nio import RoomSendError

    error = error_of(RoomSendError("Too Many Requests", "M_LIMIT_EXCEEDED", retry_after_ms=2500))
    assert isinstance(error, RateLimited) and error.retry_after == 2.5
    assert error_of(RoomSendError("Too Many Requests", "M_LIMIT_EXCEEDED")).retry_after > 0  # type: ignore[union-attr]


async def test_after_a_restart_a_thread_the_bot_posted_in_and_a_reply_to_it_still_need_no_mention(
        start_mx: Factory, fake_mx: FakeMatrix) -> None:
    room = fake_mx.room([ALICE, BOB, BOT], name="general")
    first = await start_mx()
    root = fake_mx.user_message(room, ALICE, "a topic")["event_id"]
    fake_mx.user_message(room, ALICE, "start it", thread=root, mention=True)
    await fake_mx.wait_sent(answered("echo: start it"))
    fake_mx.user_message(room, ALICE, "for the main room", mention=True)
    main = (await fake_mx.wait_sent(answered("echo: for the main room")))[-1]
    await first.shutdown()
    await start_mx()  # what the bot knew of its threads and messages went with the process
    fake_mx.user_message(room, BOB, "carrying on", thread=root)
    fake_mx.user_message(room, BOB, "about your answer", reply_to=main.event_id)
    other = fake_mx.user_message(room, BOB, "another topic")["event_id"]
    fake_mx.user_message(room, ALICE, "not the bot's thread", thread=other)
    await fake_mx.wait_sent(answered("echo: carrying on"))
    await fake_mx.wait_sent(answered("echo: about your answer"))
    fake_mx.user_message(room, ALICE, "last", mention=True)
    await fake_mx.wait_sent(answered("echo: last"))
    assert "echo: not the bot's thread" not in fake_mx.texts(room)


async def test_an_edit_counts_from_the_person_who_sent_the_message_and_stays_in_its_thread(
        start_mx: Factory, fake_mx: FakeMatrix, fake_llm: FakeLLM) -> None:
    room = fake_mx.room([ALICE, BOB, BOT], name="general")
    await start_mx(extra={"gateway": {"on_edit": "new_turn"}})
    root = fake_mx.user_message(room, ALICE, "a topic of its own")["event_id"]
    asked = fake_mx.user_message(room, ALICE, "in the thread", thread=root, mention=True)
    await fake_mx.wait_sent(answered("echo: in the thread"))
    aside = fake_mx.user_message(room, ALICE, "talking among ourselves")
    fake_mx.user_edit(room, BOB, asked["event_id"], "bob rewrites alice")  # not his to edit
    fake_mx.user_edit(room, ALICE, aside["event_id"], "still among ourselves")  # never for the bot
    fake_mx.user_edit(room, ALICE, asked["event_id"], "in the thread, edited")
    edited = (await fake_mx.wait_sent(lambda sent: any("in the thread, edited" in m.text for m in sent)))[-1]
    assert edited.thread == root  # the edit belongs to the thread's session, as its message did
    fake_mx.user_message(room, ALICE, "a last word", mention=True)
    await fake_mx.wait_sent(answered("echo: a last word"))  # in order: the edits before it are dealt with
    seen = json.dumps([r["messages"] for r in fake_llm.requests])
    assert "in the thread, edited" in seen
    assert "bob rewrites alice" not in seen and "still among ourselves" not in seen
