"""Approvals as a list message (four choices) and reply buttons (up to three) whose taps come back as presses,
typed commands beside them; the typing indicator with read receipts; files in (/{media id}, then the bytes) and
out (/media, then the message by id)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.platforms.base import Attachment, Button, ButtonPress, OutboundMessage, PermanentError
from gateway.platforms.whatsapp import outbound
from tests.fakes.llm import last_user_message, message_text
from tests.platforms.whatsapp.conftest import ALICE, BOB
from tests.support.media import VOICE, image_bytes
from tests.support.polling import wait_until


async def test_an_approval_is_a_list_of_four_and_a_tap_decides_it_once(start_whatsapp, fake_whatsapp, tmp_path):
    runner = await start_whatsapp({"tools": {"terminal": {"cwd": str(tmp_path)}}})
    victim = tmp_path / "victim"
    victim.mkdir()
    command = json.dumps({"command": f"rm -rf {victim}"})
    await fake_whatsapp.post(fake_whatsapp.message(ALICE, f"[tool=terminal:{command}]"))
    [prompt] = [m for m in await fake_whatsapp.wait_sent(lambda sent: any(m.buttons for m in sent)) if m.buttons]
    assert prompt.payload["interactive"]["type"] == "list" and f"rm -rf {victim}" in prompt.text
    assert prompt.titles == ["Approve once", "Approve for this session", "Always approve", "Deny"]
    once = next(b for b in prompt.buttons if b.endswith(":o"))
    tap = fake_whatsapp.press(ALICE, prompt, once)
    for _ in range(2):  # Meta delivers the tap twice
        status, _, _ = await fake_whatsapp.post(tap)
        assert status == 200
    await fake_whatsapp.wait_sent(lambda sent: any(m.text.startswith("tool said:") for m in sent))
    assert not victim.exists()
    notices = [m.text for m in fake_whatsapp.sent_to(ALICE) if m.text.startswith("Approved")
               or "already" in m.text or "no longer" in m.text]
    assert notices == ["Approved once."], notices
    assert runner.counters.messages_accepted == 1


async def test_a_typed_approve_works_beside_the_list(start_whatsapp, fake_whatsapp, tmp_path):
    await start_whatsapp({"tools": {"terminal": {"cwd": str(tmp_path)}}})
    victim = tmp_path / "victim"
    victim.mkdir()
    await fake_whatsapp.post(fake_whatsapp.message(
        ALICE, "[tool=terminal:" + json.dumps({"command": f"rm -rf {victim}"}) + "]"))
    await fake_whatsapp.wait_sent(lambda sent: any(m.buttons for m in sent))
    await fake_whatsapp.post(fake_whatsapp.message(ALICE, "/approve"))
    await fake_whatsapp.wait_sent(lambda sent: any(m.text.startswith("tool said:") for m in sent))
    assert not victim.exists()


async def test_reply_buttons_follow_a_long_body_and_a_tap_is_a_press_on_that_message(start_whatsapp, fake_whatsapp):
    runner = await start_whatsapp()
    await fake_whatsapp.post(fake_whatsapp.message(ALICE, "hi"))
    await fake_whatsapp.wait_sent(lambda sent: len(sent) == 1)
    pressed: list[ButtonPress] = []

    async def handler(_adapter, press: ButtonPress) -> str:
        pressed.append(press)
        return "Noted."

    runner.inbound.buttons["pick"] = handler
    words = " ".join(f"word{i}" for i in range(300))  # ~2400 characters: more than a button body holds
    report = await runner.delivery.deliver(runner.adapters["whatsapp"], ALICE, OutboundMessage(
        words, buttons=[Button("pick:a", "A"), Button("pick:b", "A much longer label than twenty")]))
    assert not report.failed
    *head, buttons = fake_whatsapp.sent_to(ALICE)[1:]
    assert head and all(m.type == "text" for m in head) and buttons.payload["interactive"]["type"] == "button"
    assert len(buttons.text) <= 1024 and " ".join(m.text for m in [*head, buttons]).split() == words.split()
    assert buttons.titles == ["A", "A much longer label…"] and buttons.buttons == ["pick:a", "pick:b"]
    status, _, _ = await fake_whatsapp.post(fake_whatsapp.press(ALICE, buttons, "pick:b"))
    assert status == 200
    await wait_until(lambda: pressed, what="the press")
    assert (pressed[0].button_id, pressed[0].source.user_id, pressed[0].message_id) == ("pick:b", ALICE, buttons.id)
    await fake_whatsapp.wait_sent(lambda sent: sent[-1].text == "Noted.")


async def test_a_turn_shows_typing_with_its_read_receipt_and_a_command_is_marked_read(
        start_whatsapp, fake_whatsapp):
    await start_whatsapp()
    body = fake_whatsapp.message(ALICE, "think about it [sleep=1.5]")
    await fake_whatsapp.post(body)
    message_id = body["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
    await wait_until(lambda: (message_id, True) in [(m, t) for m, t, _ in fake_whatsapp.reads], what="typing")
    await fake_whatsapp.wait_sent(lambda sent: len(sent) == 1)
    body = fake_whatsapp.message(ALICE, "/status")
    await fake_whatsapp.post(body)
    command_id = body["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
    await wait_until(lambda: any(m == command_id for m, _, _ in fake_whatsapp.reads), what="read receipt")


async def test_a_photo_and_a_voice_note_reach_the_turn_as_files(start_whatsapp, fake_whatsapp, fake_llm):
    await start_whatsapp()
    # Real bytes: a photo or a voice note whose bytes are none would be refused (gateway/media/).
    photo_bytes = image_bytes(fmt="JPEG")
    await fake_whatsapp.post(fake_whatsapp.media_message(ALICE, "image", photo_bytes, "image/jpeg",
                                                         caption="what is this?"))
    await fake_whatsapp.wait_sent(lambda sent: len(sent) == 1)
    await fake_whatsapp.post(fake_whatsapp.media_message(ALICE, "audio", VOICE, "audio/ogg; codecs=opus",
                                                         voice=True))
    await fake_whatsapp.wait_sent(lambda sent: len(sent) == 2)
    photo, voice = (message_text(last_user_message(r)) for r in fake_llm.requests[:2])
    assert photo.startswith("what is this?")
    paths = [line[2:] for text in (photo, voice) for line in text.splitlines() if line.startswith("- ")]
    assert [Path(p).read_bytes() for p in paths] == [photo_bytes, VOICE]  # noqa: ASYNC240
    assert paths[0].endswith("photo.jpg") and paths[1].endswith("voice.ogg")
    assert "voice note" in voice


async def test_a_file_over_the_limit_is_not_downloaded_and_the_person_is_told(start_whatsapp, fake_whatsapp, fake_llm):
    await start_whatsapp(max_media_mb=0.001)
    await fake_whatsapp.post(fake_whatsapp.media_message(ALICE, "document", b"x" * 5000, "application/pdf",
                                                         filename="big.pdf", caption="read it"))
    sent = await fake_whatsapp.wait_sent(lambda sent: any(m.text.startswith("echo:") for m in sent))
    assert any("big.pdf" in m.text and "limit" in m.text for m in sent)
    assert "could not be downloaded" in message_text(last_user_message(fake_llm.requests[0]))


async def test_files_go_out_uploaded_then_sent_by_id(start_whatsapp, fake_whatsapp, tmp_path, monkeypatch):
    runner = await start_whatsapp()
    await fake_whatsapp.post(fake_whatsapp.message(ALICE, "send me things"))
    await fake_whatsapp.wait_sent(lambda sent: len(sent) == 1)
    adapter = runner.adapters["whatsapp"]
    report = tmp_path / "report.csv"
    report.write_text("a,b\n1,2\n")
    chart = tmp_path / "chart.png"
    chart.write_bytes(b"\x89PNG fake")
    [doc] = await adapter.send_file(ALICE, Attachment(str(report), "report.csv", "text/csv", "the **numbers**"),
                                    OutboundMessage(""))
    [image] = await adapter.send_file(ALICE, Attachment(str(chart), "chart.png", "image/png", kind="image"),
                                      OutboundMessage(""))
    by_id = {m.id: m for m in fake_whatsapp.sent}
    assert (by_id[doc].type, by_id[doc].text, by_id[doc].media) == ("document", "the *numbers*",
                                                                   ("report.csv", b"a,b\n1,2\n"))
    assert (by_id[image].type, by_id[image].media) == ("image", ("chart.png", b"\x89PNG fake"))
    assert [(mime, name) for mime, name, _ in fake_whatsapp.uploads] == [("text/csv", "report.csv"),
                                                                        ("image/png", "chart.png")]
    # Over WhatsApp's limit: the size and the limit, nothing sent.
    monkeypatch.setitem(outbound.LIMITS, "document", 4)
    monkeypatch.setitem(outbound.LIMITS, "image", 4)
    with pytest.raises(PermanentError, match=r"chart\.png is 0\.0 MB, and WhatsApp takes files up to 0 MB"):
        await adapter.send_file(ALICE, Attachment(str(chart), "chart.png", "image/png", kind="image"),
                                OutboundMessage(""))
    # Outside the window a file cannot go at all (templates carry words).
    with pytest.raises(PermanentError, match="24 hours"):
        await adapter.send_file(BOB, Attachment(str(report), "report.csv", "text/csv"), OutboundMessage(""))
    assert len(fake_whatsapp.uploads) == 2
