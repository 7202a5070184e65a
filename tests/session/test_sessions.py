from __future__ import annotations

import datetime as dt

import pytest

from gateway.config import SessionsConfig
from gateway.platforms.base import Source
from gateway.session.keys import session_key
from gateway.session.manager import reset_due

UTC = dt.UTC


def test_keys_separate_chats_threads_and_group_users():
    dm = Source("telegram", "1", "9")
    assert session_key(dm) == "telegram:dm:1"
    g1 = Source("telegram", "-5", "9", chat_type="group")
    g2 = Source("telegram", "-5", "8", chat_type="group")
    assert session_key(g1) != session_key(g2)
    assert session_key(g1, per_user_in_groups=False) == session_key(g2, per_user_in_groups=False)
    topic = Source("telegram", "-5", "9", chat_type="group", thread_id="42")
    assert session_key(topic) != session_key(g1)


def ts(y, mo, d, h, mi=0):
    return dt.datetime(y, mo, d, h, mi, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(("mode", "last", "now", "expected"), [
    ("idle", ts(2026, 1, 1, 10), ts(2026, 1, 1, 10, 59), None),
    ("idle", ts(2026, 1, 1, 10), ts(2026, 1, 1, 11, 1), "idle"),
    ("daily", ts(2026, 1, 1, 3), ts(2026, 1, 1, 5), "daily"),
    ("daily", ts(2026, 1, 1, 5), ts(2026, 1, 1, 23), None),
    ("daily", ts(2026, 1, 1, 5), ts(2026, 1, 2, 3), None),
    ("daily", ts(2026, 1, 1, 5), ts(2026, 1, 2, 4, 1), "daily"),
    ("none", ts(2020, 1, 1, 0), ts(2026, 1, 1, 0), None),
])
def test_reset_policies(mode, last, now, expected):
    cfg = SessionsConfig.model_validate({"reset": {"mode": mode, "idle_minutes": 60, "daily_hour": 4}})
    assert reset_due(cfg, last, now, tz=UTC) == expected


@pytest.mark.parametrize("weird", ["a:b", "a/b", "a b", "%3A", "t1", "u1", ":", "a:u1"])
def test_ids_with_any_characters_never_share_a_key(weird):
    """Every component is encoded: an id containing ':' or '/' can't impersonate another chat or user."""
    plain = Source("slack", "C1", "U1", chat_type="group", thread_id="T1", scope="W1")
    variants = [
        Source("slack", weird, "U1", chat_type="group", thread_id="T1", scope="W1"),
        Source("slack", "C1", weird, chat_type="group", thread_id="T1", scope="W1"),
        Source("slack", "C1", "U1", chat_type="group", thread_id=weird, scope="W1"),
        Source("slack", "C1", "U1", chat_type="group", thread_id="T1", scope=weird),
        Source("slack", f"C1:t{weird}", "U1", chat_type="group", scope="W1"),
    ]
    keys = {session_key(s) for s in [plain, *variants]}
    assert len(keys) == len(variants) + 1
    for s in variants:  # the same source always gives the same key
        assert session_key(s) == session_key(Source(**s.to_dict()))


def test_scope_separates_workspaces():
    assert session_key(Source("slack", "C1", "U1", scope="W1")) != session_key(Source("slack", "C1", "U1", scope="W2"))
