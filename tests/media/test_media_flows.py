"""Media beyond a chat turn: a cron job's answer carries the files its agent sent; a platform that takes no
files says so in the chat; retention deletes the media of the sessions it deletes; doctor reports the size."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from cron.scheduler import CronScheduler
from gateway.config import parse_config, resolve_paths
from gateway.kernel.attached import with_files
from gateway.ops.doctor import Doctor
from gateway.platforms.base import Attachment, OutboundMessage
from gateway.storage.retention import Retention
from tests.cron.test_cron import Clock, create, runs, settle
from tests.fakes.llm import Reply, ToolCall
from tests.support.media import image_bytes, workspace_with
from tests.support.qa_channel import QAAdapter


class FilesQA(QAAdapter):
    """The QA channel, taking files (up to 1 MB)."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.files: list[tuple[str, Attachment, bytes]] = []

    async def send_file(self, chat_id: str, attachment: Attachment, message: OutboundMessage,
                        idempotency_key: str | None = None) -> list[str]:
        self.files.append((chat_id, attachment, Path(attachment.path).read_bytes()))  # noqa: ASYNC240
        return [f"file-{len(self.files)}"]

    async def file_limit(self, chat_id: str) -> int:
        return 1024 * 1024


async def test_a_cron_jobs_answer_carries_the_files_its_agent_sent(make_runner: Any, fake_llm: Any) -> None:
    clock = Clock()
    runner, qa = await make_runner({"cron": {"enabled": False, "delivery_retry_seconds": 0.01}}, adapters=[FilesQA])
    sched = CronScheduler(runner.cron_host(), now=clock)
    runner.cron = sched
    await sched.start(timer=False)
    workspace_with(runner, {"daily.png": image_bytes(40, 30)})
    job = await create(sched, schedule="every 1h", prompt="draw the daily chart", name="chart")
    fake_llm.script(ToolCall("send_file", {"path": "daily.png", "caption": "today"}), Reply("Today's chart."))
    clock.t += 3600
    await sched.tick()
    await settle(sched)
    [run] = await runs(sched, job["id"])
    assert (run["status"], run["delivery_status"]) == ("ok", "delivered")
    [text] = qa.texts("c1")
    assert text.endswith("Today's chart.") and "/media/out/" not in text  # the paths are not shown
    [(chat, att, data)] = qa.files
    assert chat == "c1" and att.filename == "daily.png" and att.kind == "image" and data == image_bytes(40, 30)
    assert "/media/out/out-" in run["output"]  # stored with the result: a takeover delivers the file too


async def test_a_platform_without_files_tells_the_chat(make_runner: Any, fake_llm: Any) -> None:
    runner, qa = await make_runner()
    workspace_with(runner, {"notes.txt": b"some notes\n"})
    fake_llm.script(ToolCall("send_file", {"path": "notes.txt"}), Reply("Sent you the notes."))
    await qa.say("the notes please")
    texts = await qa.wait_for(lambda t: len(t) == 2)
    assert texts == ["Sent you the notes.", "📎 notes.txt (11 bytes) cannot be sent: files cannot be sent here."]


async def test_retention_deletes_the_media_of_the_sessions_it_deletes(make_runner: Any, tmp_path: Path) -> None:
    runner, _qa = await make_runner()
    inbound, own = tmp_path / "ws" / "attachments", tmp_path / "home" / "media"
    (own / "out").mkdir(parents=True)
    inbound.mkdir(parents=True)
    old, new = "0a0a0a0a-0000-4000-8000-000000000001", "0b0b0b0b-0000-4000-8000-000000000002"
    photo, kept, outside = inbound / "tg-1-photo.jpg", inbound / "tg-2-photo.jpg", tmp_path / "elsewhere.jpg"
    for path in (photo, kept, outside, own / "out" / f"out-{old}-abc-chart.png", own / "out" / f"voice-{old}-7.ogg",
                 own / "out" / f"out-{new}-def-table.csv"):
        path.write_bytes(b"data")
    store = runner.store
    for sid in (old, new):
        await store.sessions.create(sid, f"k-{sid}", "qa", "prompt")
    await store.messages.append(old, [{"role": "user", "content": with_files("look", [str(photo), str(outside)])}])
    await store.messages.append(new, [{"role": "user", "content": with_files("and this", [str(kept)])}])
    past = time.time() - 40 * 86_400
    from sqlalchemy import update

    from gateway.storage.tables import sessions

    await store.run_write(lambda c: c.execute(update(sessions).where(sessions.c.id == old).values(updated_at=past)))
    total = await Retention(store, days=30, pause=0, media=(inbound, own)).prune()
    assert total["media"] == 3
    assert not photo.exists() and not (own / "out" / f"out-{old}-abc-chart.png").exists()
    assert not (own / "out" / f"voice-{old}-7.ogg").exists()
    assert kept.exists() and (own / "out" / f"out-{new}-def-table.csv").exists()
    assert outside.exists()  # named in a message, but not in a media folder: never ours to delete


def test_doctor_reports_the_media_folders_size(home: Path) -> None:
    paths = resolve_paths()
    (paths.media_dir / "out").mkdir(parents=True)
    (paths.media_dir / "out" / "a.bin").write_bytes(b"x" * 3 * 1024 * 1024)
    attachments = paths.home / "workspace" / "attachments"
    attachments.mkdir(parents=True)
    (attachments / "b.jpg").write_bytes(b"y" * 1024 * 1024)
    check = Doctor(parse_config({}), paths)._media()
    assert check.status == "ok" and check.message.startswith("4.0 MB in 2 files")
    assert str(paths.media_dir) in check.message and str(attachments) in check.message


class RefusingQA(FilesQA):
    async def send_file(self, chat_id: str, attachment: Attachment, message: OutboundMessage,
                        idempotency_key: str | None = None) -> list[str]:
        from gateway.platforms.base import PermanentError

        raise PermanentError("the platform said no (403)")


async def test_a_file_the_platform_refuses_is_told_and_the_next_one_still_goes(make_runner: Any,
                                                                               fake_llm: Any) -> None:
    runner, qa = await make_runner(adapters=[RefusingQA])
    workspace_with(runner, {"a.txt": b"first\n"})
    fake_llm.script(ToolCall("send_file", {"path": "a.txt"}), Reply("Here."))
    await qa.say("send it")
    texts = await qa.wait_for(lambda t: len(t) == 2)
    assert texts == ["Here.", "📎 a.txt could not be sent: the platform said no (403)"]
    rows = await runner.store.run_read(lambda c: c.exec_driver_sql(
        "SELECT o.chunk_index, o.status, i.status FROM outbox o JOIN inbox i ON i.id = o.inbox_id "
        "WHERE o.chunk_index >= 10000").all())
    assert [tuple(r) for r in rows] == [(10_000, "failed", "done")]
