"""Who may use the API: a live key of one's own, within its rate limit; a client that goes away stops nothing."""

from __future__ import annotations

import asyncio
import time

import pytest
import structlog
import structlog.testing
from openai import AuthenticationError, RateLimitError

from gateway.storage.api_keys import ApiKeyStore
from gateway.storage.tables import messages, outbox
from tests.fakes.llm import Reply
from tests.support.polling import wait_until


async def test_no_key_a_wrong_key_a_revoked_or_expired_key_get_401_in_openais_shape(start_api):
    api = await start_api()
    http = api.client._client
    bare = await http.get(f"{api.base_url}/models")
    assert bare.status_code == 401 and bare.headers["WWW-Authenticate"] == "Bearer"
    assert set(bare.json()["error"]) == {"message", "type", "param", "code"}

    wrong = api.key[:-4] + ("aaaa" if not api.key.endswith("aaaa") else "bbbb")
    for key in (wrong, "sk-proj-not-ours-at-all", "sk-herald-000000000000-" + "x" * 43):
        with pytest.raises(AuthenticationError) as caught:
            await api.client_with(key).models.list()
        assert caught.value.body["code"] == "invalid_api_key"

    keys = ApiKeyStore(api.runner.store)
    assert await keys.revoke("tester") == 1
    with pytest.raises(AuthenticationError):
        await api.client.chat.completions.create(model="herald", messages=[{"role": "user", "content": "hi"}])
    fresh = await keys.create("tester")  # the name is free again once its key is revoked
    assert "herald" in [m.id async for m in api.client_with(fresh).models.list()]

    await keys.create("shortlived", expires_at=time.time() - 1)
    (row,) = [r for r in await keys.list() if r["name"] == "shortlived"]
    assert "key_hash" not in row
    assert await api.inbox() == []


async def test_a_burst_past_the_rate_limit_gets_429_with_retry_after(start_api):
    api = await start_api(api={"requests_per_minute": 3})
    for _ in range(3):
        await api.client.models.list()
    with pytest.raises(RateLimitError) as caught:
        await api.client.models.list()
    retry_after = float(caught.value.response.headers["Retry-After"])
    assert 0 < retry_after <= 60
    assert caught.value.body["code"] == "rate_limit_exceeded"
    # Another key has its own minute.
    other = await ApiKeyStore(api.runner.store).create("other")
    assert "herald" in [m.id async for m in api.client_with(other).models.list()]


async def test_a_client_gone_mid_stream_stops_nothing_and_the_turn_is_stored_once(start_api, fake_llm):
    api = await start_api()
    pieces = [f"part {n}. " for n in range(12)]
    fake_llm.script(Reply.streamed(pieces, chunk_delay=0.15))
    with structlog.testing.capture_logs() as logs:
        stream = await api.client.chat.completions.create(
            model="herald", messages=[{"role": "user", "content": "write slowly"}], stream=True)
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                break  # the first words arrived: the client goes away
        await stream.close()

        async def done() -> list:
            return [r for r in await api.inbox() if r["status"] == "done"]

        (row,) = await wait_until(done, timeout=20, what="the turn finished")
    assert any(e["event"] == "api_client_gone" for e in logs), "the request saw its client go"
    assert row["reply"] == "".join(pieces)
    stored = await api.rows(messages, messages.c.role == "assistant")
    assert [m["content"] for m in stored] == ["".join(pieces)]
    assert [r["status"] for r in await api.rows(outbox, outbox.c.platform == "api")] == ["sent"]
    adapter = api.runner.adapters["api"]
    await wait_until(lambda: not adapter._open and not adapter._chats, what="the request forgotten")
    await wait_until(lambda: not [t for t in asyncio.all_tasks() if t.get_name().startswith("api:")],
                     what="no task of the request left")
