"""Media through the API: images in as data: URLs (the media rules of any chat message), files the agent sends
linked from the answer and downloaded with the key that asked."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.api import files as api_files
from gateway.storage.api_keys import ApiKeyStore
from tests.api.conftest import Api
from tests.fakes.llm import Reply, ToolCall
from tests.support.media import image_bytes, workspace_with
from tests.support.polling import wait_until


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def attachments(api: Api) -> list[Path]:
    folder = Path(api.runner.media.inbound_dir)
    return sorted(p for p in folder.iterdir() if p.is_file()) if folder.exists() else []


def user_turn(request: dict[str, Any]) -> Any:
    """The content of the last user message the model was sent."""
    return [m for m in request["messages"] if m["role"] == "user"][-1]["content"]


async def test_an_image_reaches_a_vision_model_as_an_image_part_and_stays_in_the_workspace(start_api, fake_llm):
    api = await start_api(model={"vision": True})
    png = image_bytes(40, 30)
    fake_llm.script(Reply("A red rectangle."))
    answer = await api.client.chat.completions.create(model="herald", messages=[{"role": "user", "content": [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": data_url(png)}}]}])
    assert answer.choices[0].message.content == "A red rectangle."
    content = user_turn(fake_llm.requests[-1])
    assert isinstance(content, list) and content[0]["type"] == "text" and "what is this?" in content[0]["text"]
    assert [p["type"] for p in content[1:]] == ["image_url"]
    assert content[1]["image_url"]["url"].startswith("data:image/")
    [saved] = attachments(api)
    assert saved.read_bytes() == png  # the original, as sent; the model got the prepared copy
    (session,) = await api.sessions()
    [(role, stored), _] = await api.said(session["id"])
    assert role == "user" and str(saved) in stored and "base64" not in stored  # a reference, never the bytes


async def test_an_image_for_a_model_without_vision_is_its_path_and_a_note(start_api, fake_llm):
    api = await start_api()
    fake_llm.script(Reply("I cannot see it."))
    await api.client.responses.create(model="herald", input=[{"role": "user", "content": [
        {"type": "input_text", "text": "look"}, {"type": "input_image", "image_url": data_url(image_bytes())}]}])
    content = user_turn(fake_llm.requests[-1])
    [saved] = attachments(api)
    assert isinstance(content, str) and str(saved) in content and "cannot see images" in content


async def test_a_resent_history_with_an_image_writes_nothing_new_and_continues_the_session(start_api, fake_llm):
    api = await start_api(model={"vision": True})
    image = {"type": "image_url", "image_url": {"url": data_url(image_bytes(32, 32))}}
    history: list[dict[str, Any]] = [{"role": "user", "content": [image]}]
    one = await api.client.chat.completions.create(model="herald", messages=history)
    assert len(attachments(api)) == 1
    history += [{"role": "assistant", "content": one.choices[0].message.content},
                {"role": "user", "content": "and now?"}]
    await api.client.chat.completions.create(model="herald", messages=history)
    assert len(attachments(api)) == 1  # the image of an earlier message is the session's already
    (session,) = await api.sessions()  # the stored history (with the image's path) matched the client's
    said = await api.said(session["id"])
    assert [role for role, _ in said] == ["user", "assistant", "user", "assistant"]
    # The model still sees the earlier image, read again from the workspace.
    earlier = next(m for m in fake_llm.requests[-1]["messages"] if m["role"] == "user")["content"]
    assert isinstance(earlier, list) and earlier[1]["type"] == "image_url"


@pytest.mark.parametrize(("part", "code"), [
    ({"type": "image_url", "image_url": {"url": "data:image/png;base64,!!!not base64!!!"}}, "invalid_image_url"),
    ({"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}, "invalid_image_url"),
    ({"type": "image_url", "image_url": {"url": data_url(b"<html>hello</html>", "image/png")}},
     "invalid_image_format"),
    ({"type": "image_url", "image_url": {"url": data_url(b"%PDF-1.4 ...", "application/pdf")}},
     "invalid_image_format"),
    ({"type": "image_url", "image_url": {"url": data_url(image_bytes(200, 200, fmt="BMP"), "image/bmp")}},
     "image_too_large"),
])
async def test_an_image_the_api_cannot_take_is_a_400_and_the_model_is_not_asked(start_api, fake_llm, monkeypatch,
                                                                               part, code):
    monkeypatch.setattr(api_files, "MAX_IMAGE_BYTES", 64 * 1024)
    api = await start_api()
    http = api.client._client
    asked = len(fake_llm.requests)
    answer = await http.post(f"{api.base_url}/chat/completions", headers={"Authorization": f"Bearer {api.key}"},
                             json={"model": "herald", "messages": [{"role": "user", "content": [
                                 {"type": "text", "text": "see"}, part]}]})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["code"] == code
    assert error["param"] == "messages[0].content[1].image_url"
    if "https://" in str(part):
        assert "data: URL" in error["message"]
    assert len(fake_llm.requests) == asked and await api.inbox() == [] and attachments(api) == []


async def test_a_file_the_agent_sends_is_a_link_only_its_key_downloads(start_api, fake_llm):
    api = await start_api()
    workspace_with(api.runner, {"report.csv": b"a,b\n1,2\n"})
    fake_llm.script(ToolCall("send_file", {"path": "report.csv"}), Reply("Here is the report."))
    answer = await api.client.chat.completions.create(
        model="herald", messages=[{"role": "user", "content": "the report please"}])
    text = answer.choices[0].message.content
    assert text.startswith("Here is the report.")
    found = re.search(r"\[report\.csv\]\((http://[^)]+/v1/files/[^)]+)\)", text)
    assert found is not None, text
    link = found[1]
    async with httpx.AsyncClient() as http:
        got = await http.get(link, headers={"Authorization": f"Bearer {api.key}"})
        assert got.status_code == 200 and got.content == b"a,b\n1,2\n"
        assert got.headers["Content-Disposition"].startswith("attachment;")
        assert got.headers["Content-Type"] == "application/octet-stream"
        assert (await http.get(link)).status_code == 401
        other = await ApiKeyStore(api.runner.store).create("someone-else")
        assert (await http.get(link, headers={"Authorization": f"Bearer {other}"})).status_code == 404
        unknown = link.rsplit("/", 2)[0] + "/" + "A" * 32 + "/report.csv"
        missing = await http.get(unknown, headers={"Authorization": f"Bearer {api.key}"})
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "file_not_found"


async def test_a_streamed_answer_ends_with_the_links_of_the_files_sent(start_api, fake_llm):
    api = await start_api()
    workspace_with(api.runner, {"notes.txt": b"notes\n"})
    fake_llm.script(ToolCall("send_file", {"path": "notes.txt"}), Reply("Sent."))
    stream = await api.client.chat.completions.create(
        model="herald", messages=[{"role": "user", "content": "notes"}], stream=True)
    pieces = [c.choices[0].delta.content async for c in stream if c.choices and c.choices[0].delta.content]
    assert re.search(r"\[notes\.txt\]\(http://[^)]+/v1/files/", "".join(pieces))
    await wait_until(lambda: _done(api), what="the request answered")


async def _done(api: Api) -> bool:
    return any(r["status"] == "done" for r in await api.inbox())
