"""MCP calls through a real GatewayRunner and the QA channel: "Approve for this session" covers that server, that
tool and those very arguments, nothing else; every call, asked or not, is a row of the audit trail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.approvals.test_approvals import base, prompt_id, prompts, rows, wait_prompts, wait_tool_result
from tests.mcp.servers import stdio_server
from tests.support.polling import wait_until


def call(tool: str, args: dict[str, Any]) -> str:
    return f"[tool={tool}:{json.dumps(args)}]"


async def test_a_session_grant_covers_the_same_call_only(make_runner: Any, tmp_path: Path) -> None:
    runner, qa = await make_runner({**base(tmp_path), "mcp": {"servers": {"fake": stdio_server()}}})
    await wait_until(lambda: "mcp_fake_write" in runner.mcp.tool_names(), 30, what="the server's tools offered")

    await qa.say(call("mcp_fake_write", {"name": "a"}))
    (prompt,) = await wait_prompts(qa, 1)
    await qa.click(f"ap:{prompt_id(prompt)}:s")
    assert (await wait_tool_result(qa, 1))["content"] == "wrote a x1"
    await qa.say(call("mcp_fake_write", {"name": "a"}))
    assert (await wait_tool_result(qa, 2))["content"] == "wrote a x1" and len(prompts(qa)) == 1

    await qa.say(call("mcp_fake_write", {"name": "b"}))  # other arguments: asked again
    (_, again) = await wait_prompts(qa, 2)
    await qa.click(f"ap:{prompt_id(again)}:d")
    assert (await wait_tool_result(qa, 3))["status"] == "denied"
    await qa.say(call("mcp_fake_echo", {"text": "hi"}))  # read-only: not asked, still recorded
    assert (await wait_tool_result(qa, 4))["content"] == "echo: hi" and len(prompts(qa)) == 2

    logged = [json.loads(line) for line in (tmp_path / "calls.log").read_text().splitlines()]
    assert logged == [{"tool": "write", "name": "a", "count": 1}] * 2
    audit = sorted((r["status"], r["scope"], r["decided_via"], r["level"]) for r in await rows(runner))
    assert audit == sorted([("approved", "session", "button", "dangerous"),
                            ("approved", "session", "auto", "dangerous"),
                            ("denied", None, "button", "dangerous"), ("approved", "mcp", "auto", "safe")])
