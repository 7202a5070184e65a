from __future__ import annotations

from gateway.db import Store


async def test_inbox_dedupes_and_sessions_round_trip(db_url):
    store = Store(db_url)
    await store.init()
    try:
        first = await store.inbox_add("web", "m1", "k", {"text": "hi"})
        assert first is not None
        assert await store.inbox_add("web", "m1", "k", {"text": "hi again"}) is None
        assert await store.inbox_add("other", "m1", "k", {"text": "same id, other platform"}) is not None
        assert next(r["id"] for r in await store.inbox_unfinished()) == first

        s = await store.session_create("s1", "k", "web", "SYSTEM")
        assert (await store.session_active("k"))["id"] == "s1"
        call = [{"id": "call_1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]
        await store.append_messages("s1", [
            {"role": "user", "content": "run it"},
            {"role": "assistant", "content": None, "tool_calls": call},
            {"role": "tool", "content": '{"ok": true}', "tool_call_id": "call_1"},
            {"role": "assistant", "content": "done"},
        ], inbox_id=first, inbox_status="replied", reply="done")
        history = await store.session_history("s1")
        assert history[1]["tool_calls"] == call and history[2]["tool_call_id"] == "call_1"
        assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
        await store.append_messages("s1", [{"role": "user", "content": "again"},
                                           {"role": "assistant", "content": "ok"}])
        # A tail never starts inside a tool exchange: cut at the next user message.
        assert [m["content"] for m in await store.session_history("s1", limit=5)] == ["again", "ok"]
        assert [m["role"] for m in await store.session_history("s1", limit=6)] == [
            "user", "assistant", "tool", "assistant", "user", "assistant"]
        assert len(await store.session_history("s1", limit=100)) == 6
        assert (await store.inbox_get(first))["reply"] == "done"
        await store.session_end(s["id"], "new")
        assert await store.session_active("k") is None

        assert await store.chat_log_add("web", "c", "u-1", "user", "q")
        assert not await store.chat_log_add("web", "c", "u-1", "user", "q")
        await store.chat_log_edit("web", "u-1", "edited", [{"id": "b", "label": "B"}])
        rows = await store.chat_log_list("web", "c")
        assert rows[0]["text"] == "edited" and rows[0]["buttons"] == [{"id": "b", "label": "B"}]
    finally:
        await store.close()
