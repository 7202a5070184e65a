"""LLMClient retry, backoff, fallback and error classification, against the fake server."""

from __future__ import annotations

import asyncio
import email.utils
import threading
import time

import pytest

from agent_core.llm import Endpoint, LLMClient, LLMError, endpoints_from_config, parse_retry_after
from gateway.config import ModelConfig
from tests.fakes.llm import Drop, Error, FakeLLM, Hang, Reply

MSGS = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def fake():
    async with FakeLLM() as f:
        yield f


@pytest.fixture
async def backup():
    async with FakeLLM() as f:
        yield f


class Sleeps(list):
    """Records backoff delays instead of sleeping."""

    def __call__(self, delay: float) -> None:
        self.append(delay)


def client(*urls_or_endpoints, **kw) -> LLMClient:
    eps = [e if isinstance(e, Endpoint) else Endpoint(e, "m", None) for e in urls_or_endpoints]
    kw.setdefault("rng", lambda: 0.5)
    return LLMClient(eps, **kw)


async def complete(llm: LLMClient, **kw):
    return await asyncio.to_thread(llm.complete, MSGS, None, kw.get("interrupt"))


async def test_429_retry_after_is_honoured(fake):
    sleeps = Sleeps()
    fake.script(Error(429, retry_after=7), Reply("ok"))
    msg = await complete(client(fake.base_url, sleep=sleeps))
    # The message, the model it was asked of (prices are per model) and the usage the API reported.
    usage = msg.pop("usage")
    assert msg == {"role": "assistant", "content": "ok", "model": "m"}
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert sleeps == [7.0]


async def test_500_twice_then_success_with_exponential_jittered_backoff(fake):
    sleeps = Sleeps()
    fake.script(Error(500), Error(500), Reply("recovered"))
    msg = await complete(client(fake.base_url, sleep=sleeps))
    assert msg["content"] == "recovered"
    # rng=0.5 -> equal jitter gives 3/4 of each exponential step (1s, 2s).
    assert sleeps == [0.75, 1.5]
    assert len(fake.requests) == 3


async def test_backoff_is_capped():
    llm = LLMClient([Endpoint("http://127.0.0.1:9/v1", "m")], rng=lambda: 1.0)
    assert [llm._delay(n, None) for n in (0, 1, 4, 5, 10)] == [1.0, 2.0, 16.0, 30.0, 30.0]


async def test_all_retries_fail_then_fallback_is_used(fake, backup):
    sleeps = Sleeps()
    fake.script(*[Error(503)] * 4)
    backup.script(Reply("from backup"))
    llm = client(Endpoint(fake.base_url, "primary"), Endpoint(backup.base_url, "backup", "key2"), sleep=sleeps)
    msg = await complete(llm)
    assert msg["content"] == "from backup"
    assert len(fake.requests) == 4 and len(sleeps) == 3
    assert [r["model"] for r in backup.requests] == ["backup"]
    assert backup.auth_headers == ["Bearer key2"]


async def test_everything_fails_raises_last_error(fake, backup):
    fake.script(*[Error(500)] * 2)
    backup.script(*[Error(429)] * 2)
    llm = client(fake.base_url, backup.base_url, sleep=Sleeps(), max_retries=1)
    with pytest.raises(LLMError) as err:
        await complete(llm)
    assert (err.value.kind, err.value.status, err.value.retryable) == ("rate_limit", 429, True)
    assert err.value.endpoint == backup.base_url


async def test_auth_error_moves_to_fallback_without_retry(backup):
    sleeps = Sleeps()
    async with FakeLLM(api_key="right") as fake:
        llm = client(Endpoint(fake.base_url, "m", "wrong"), Endpoint(backup.base_url, "m"), sleep=sleeps)
        assert (await complete(llm))["content"] == "echo: hi"
        assert len(fake.requests) == 1 and sleeps == []

        with pytest.raises(LLMError) as err:
            await complete(client(Endpoint(fake.base_url, "m", "wrong")))
    assert (err.value.kind, err.value.status, err.value.retryable) == ("auth", 401, False)
    assert err.value.user_message() == "The model endpoint rejected the API key (401). Check model.api_key_env."


async def test_context_overflow_is_not_retried_nor_sent_to_fallback(fake, backup):
    fake.script(Error.context_overflow())
    with pytest.raises(LLMError) as err:
        await complete(client(fake.base_url, backup.base_url, sleep=Sleeps()))
    assert err.value.kind == "context_overflow"
    assert "/new" in err.value.user_message()
    assert len(fake.requests) == 1 and backup.requests == []


