"""Slack's media end to end (slack-bolt and slack_sdk against the fake Slack): shared images reach a vision model
as images, several in one message in one turn; files the agent sends go through the external upload flow
(files.getUploadURLExternal, the upload, files.completeUploadExternal), once, in the thread, after the text."""

from __future__ import annotations

from tests.fakes.llm import Reply, ToolCall
from tests.fakes.slack_api import BOT_USER
from tests.platforms.slack.test_slack import CHANNEL, DM, say
from tests.support.media import image_bytes, image_parts, workspace_with


async def test_shared_images_reach_a_vision_model_in_one_turn(start_slack, fake_slack, fake_llm):
    await start_slack(overrides={"model": {"vision": True}})
    files = [fake_slack.add_file(image_bytes(color=(n, 9, 9)), f"screen{n}.png") for n in range(2)]
    await say(fake_slack, DM, "what changed?", files=files)
    await fake_slack.wait_sent(lambda s: any(m.text.startswith("echo: what changed?") for m in s))
    assert len(fake_llm.requests) == 1 and len(image_parts(fake_llm.requests[0])) == 2


async def test_send_file_uses_the_external_upload_once_in_the_thread_after_the_text(start_slack, fake_slack,
                                                                                     fake_llm):
    runner = await start_slack()
    workspace_with(runner, {"config.patch": b"--- a\n+++ b\n", "graph.png": image_bytes(50, 50)})
    fake_llm.script(ToolCall("send_file", {"path": "config.patch", "caption": "the *patch*"}),
                    ToolCall("send_file", {"path": "graph.png"}), Reply("Patch and graph attached."))
    ts = await say(fake_slack, CHANNEL, f"<@{BOT_USER}> make the patch")
    await fake_slack.wait_until(lambda: len(fake_slack.shared) == 2, what="two files shared")
    [text] = await fake_slack.wait_sent(lambda s: any(m.text == "Patch and graph attached." for m in s))
    patch, graph = fake_slack.shared
    assert (patch.name, patch.content, patch.channel) == ("config.patch", b"--- a\n+++ b\n", CHANNEL)
    assert patch.comment == "the _patch_" and patch.thread_ts == ts and graph.thread_ts == ts
    assert (graph.name, graph.content) == ("graph.png", image_bytes(50, 50))
    assert float(text.ts) < float(patch.ts) < float(graph.ts)
    assert "files.upload" not in fake_slack.calls
    assert fake_slack.calls.count("files.completeUploadExternal") == 2
