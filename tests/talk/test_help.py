"""/help names the agent's tools for the conversation, whether they are on, and what busy and edited messages do."""

from __future__ import annotations


async def test_help_lists_the_tools_and_the_modes(make_runner):
    _runner, qa = await make_runner({"gateway": {"busy_mode": "steer", "on_edit": "new_turn"}})
    await qa.say("/help")
    (text,) = await qa.wait_for(lambda t: len(t) == 1)
    assert "/steer" in text and "Commands:" in text
    for tool in ("clarify —", "send_message —", "web_fetch —"):
        assert tool in text and f"{tool.split()[0]} — " in text
    assert "web_search — searches the internet (off here)" in text  # no search service configured
    assert "is added to what I'm doing" in text and "answered as a new message" in text
