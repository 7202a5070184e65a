"""The dashboard's HTTP side: the page shell needs no token (it asks for one) and forbids inline script;
everything it shows or does is under /api/ and needs the web chat's bearer token; bad input is a 400."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import Herald

pytestmark = pytest.mark.e2e


def test_the_shell_is_open_and_the_data_is_behind_the_token(herald: Herald) -> None:
    page = herald.get("/dashboard", auth=False)
    assert page.status == 200 and "needs Herald's access token" in page.body
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    assert herald.get("/dashboard/static/dashboard.js", auth=False).status == 200
    assert herald.get("/dashboard/static/../web_token", auth=False).status == 404
    for path in ("/api/v1/dashboard/view", "/api/v1/dashboard/events"):
        assert herald.get(path, auth=False).status == 401
        assert herald.get(path, auth="Bearer wrong").status == 401
    assert herald.request("POST", "/api/v1/dashboard/approvals/abc", {"choice": "o"}, auth=False).status == 401
    assert herald.request("POST", "/api/v1/dashboard/sessions/reset", {"key": "web:dm:x"}, auth=False).status == 401

    view = herald.get("/api/v1/dashboard/view")
    assert view.status == 200 and 'id="adapters"' in view.body["html"]
    assert herald.get("/api/v1/dashboard/view?view=elsewhere").status == 400
    assert herald.request("POST", "/api/v1/dashboard/approvals/abc", {"choice": "always"}).status == 400
    gone = herald.request("POST", "/api/v1/dashboard/approvals/0000000000000000", {"choice": "o"})
    assert gone.status == 200 and "no longer active" in gone.body["notice"]


def test_chat_text_is_escaped_in_the_views(herald: Herald) -> None:
    herald.post("hello", chat_id="<img src=x onerror=alert(1)>")
    herald.wait_for_replies("<img src=x onerror=alert(1)>", 1)
    html = herald.get("/api/v1/dashboard/view").body["html"]
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_recent_delivery_failures_show_escaped(herald: Herald) -> None:
    import re
    import sqlite3
    import time

    # A reply chunk the platform refused for good, as the delivery layer records it; the daemon's own
    # database, written beside it (SQLite in WAL mode takes a second writer's short transaction).
    db = sqlite3.connect(herald.home / "state.db", timeout=30)
    with db:
        db.execute("INSERT INTO outbox (platform, chat_id, chunk_index, status, error, created_at, updated_at) "
                   "VALUES (?, ?, 0, 'failed', ?, ?, ?)",
                   ("telegram", "<b>chat</b>", "Forbidden: bot was blocked <script>x()</script>", time.time() - 5,
                    time.time()))
        db.execute("INSERT INTO outbox (platform, chat_id, chunk_index, status, error, created_at) "
                   "VALUES ('telegram', 'delivered-chat', 0, 'sent', NULL, ?)", (time.time(),))
    db.close()
    deadline = time.monotonic() + 15
    while True:
        html = herald.get("/api/v1/dashboard/view").body["html"]
        section = re.search(r'<section id="failures">(.*?)</section>', html, re.S)
        assert section is not None, html
        if "No failed deliveries." not in section.group(1) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    body = section.group(1)
    assert '<span class="count">1</span>' in body, body  # the failed chunk only, not the sent one
    assert "<td>reply</td><td>telegram:&lt;b&gt;chat&lt;/b&gt;</td>" in body, body
    assert '<td class="error">Forbidden: bot was blocked &lt;script&gt;x()&lt;/script&gt;</td>' in body
    assert "<script>" not in html and "<b>chat</b>" not in html and "delivered-chat" not in body
