"""``/mcp`` through a real GatewayRunner: the fake MCP server (tests/fakes/mcp_server.py) in the sandbox, a QA
platform whose senders go through the access rules (a plain allowed user and an admin)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.approvals.test_approvals import base
from tests.mcp.servers import stdio_server
from tests.support.polling import wait_until
from tests.support.qa_channel import UntrustedQAAdapter
from tests.talk.test_send_message import write_config

ACCESS = {"allowed_users": ["qa2:friend", "qa2:boss"], "admins": ["qa2:boss"]}


async def ask(qa: Any, text: str, user_id: str) -> str:
    """What the bot answers ``user_id``'s command in their DM."""
    before = len(qa.texts(user_id))
    await qa.say(text, chat_id=user_id, user_id=user_id)
    return (await qa.wait_for(lambda t: len(t) > before, chat_id=user_id))[before]


async def test_mcp_lists_the_servers_resources_and_prompts(make_runner: Any, tmp_path: Path) -> None:
    runner, qa = await make_runner({**base(tmp_path), "access": ACCESS,
                                    "mcp": {"servers": {"fake": stdio_server()}}}, adapters=[UntrustedQAAdapter])
    await wait_until(lambda: "mcp_fake_echo" in runner.mcp.tool_names(), 30, what="the server's tools offered")
    text = await ask(qa, "/mcp", "friend")
    lines = text.splitlines()
    assert any(line.startswith("• fake (stdio): up,") and "echo" in line for line in lines), text
    assert "  resources: note://readme (readme)" in lines, text
    assert "  prompts: summarize" in lines, text


async def test_mcp_reload_is_for_admins_only(make_runner: Any, home: Path, tmp_path: Path) -> None:
    runner, qa = await make_runner({**base(tmp_path), "access": ACCESS,
                                    "mcp": {"servers": {"fake": stdio_server()}}}, adapters=[UntrustedQAAdapter])
    await wait_until(lambda: "mcp_fake_echo" in runner.mcp.tool_names(), 30, what="the server's tools offered")
    # The file on disk no longer names the server: a reload that went through would stop it.
    write_config(home, {"mcp": {"servers": {}}})

    assert await ask(qa, "/mcp reload", "friend") == "Only an admin can reload the MCP servers."
    assert "fake" in runner.mcp.config.servers and "mcp_fake_echo" in runner.mcp.tool_names()
    assert "• fake (stdio): up" in await ask(qa, "/mcp", "friend")

    assert await ask(qa, "/mcp reload", "boss") == "Reloaded mcp.servers: removed fake."
    await wait_until(lambda: "mcp_fake_echo" not in runner.mcp.tool_names(), 30, what="the server stopped")
