from __future__ import annotations

import pytest

from agent_core.jsonrepair import cut_off, repair_json
from agent_core.prompt import build_system_prompt


@pytest.mark.parametrize(
    ("raw", "expected", "repaired"),
    [
        ('{"a": 1}', {"a": 1}, False),
        ("", {}, False),
        (None, {}, False),
        ("   ", {}, False),
        ('```json\n{"a": 1}\n```', {"a": 1}, True),
        ('```\n{"a": 1}\n```', {"a": 1}, True),
        ('{"a": [1, 2,],}', {"a": [1, 2]}, True),
        ('{"s": "keep, } this,]"}', {"s": "keep, } this,]"}, False),
        ("{'a': 'x', 'b': True, 'c': None}", {"a": "x", "b": True, "c": None}, True),
        ("{'q': 'say \"hi\"'}", {"q": 'say "hi"'}, True),
        ("{'it': 'it\\'s'}", {"it": "it's"}, True),
        ('{"command": "echo hi"', {"command": "echo hi"}, True),
        ('{"a": {"b": "unterminated', {}, True),  # cut inside a value: what it meant is unknown
        ('{"command": "rm -rf /home/me', {}, True),
        ('{"s": "ends in an escape \\', {}, True),
        ('{"a": [1, 2', {"a": [1, 2]}, True),
        ('{"a": 1,', {"a": 1}, True),
        ('{"a": 1, "b":', {"a": 1}, True),
        ('"{\\"a\\": 1}"', {"a": 1}, True),
        ("[1, 2]", {}, True),
        ("not json at all", {}, True),
        ("{a:", {}, True),
    ],
)
def test_repair_table(raw, expected, repaired):
    assert repair_json(raw) == (expected, repaired)


@pytest.mark.parametrize(("raw", "cut"), [
    ('{"command": "rm -rf /home/me', True),
    ('```json\n{"content": "half a fi', True),
    ('{"a": "x \\"quoted', True),
    ('{"command": "echo hi"', False),  # every value whole: only the braces are missing
    ('{"a": 1}', False),
    ('{"s": "keep, } this"}', False),
    ("", False),
    (None, False),
])
def test_cut_off_tells_a_value_cut_in_the_middle(raw, cut):
    assert cut_off(raw) is cut


def test_system_prompt_is_byte_stable_and_ordered():
    a = build_system_prompt("You are Herald.  \r\n", "Telegram: use short messages.", ["one", "", "two"])
    b = build_system_prompt("You are Herald.", "Telegram: use short messages.\n", ["one", "two  "])
    assert a == b == "You are Herald.\n\nTelegram: use short messages.\n\none\n\ntwo"
    assert build_system_prompt("id") == "id"
    assert build_system_prompt("id", None, ["b", "a"]).endswith("b\n\na")