async def test_long_retry_after_skips_to_fallback(fake, backup):
    sleeps = Sleeps()
    fake.script(Error(429, retry_after=3600))
    msg = await complete(client(fake.base_url, backup.base_url, sleep=sleeps))
    assert msg["content"] == "echo: hi" and sleeps == []


async def test_timeout_then_retry_succeeds(fake):
    sleeps = Sleeps()
    fake.script(Hang(5), Reply("second try"))
    msg = await complete(client(fake.base_url, sleep=sleeps, timeout=0.2, max_retries=1))
    assert msg["content"] == "second try" and len(sleeps) == 1


async def test_timeout_exhausted_is_classified(fake):
    fake.script(Hang(5))
    with pytest.raises(LLMError) as err:
        await complete(client(fake.base_url, timeout=0.2, max_retries=0))
    assert err.value.kind == "timeout" and err.value.retryable


async def test_dropped_connection_is_retried(fake):
    sleeps = Sleeps()
    fake.script(Drop(), Reply("back"))
    assert (await complete(client(fake.base_url, sleep=sleeps)))["content"] == "back"
    assert len(sleeps) == 1


async def test_connection_refused_is_connection_error():
    llm = client("http://127.0.0.1:9/v1", max_retries=0)
    with pytest.raises(LLMError) as err:
        await complete(llm)
    assert err.value.kind == "connection"
    assert "base_url" in err.value.user_message()


async def test_interrupt_during_backoff_wait(fake):
    interrupt = threading.Event()

    def sleep(delay: float) -> None:
        interrupt.set()

    fake.script(Error(500), Reply("never"))
    with pytest.raises(LLMError) as err:
        await complete(client(fake.base_url, sleep=sleep), interrupt=interrupt)
    assert err.value.kind == "interrupted"
    assert len(fake.requests) == 1


async def test_interrupt_wakes_real_backoff_wait(fake):
    # No injected sleep: the wait itself must return as soon as the interrupt is set.
    interrupt = threading.Event()
    got_request = asyncio.Event()

    def responder(req):
        got_request.set()
        return Error(429, retry_after=50)

    fake.responder = responder
    task = asyncio.create_task(complete(client(fake.base_url), interrupt=interrupt))
    await got_request.wait()
    interrupt.set()
    with pytest.raises(LLMError) as err:
        await asyncio.wait_for(task, 10)
    assert err.value.kind == "interrupted"


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (401, "auth", False),
        (403, "auth", False),
        (429, "rate_limit", True),
        (500, "server", True),
        (502, "server", True),
        (503, "overloaded", True),
        (529, "overloaded", True),
        (400, "bad_request", False),
        (404, "bad_request", False),
        (413, "context_overflow", False),
    ],
)
async def test_status_classification(fake, status, kind, retryable):
    fake.script(Error(status))
    with pytest.raises(LLMError) as err:
        await complete(client(fake.base_url, max_retries=0))
    assert (err.value.kind, err.value.status, err.value.retryable) == (kind, status, retryable)
    assert err.value.user_message()


async def test_insufficient_quota_is_not_retried(fake):
    fake.script(Error(429, code="insufficient_quota", message="You exceeded your current quota"))
    with pytest.raises(LLMError) as err:
        await complete(client(fake.base_url, sleep=Sleeps()))
    assert err.value.kind == "rate_limit" and not err.value.retryable
    assert len(fake.requests) == 1


async def test_context_overflow_detected_from_message_only(fake):
    fake.script(Error(400, message="prompt is too long: 200000 tokens > 128000 maximum"))
    with pytest.raises(LLMError) as err:
        await complete(client(fake.base_url))
    assert err.value.kind == "context_overflow"


def test_parse_retry_after_variants():
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= parse_retry_after({"retry-after": future}) <= 31
    assert parse_retry_after({"retry-after": "garbage"}) is None
    assert parse_retry_after({}) is None


def test_endpoints_from_config():
    cfg = ModelConfig(
        base_url="http://a/v1",
        name="m1",
        api_key_env="K1",
        fallbacks=[{"base_url": "http://b/v1", "name": "m2", "api_key_env": "MISSING"}],
    )
    eps = endpoints_from_config(cfg, environ={"K1": "secret"})
    assert eps == [Endpoint("http://a/v1", "m1", "secret"), Endpoint("http://b/v1", "m2", None)]
    llm = LLMClient.from_config(cfg)
    assert llm.max_retries == cfg.max_retries and len(llm.endpoints) == 2


def test_llm_client_needs_an_endpoint():
    with pytest.raises(ValueError):
        LLMClient([])
