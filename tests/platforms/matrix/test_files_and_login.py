"""Files in and out through the content repository; the device a password's first login makes, kept in the
profile; the credential's shape in logs."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from gateway.kernel.logs import redact
from gateway.platforms.base import Attachment, OutboundMessage, PermanentError
from gateway.platforms.matrix import SESSION_FILE
from tests.fakes.llm import FakeLLM, last_user_message, message_text
from tests.fakes.matrix_api import BOT, FakeMatrix
from tests.platforms.matrix.conftest import ALICE, Factory, adapter, answered
from tests.support.media import image_bytes
from tests.support.polling import wait_until


def paths_given(llm: FakeLLM, start: str) -> list[Path]:
    [asked] = [last_user_message(r) for r in llm.requests if message_text(last_user_message(r)).startswith(start)]
    return [Path(line[2:]) for line in message_text(asked).splitlines() if line.startswith("- ")]


async def test_an_encrypted_attachment_is_downloaded_with_the_token_and_decrypted(
        start_mx: Factory, fake_mx: FakeMatrix, fake_llm: FakeLLM) -> None:
    from nio.crypto import encrypt_attachment

    room = fake_mx.dm(ALICE)
    await start_mx()
    picture = image_bytes()  # a real image: a .png whose bytes are none would be refused (gateway/media/)
    ciphertext, keys = encrypt_attachment(picture)
    mxc = fake_mx.add_media(ciphertext)
    fake_mx.user_message(room, ALICE, "look at this", msgtype="m.image", filename="shot.png",
                         file={**keys, "url": mxc}, info={"mimetype": "image/png", "size": len(ciphertext)})
    await fake_mx.wait_sent(lambda s: any(m.text.startswith("echo: look at this") for m in s))
    [path] = paths_given(fake_llm, "look at this")
    assert path.read_bytes() == picture and path.name.endswith("shot.png")


async def test_a_file_over_the_limit_is_not_downloaded_and_the_user_is_told(start_mx: Factory, fake_mx: FakeMatrix,
                                                                          fake_llm: FakeLLM) -> None:
    room = fake_mx.dm(ALICE)
    await start_mx(max_media_mb=0.001)
    fake_mx.file_message(room, ALICE, "big.bin", b"x" * 5000, caption="too big?")
    sent = await fake_mx.wait_sent(lambda s: any(m.text.startswith("echo: too big?") for m in s))
    assert any("big.bin: bigger than the 0.001 MB limit" in m.text for m in sent)
    assert paths_given(fake_llm, "too big?") == []


async def test_a_file_goes_out_through_the_content_repository_in_its_thread(start_mx: Factory, fake_mx: FakeMatrix,
                                                                          tmp_path: Path) -> None:
    room = fake_mx.room([ALICE, "@bob:fake.test", BOT])
    runner = await start_mx()
    picture = tmp_path / "chart.png"
    picture.write_bytes(b"\x89PNG chart")
    root = fake_mx.user_message(room, ALICE, "a thread")["event_id"]
    chart = Attachment(str(picture), "chart.png", "image/png", caption="The **chart**", kind="image")
    [event_id] = await adapter(runner).send_file(room, chart, OutboundMessage("", thread_id=root),
                                                 idempotency_key="file-1")
    sent = fake_mx.by_id[event_id]
    assert sent.content["msgtype"] == "m.image" and sent.content["filename"] == "chart.png"
    assert sent.text == "The **chart**" and "<strong>chart</strong>" in (sent.html or "")
    assert sent.thread == root and sent.content["info"] == {"mimetype": "image/png", "size": 10}
    media_id = sent.content["url"].rpartition("/")[2]
    assert fake_mx.media[media_id][1] == b"\x89PNG chart"
    # Sent again under the same key (a crash before the outbox knew): the homeserver's transaction, no copy.
    assert await adapter(runner).send_file(room, chart, OutboundMessage("", thread_id=root),
                                           idempotency_key="file-1") == [event_id]
    fake_mx.upload_limit = 5
    with pytest.raises(PermanentError, match=r"chart.png is 10 bytes, over the homeserver's 5 bytes limit"):
        await adapter(runner).send_file(room, chart, OutboundMessage(""))


async def test_a_password_logs_in_once_and_the_device_is_kept_in_the_profile(
        start_mx: Factory, fake_mx: FakeMatrix, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    room = fake_mx.dm(ALICE)
    monkeypatch.delenv("MATRIX_ACCESS_TOKEN")
    monkeypatch.setenv("MATRIX_PASSWORD", fake_mx.users[BOT]["password"])
    first = await start_mx(password_env="MATRIX_PASSWORD", device_name="Herald test")
    session = home / SESSION_FILE
    assert stat.S_IMODE(session.stat().st_mode) == 0o600
    kept = json.loads(session.read_text())
    assert kept["user_id"] == BOT and kept["access_token"] in fake_mx.tokens and kept["device_id"]
    tokens = len(fake_mx.tokens)
    await first.shutdown()
    monkeypatch.delenv("MATRIX_PASSWORD")  # the password may go: the device stays
    await start_mx(password_env="MATRIX_PASSWORD")
    assert len(fake_mx.tokens) == tokens  # no second login
    fake_mx.user_message(room, ALICE, "same device")
    await fake_mx.wait_sent(answered("echo: same device"))


async def test_a_refused_token_says_so_and_is_retried(start_mx: Factory, fake_mx: FakeMatrix,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATRIX_ACCESS_TOKEN", "syt_revoked_0000000000000000_fake")
    runner = await start_mx(connect=False)
    mx = adapter(runner)
    await wait_until(lambda: mx.state == "retrying", what="the adapter refused")
    assert "refused the access token in MATRIX_ACCESS_TOKEN" in (mx.last_error or "")
    assert "syt_revoked" not in (mx.last_error or "")


async def test_a_token_from_another_account_is_refused(start_mx: Factory, fake_mx: FakeMatrix,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATRIX_ACCESS_TOKEN", fake_mx.token_for(ALICE))
    runner = await start_mx(connect=False)
    await wait_until(lambda: "belongs to @alice:fake.test" in (adapter(runner).last_error or ""),
                     what="the other account named")


def test_access_tokens_are_masked_in_logs() -> None:
    from gateway.platforms import declare_to_logs

    declare_to_logs()
    line: Any = redact("sync failed with syt_aGVyYWxk_HqsC8bHyCkUyrtaaOPcs_2lSd4Z and MDAx" + "a" * 60)
    assert "aGVyYWxk_Hqs" not in line and "aaaaaaaaaa" not in line
