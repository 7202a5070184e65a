"""Telegram's media end to end: the real runner and python-telegram-bot against the fake Bot API and the fake
model (with its /audio endpoints). Photos reach a vision model as image parts and any other as a path; an
album is one turn; voice notes are transcribed; files the agent sends arrive once, after the text."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.config import parse_config, resolve_paths
from gateway.runner import GatewayRunner
from tests.fakes.llm import FakeLLM, Reply, ToolCall, last_user_message, message_text
from tests.fakes.telegram_api import FakeTelegram
from tests.support.media import HTML_AS_PNG, VOICE, image_bytes, image_parts
from tests.support.polling import wait_until

ALICE = 111
Factory = Callable[..., Awaitable[GatewayRunner]]


@pytest.fixture
async def start(home: Path, tmp_path: Path, fake_llm: FakeLLM, fake_tg: FakeTelegram,
                monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Factory]:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", fake_tg.token)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    runners: list[GatewayRunner] = []

    async def factory(**extra: Any) -> GatewayRunner:
        model = {"base_url": fake_llm.base_url, "name": "fake-model", "max_retries": 0, **extra.pop("model", {})}
        cfg = parse_config({
            "model": model, "http": {"port": 0},
            "tools": {"terminal": {"sandbox": "none"}},
            "platforms": {"web": {"enabled": False},
                          "telegram": {"enabled": True, "base_url": fake_tg.base_url, "allowed_users": [ALICE]}},
            **extra,
        })
        runner = GatewayRunner(cfg, resolve_paths())
        await runner.start()
        runners.append(runner)
        await wait_until(lambda: runner.adapters["telegram"].state == "connected")
        return runner

    yield factory
    for runner in runners:
        await runner.shutdown()


def user_texts(llm: FakeLLM) -> list[str]:
    return [message_text(last_user_message(r)) for r in llm.requests]


def workspace(runner: GatewayRunner) -> Path:
    return Path(runner.agents.sandbox.workspace)


# ---- images in -------------------------------------------------------------------------------------------


async def test_a_photo_reaches_a_vision_model_as_an_image_and_a_path_otherwise(start, fake_tg, fake_llm):
    runner = await start(model={"vision": True})
    fake_tg.photo_message(ALICE, image_bytes(3000, 1000, "JPEG"), caption="what is on it?")
    await fake_tg.wait_sent(lambda s: len(s) == 1)
    request = fake_llm.requests[-1]
    [url] = image_parts(request)
    assert url.startswith("data:image/jpeg;base64,")
    text = user_texts(fake_llm)[-1]
    assert text.startswith("what is on it?") and "/attachments/" in text and "cannot see" not in text
    stored = next(Path(line[2:]) for line in text.splitlines() if line.startswith("- /"))
    assert stored.read_bytes()[:3] == b"\xff\xd8\xff" and stored.parent == workspace(runner) / "attachments"
    # The next turn reads it again from the reference in the history; the database holds no image bytes.
    fake_tg.user_message(ALICE, text="and now?")
    await fake_tg.wait_sent(lambda s: len(s) == 2)
    history_images = [p for m in fake_llm.requests[-1]["messages"] if isinstance(m.get("content"), list)
                      for p in m["content"] if p.get("type") == "image_url"]
    assert len(history_images) == 1
    rows = await runner.store.run_read(lambda conn: conn.exec_driver_sql("SELECT content FROM messages").all())
    assert all(len(str(r[0])) < 2000 and "base64" not in str(r[0]) for r in rows)


async def test_without_vision_the_model_gets_the_path_and_a_note(start, fake_tg, fake_llm):
    await start()
    fake_tg.photo_message(ALICE, image_bytes())
    await fake_tg.wait_sent(lambda s: len(s) == 1)
    assert image_parts(fake_llm.requests[-1]) == []
    text = user_texts(fake_llm)[-1]
    assert "photo.jpg" in text and "/attachments/" in text and "cannot see images" in text


async def test_an_album_of_three_is_one_turn_with_three_images(start, fake_tg, fake_llm):
    runner = await start(model={"vision": True})
    fake_tg.album(ALICE, [image_bytes(color=(n * 80, 0, 0)) for n in range(3)], caption="my holiday")
    await fake_tg.wait_sent(lambda s: len(s) == 1)
    assert len(fake_llm.requests) == 1
    assert len(image_parts(fake_llm.requests[0])) == 3
    assert user_texts(fake_llm)[0].startswith("my holiday")

    def statuses(conn):
        return [tuple(r) for r in conn.exec_driver_sql("SELECT status, error FROM inbox ORDER BY id").all()]

    rows = await wait_until(lambda: runner.store.run_read(statuses), what="the album's rows")
    await wait_until(lambda: runner.store.run_read(lambda c: statuses(c)[0][0] == "done"), what="answered")
    assert [r[0] for r in await runner.store.run_read(statuses)] == ["done"] * 3
    assert all("one album" in (r[1] or "") for r in rows[1:])


async def test_a_png_that_is_html_is_refused_in_one_line_and_the_turn_goes_on(start, fake_tg, fake_llm):
    await start(model={"vision": True})
    fake_tg.document_message(ALICE, HTML_AS_PNG, "cat.png", caption="look")
    sent = await fake_tg.wait_sent(lambda s: len(s) == 2)
    assert sent[0].text.startswith("⚠️ I did not take what you sent") and "cat.png" in sent[0].text
    assert "text/html" in sent[0].text and "\n" not in sent[0].text
    assert image_parts(fake_llm.requests[-1]) == [] and "refused" in user_texts(fake_llm)[-1]
    assert sent[1].text.startswith("echo: look")


# ---- voice in --------------------------------------------------------------------------------------------


async def test_a_voice_note_is_transcribed_and_the_turn_sees_the_text(start, fake_tg, fake_llm):
    await start(transcription={"echo": True})
    fake_llm.transcripts.append("remind me to buy milk")
    fake_tg.voice_message(ALICE, VOICE)
    sent = await fake_tg.wait_sent(lambda s: len(s) == 2)
    assert sent[0].text == "🎤 “remind me to buy milk”"
    [asked] = fake_llm.transcriptions
    assert asked["model"] == "whisper-1" and asked["bytes"] == VOICE and asked["content_type"] == "audio/ogg"
    text = user_texts(fake_llm)[-1]
    assert "[Transcribed from the voice note" in text and "remind me to buy milk" in text
    assert "voice.ogg" in text  # the audio stays attached


async def test_transcription_down_is_one_notice_and_the_turn_goes_on(start, fake_tg, fake_llm):
    runner = await start()
    fake_llm.audio_down = 503
    fake_tg.voice_message(ALICE, VOICE)
    sent = await fake_tg.wait_sent(lambda s: len(s) == 2)
    assert sent[0].text == ("🎤 I could not transcribe voice.ogg: the server answered 503; I'll answer with the "
                            "audio file as it is.")
    assert "\n" not in sent[0].text
    assert "could not be transcribed" in user_texts(fake_llm)[-1]
    assert sent[1].text.startswith("echo:")
    assert 'herald_faults_total{fault="transcription_failed"} 1.0' in runner.metrics.render().decode()


async def test_an_empty_voice_note_is_refused_without_calling_the_server(start, fake_tg, fake_llm):
    await start()
    fake_tg.voice_message(ALICE, b"")
    sent = await fake_tg.wait_sent(lambda s: len(s) == 2)
    assert "voice.ogg: the audio is empty" in sent[0].text
    assert fake_llm.transcriptions == []


# ---- files out -------------------------------------------------------------------------------------------


async def test_send_file_delivers_a_document_and_a_photo_once_after_the_text(start, fake_tg, fake_llm):
    runner = await start()
    ws = workspace(runner)
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "report.csv").write_text("day,sales\nmon,3\n")
    (ws / "chart.png").write_bytes(image_bytes(200, 100))
    fake_llm.script(ToolCall("send_file", {"path": "report.csv", "caption": "the *numbers*"}),
                    ToolCall("send_file", {"path": "chart.png"}), Reply("Here are the report and the chart."))
    fake_tg.user_message(ALICE, text="send me the report")
    await fake_tg.wait_until(lambda: len(fake_tg.uploads) == 2, what="two uploads")
    [text] = await fake_tg.wait_sent(lambda s: len(s) == 1)
    doc, photo = fake_tg.uploads
    assert (doc.method, doc.filename, doc.content) == ("sendDocument", "report.csv", b"day,sales\nmon,3\n")
    assert doc.caption == "the numbers"
    assert (photo.method, photo.filename) == ("sendPhoto", "chart.png")
    assert text.text == "Here are the report and the chart."
    assert text.message_id < doc.message_id < photo.message_id  # the text first, then the files in order

    def rows(conn):
        return [tuple(r) for r in conn.exec_driver_sql("SELECT chunk_index, status FROM outbox ORDER BY id").all()]

    # The last upload's row is recorded once its answer came back: waited for, not read at once.
    await wait_until(lambda: runner.store.run_read(
        lambda c: rows(c) == [(0, "sent"), (10_000, "sent"), (10_001, "sent")]), what="every row sent")


async def test_several_images_go_as_one_album(start, fake_tg, fake_llm):
    runner = await start()
    ws = workspace(runner)
    ws.mkdir(parents=True, exist_ok=True)
    for n in range(3):
        (ws / f"p{n}.png").write_bytes(image_bytes(color=(n * 50, 10, 10)))
    fake_llm.script(*(ToolCall("send_file", {"path": f"p{n}.png"}) for n in range(3)), Reply("three"))
    fake_tg.user_message(ALICE, text="pictures please")
    await fake_tg.wait_until(lambda: len(fake_tg.uploads) == 3, what="an album")
    assert {u.method for u in fake_tg.uploads} == {"sendMediaGroup"}
    assert len({u.media_group for u in fake_tg.uploads}) == 1


async def test_a_file_over_the_limit_is_told_with_its_size_and_the_limit(start, fake_tg, fake_llm, monkeypatch):
    from gateway.platforms.telegram import adapter as tg_adapter

    runner = await start()
    monkeypatch.setattr(tg_adapter, "UPLOAD_LIMIT", 1000)
    ws = workspace(runner)
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "big.bin").write_bytes(b"\x00" * 5000)
    fake_llm.script(ToolCall("send_file", {"path": "big.bin"}), Reply("sent"))
    fake_tg.user_message(ALICE, text="the big one")
    sent = await fake_tg.wait_sent(lambda s: len(s) == 2)
    assert sent[1].text == "📎 big.bin is 4.9 KB, more than this chat takes (1000 bytes), so it was not sent."
    assert fake_tg.uploads == []


async def test_voice_on_sends_a_voice_note_after_the_text(start, fake_tg, fake_llm):
    await start()
    fake_tg.user_message(ALICE, text="/voice on")
    await fake_tg.wait_sent(lambda s: len(s) == 1 and "Voice replies on" in s[0].text)
    fake_tg.user_message(ALICE, text="say hi")
    await fake_tg.wait_until(lambda: len(fake_tg.uploads) == 1, what="a voice note")
    [voice] = fake_tg.uploads
    assert voice.method == "sendVoice" and voice.content.startswith(b"OggS")
    assert fake_llm.speeches[-1]["input"] == "echo: say hi" and fake_llm.speeches[-1]["voice"] == "alloy"
    answer = next(m for m in fake_tg.sent if m.text == "echo: say hi")
    assert answer.message_id < voice.message_id
    fake_tg.user_message(ALICE, text="/voice off")
    await fake_tg.wait_sent(lambda s: any(m.text == "Voice replies off." for m in s))
    fake_tg.user_message(ALICE, text="quiet now")
    await fake_tg.wait_sent(lambda s: any(m.text == "echo: quiet now" for m in s))
    assert len(fake_tg.uploads) == 1
