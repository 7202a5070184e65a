"""The contract's work after the acknowledgement (gateway/platforms/base.py): ``InboundMessage.pending`` travels
with the stored message, and the default ``prepare`` turns its files into attachments, notes for the agent and
lines for the user. The platforms' own downloads are tested end to end (the conformance suite's slow file, each
platform's file tests); these pin the shared rules."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.platforms.base import (
    AdapterContext,
    FileUnavailable,
    InboundMessage,
    OutboundMessage,
    PlatformAdapter,
    Source,
    TooBig,
    file_ref,
    save_stream,
)


class _Files(PlatformAdapter):
    """An adapter whose files are bytes in a dict; a missing one fails the way a platform's 404 would."""

    name = "files"

    def __init__(self, ctx: AdapterContext, served: dict[str, bytes]) -> None:
        super().__init__(ctx)
        self.served = served

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, chat_id: str, text: str, message: OutboundMessage, *,
                   idempotency_key: str | None = None) -> list[str]:
        return []

    async def download(self, msg: InboundMessage, ref: dict[str, Any], index: int) -> str:
        if ref["name"] == "huge.bin":
            raise TooBig(1)
        if ref["name"] == "broken.bin":
            raise ConnectionResetError("peer went away")
        content = self.served.get(ref["name"])
        if content is None:
            raise FileUnavailable("the platform answered HTTP 404")
        target = self.media_path("f", msg.platform_message_id, str(index), ref["name"])

        async def chunks() -> AsyncIterator[bytes]:
            yield content

        await save_stream(chunks(), target, 1024, 0.001)
        return str(target)


def _adapter(tmp_path: Path, served: dict[str, bytes]) -> _Files:
    ctx = AdapterContext(gateway=None, config=None, home=tmp_path, media_dir=tmp_path / "media",  # type: ignore[arg-type]
                         chat_log=None)  # type: ignore[arg-type]
    return _Files(ctx, served)


def _msg(text: str, *names: str) -> InboundMessage:
    return InboundMessage(Source("files", "c1", "u1"), text, "c1/m:1",
                          pending={"files": [file_ref(n, "document") for n in names]})


def test_pending_work_travels_with_the_stored_message() -> None:
    msg = _msg("hi", "a.txt")
    again = InboundMessage.from_dict(msg.to_dict())
    assert again.pending == {"files": [{"name": "a.txt", "kind": "document", "size": None}]}
    assert "pending" not in InboundMessage(Source("files", "c", "u"), "x", "1").to_dict()


async def test_files_had_become_attachments_and_files_missed_are_said_to_agent_and_user(tmp_path: Path) -> None:
    adapter = _adapter(tmp_path, {"a.txt": b"alpha", "same.png": b"one"})
    msg = _msg("look at these", "a.txt", "gone.txt", "huge.bin", "broken.bin", "same.png", "same.png")
    prepared = await adapter.prepare(msg)
    assert msg.pending is None  # done: a second prepare has nothing left to do
    assert [Path(p).read_bytes() for p in msg.attachments] == [b"alpha", b"one", b"one"]  # noqa: ASYNC240
    assert len(set(msg.attachments)) == 3  # two files of one name stay two files
    assert prepared.problems == ["gone.txt: the platform answered HTTP 404", "huge.bin: bigger than the 1 MB limit",
                                 "broken.bin: the download failed (ConnectionResetError)"]
    assert prepared.drop is None
    lines = msg.text.splitlines()
    assert lines[0] == "look at these"  # the user's words first; files had need no note beside them
    assert lines[1:] == ["[The user sent gone.txt, which could not be downloaded: the platform answered HTTP 404.]",
                         "[The user sent huge.bin, which could not be downloaded: bigger than the 1 MB limit.]",
                         "[The user sent broken.bin, which could not be downloaded: the download failed "
                         "(ConnectionResetError).]"]
    assert (await adapter.prepare(msg)).problems == [] and len(msg.attachments) == 3


async def test_a_file_without_words_is_named_for_the_agent(tmp_path: Path) -> None:
    adapter = _adapter(tmp_path, {"a.txt": b"alpha"})
    msg = _msg("", "a.txt")
    await adapter.prepare(msg)
    assert msg.text == "[The user sent a document: a.txt.]" and len(msg.attachments) == 1


async def test_the_cap_holds_while_the_file_streams_whatever_size_was_declared(tmp_path: Path) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b"x" * 300

    target = tmp_path / "big.bin"
    with pytest.raises(TooBig, match=r"bigger than the 0\.001 MB limit"):
        await save_stream(chunks(), target, 1024, 0.001)
    assert list(tmp_path.iterdir()) == []  # noqa: ASYNC240 -- neither the file nor a partial one
