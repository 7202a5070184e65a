"""`herald send TARGET TEXT --file PATH` end to end in-process: the CLI writes the row, the real runner's web
chat delivers it through the outbox. Kept apart from test_send_message.py, which is long already."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from gateway.storage.tables import outbox, outgoing
from tests.talk.test_send_message import rows, write_config

WEB = {"platforms": {"web": {"enabled": True}}}


def cli_send(*args: str) -> Any:
    from gateway.cli import app

    return CliRunner().invoke(app, ["send", "web:owner", *args])


async def test_a_file_reaches_the_chat_once(make_runner, home: Path, tmp_path: Path):
    write_config(home, {"http": {"port": 0}, **WEB})
    runner, _qa = await make_runner(WEB)
    report = tmp_path / "report.csv"
    report.write_text("host,disk\ndb1,91%\n")

    first = await asyncio.to_thread(cli_send, "the disk report", "--file", str(report), "--key", "report-0900")
    assert first.exit_code == 0, first.output
    assert first.output.startswith("sent to web:owner")
    report.write_text("changed after sending")  # the chat keeps what was sent: the CLI staged a copy
    again = await asyncio.to_thread(cli_send, "the disk report", "--file", str(report), "--key", "report-0900")
    assert again.exit_code == 0 and again.output == first.output

    log = await runner.store.chat_log.recent("web", "owner")
    texts = [r["text"] for r in log if "disk report" in r["text"]]
    files = [f for r in log for f in (r["files"] or [])]
    assert texts == ["the disk report"]
    assert [(f["name"], f["size"]) for f in files] == [("report.csv", len("host,disk\ndb1,91%\n"))]
    (row,) = await rows(runner, outgoing)
    assert (row["status"], row["attachment"]["filename"]) == ("sent", "report.csv")
    chunks = [r for r in await rows(runner, outbox) if r["ref"] == f"send:{row['id']}"]
    assert len(chunks) == 2 and {c["status"] for c in chunks} == {"sent"}  # the text, then the file


async def test_a_file_that_cannot_be_sent_is_refused_and_nothing_is_queued(make_runner, home: Path,
                                                                           tmp_path: Path):
    write_config(home, {"http": {"port": 0}, **WEB, "media": {"max_send_mb": 0.001}})
    runner, _qa = await make_runner(WEB)
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 2048)
    folder = tmp_path / "folder"
    folder.mkdir()

    for path, why in ((tmp_path / "missing.txt", "no such file"), (folder, "no such file"),
                      (big, "media.max_send_mb")):
        result = await asyncio.to_thread(cli_send, "here it is", "--file", str(path))
        assert result.exit_code == 2, result.output
        assert why in result.output and str(path.name) in result.output
    assert await rows(runner, outgoing) == []
    log = await runner.store.chat_log.recent("web", "owner")
    assert not any("here it is" in r["text"] or r["files"] for r in log)
    staged = runner.paths.media_dir / "outgoing"
    assert not staged.exists() or not any(staged.iterdir()), "a refused file was copied anyway"
