"""Markdown -> mrkdwn (gateway/platforms/slack/mrkdwn.py on slackify-markdown), table-tested, and chunking of
the converted text at Slack's limit."""

from __future__ import annotations

import pytest

from gateway.kernel.chunking import chunk_text, utf16_len
from gateway.platforms.base import Button
from gateway.platforms.slack.mrkdwn import escape, to_mrkdwn, unescape
from gateway.platforms.slack.outbound import MAX_TEXT, SlackOutbound, blocks_for

CASES = [
    # emphasis
    ("**bold**", "*bold*"),
    ("__bold__", "*bold*"),
    ("*italic* and _italic_", "_italic_ and _italic_"),
    ("~~gone~~", "~gone~"),
    ("**bold _and italic_**", "*bold _and italic_*"),
    # links
    ("[the docs](https://example.com/a?b=1&c=2)", "<https://example.com/a?b=1&amp;c=2|the docs>"),
    ("<https://example.com>", "<https://example.com|https://example.com>"),
    ("see https://example.com/x", "see https://example.com/x"),
    ("![chart](https://example.com/c.png)", "<https://example.com/c.png|chart>"),
    # code
    ("`x < y && z`", "`x &lt; y &amp;&amp; z`"),
    ("```python\nif a < b:\n    print('ok')\n```", "```\nif a &lt; b:\n    print('ok')\n```"),
    ("```\n**not bold**\n```", "```\n**not bold**\n```"),
    # escaping and mentions
    ("a < b & c > d", "a &lt; b &amp; c &gt; d"),
    ("ping <@U0ALICE>", "ping <@U0ALICE>"),
    ("<!channel> everyone!", "&lt;!channel> everyone!"),
    # blocks
    ("# Title\n\ntext", "*Title*\n\ntext"),
    ("- one\n- two\n  - nested", "•   one\n•   two\n    ◦   nested"),
    ("1. first\n2. second", "1.  first\n2.  second"),
    ("> quoted", "> quoted"),
    ("line one\nline two", "line one\nline two"),
    ("echo: take your time [sleep=2]", "echo: take your time [sleep=2]"),
    ("", ""),
]


@pytest.mark.parametrize(("markdown", "mrkdwn"), CASES)
def test_markdown_becomes_mrkdwn(markdown: str, mrkdwn: str) -> None:
    assert to_mrkdwn(markdown) == mrkdwn


def test_a_table_becomes_an_aligned_code_block_without_markup() -> None:
    table = "Before\n\n| Name | **Size** |\n|---|---:|\n| `a.txt` | 10 |\n| long-name.bin | 2048 |\n\nAfter"
    assert to_mrkdwn(table) == ("Before\n\n```\nName           Size\n-------------  ----\na.txt          10\n"
                                "long-name.bin  2048\n```\nAfter")


def test_a_link_in_a_table_cell_keeps_its_address() -> None:
    table = ("| Doc | Where |\n|---|---|\n| [the guide](https://example.com/g?a=1&b=2) | <https://x.test/> |\n"
             "| ![chart](https://example.com/c.png) | plain |")
    shown = to_mrkdwn(table)
    # Aligned as the client shows it (``&amp;`` reads as ``&``).
    assert unescape(shown) == ("```\nDoc                                        Where\n"
                               "-----------------------------------------  ---------------\n"
                               "the guide (https://example.com/g?a=1&b=2)  https://x.test/\n"
                               "chart (https://example.com/c.png)          plain\n```")
    assert "a=1&amp;b=2" in shown


def test_pipes_that_are_no_table_stay_prose_and_a_table_in_code_stays_code() -> None:
    assert to_mrkdwn("a | b") == "a | b"
    assert to_mrkdwn("```\n| a | b |\n|---|---|\n```") == "```\n| a | b |\n|---|---|\n```"


def test_escape_round_trips() -> None:
    text = "a & <b> &amp;"
    assert unescape(escape(text)) == text


def test_long_converted_text_chunks_under_the_limit_with_code_blocks_closed() -> None:
    code = "\n".join(f"row_{i} = {i} < {i + 1}  # 😀" for i in range(400))
    markdown = "Intro " * 400 + f"\n\n```\n{code}\n```\n\nThe **end**."
    chunks = chunk_text(to_mrkdwn(markdown), MAX_TEXT, utf16_len)
    assert len(chunks) >= 3
    assert all(utf16_len(c) <= MAX_TEXT for c in chunks)
    assert all(c.count("```") % 2 == 0 for c in chunks)
    inside = [line for c in chunks for i, part in enumerate(c.split("```")) if i % 2
              for line in part.strip("\n").split("\n")]
    assert [unescape(line) for line in inside] == code.split("\n")
    assert chunks[-1].endswith("The *end*.")


def test_buttons_become_an_actions_block_with_styles_and_limits() -> None:
    outbound = SlackOutbound(lambda: None, lambda _url: None, lambda _channel, _thread: None)
    long_id = "x" * 1999 + "yz"
    blocks = blocks_for("Pick:", [Button("ap:1:o", "Approve once", "primary"), Button("ap:1:d", "Deny", "danger"),
                                  Button(long_id, "L" * 100)], outbound.buttons.encode)
    assert blocks is not None
    section, actions = blocks
    assert section == {"type": "section", "text": {"type": "mrkdwn", "text": "Pick:"}}
    first, deny, long = actions["elements"]
    assert first["style"] == "primary" and deny["style"] == "danger" and "style" not in long
    assert len({e["action_id"] for e in actions["elements"]}) == 3
    assert len(long["text"]["text"]) == 75
    # An id over Slack's 2000 characters travels as a digest that this process resolves to the whole id
    # (never a truncated one, which would reach another button's handler or none).
    assert len(long["value"]) <= 2000 and long["value"] != long_id[:2000]
    assert outbound.buttons.decode(long["value"]) == long_id and outbound.buttons.decode("ap:1:o") == "ap:1:o"
    assert outbound.buttons.decode("~" + "0" * 40) is None  # a digest from before a restart
    assert blocks_for("no buttons", []) is None
