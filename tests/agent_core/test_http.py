"""The model's HTTP client (agent_core/http.py): keep-alive per worker thread, and what it must never reuse."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from agent_core.llm import Endpoint, LLMClient
from tests.fakes.llm import FakeLLM, Reply
from tests.support.polling import wait_until

MSGS = [{"role": "user", "content": "hi"}]
ANSWER = json.dumps({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"},
                                  "finish_reason": "stop"}]}).encode()


def client(url: str, **kw) -> LLMClient:
    kw.setdefault("rng", lambda: 0.5)
    return LLMClient([Endpoint(url, "m", None)], **kw)


class OneAnswerPerConnection:
    """A raw HTTP/1.1 server that answers one request on a connection as keep-alive, then closes it (as a
    server whose keep-alive timeout ran out does); records each request line and each connection it closed."""

    def __init__(self) -> None:
        self.request_lines: list[bytes] = []
        self.closed = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> OneAnswerPerConnection:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/v1"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        self.request_lines.append(head.split(b"\r\n", 1)[0])
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(ANSWER)
                     + ANSWER)
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        self.closed += 1


async def test_a_connection_the_server_closed_while_idle_is_not_reused():
    """Reusing it would fail the call (and count a fault): the next call opens a new connection instead."""
    faults: list[str] = []
    async with OneAnswerPerConnection() as server:
        llm = client(server.url, max_retries=0, on_fault=faults.append)

        def twice() -> list[str]:
            first = llm.complete(MSGS)["content"]
            wait_until_closed()
            return [first, llm.complete(MSGS)["content"]]

        def wait_until_closed() -> None:
            done = threading.Event()
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(_closed(done)))
            assert done.wait(10)

        async def _closed(done: threading.Event) -> None:
            await wait_until(lambda: server.closed == 1)
            done.set()

        loop = asyncio.get_running_loop()
        assert await asyncio.to_thread(twice) == ["fine", "fine"]
        assert faults == [] and len(server.request_lines) == 2


async def test_a_call_cut_short_closes_its_connection_and_the_next_call_opens_another():
    """The rest of a stopped answer is still on the wire: a later request on that connection would read it."""
    async with FakeLLM() as fake:
        fake.script(Reply.streamed(["one ", "two ", "three ", "four"], 0.05), Reply("next"))
        llm = client(fake.base_url, max_retries=0)
        interrupt = threading.Event()

        def cut_then_ask() -> str:
            try:
                llm.complete(MSGS, None, interrupt, on_text=lambda _p: interrupt.set())
            except Exception as exc:  # the stopped call: LLMError("interrupted")
                assert getattr(exc, "kind", None) == "interrupted", exc
            else:
                raise AssertionError("the stopped call returned")
            return llm.complete(MSGS)["content"]

        assert await asyncio.to_thread(cut_then_ask) == "next"
        assert len(fake.peers) == 2 and len(set(fake.peers)) == 2


async def test_connections_follow_the_calls_made_at_once_and_are_shared_between_threads():
    async with FakeLLM() as fake:
        llm = client(fake.base_url)
        barrier = threading.Barrier(2)

        def three() -> None:
            barrier.wait()
            for _ in range(3):
                llm.complete(MSGS)

        await asyncio.gather(asyncio.to_thread(three), asyncio.to_thread(three))
        assert len(fake.peers) == 6 and 1 <= len(set(fake.peers)) <= 2
        opened = set(fake.peers)

        def three_alone() -> None:  # in a thread that never called: it takes a waiting connection
            for _ in range(3):
                llm.complete(MSGS)

        await asyncio.get_running_loop().run_in_executor(None, three_alone)
        assert set(fake.peers[6:]) <= opened


async def test_connections_idle_too_long_are_closed_as_others_come_back():
    """A burst's connections do not stay open for ever: once idle past IDLE_SECONDS, the next call that gives
    its connection back closes them (the server sees them go)."""
    import agent_core.http as http

    clock = [0.0]
    async with FakeLLM() as fake:
        llm = client(fake.base_url, stream=True)
        transport = llm._clients[0]._client._transport
        transport._clock = lambda: clock[0]
        gate = asyncio.Event()  # each answer holds its connection after its first piece until the gate opens
        fake.script(*(Reply.streamed(["a ", "b"], 0.0, gate=gate) for _ in range(3)))
        calls = asyncio.gather(*(asyncio.to_thread(llm.complete, MSGS) for _ in range(3)))
        await wait_until(lambda: fake.open_connections() == 3, what="three calls at once")
        gate.set()
        await calls  # three connections, given back at 0
        assert len(set(fake.peers)) == 3
        clock[0] = http.IDLE_SECONDS - 1
        await asyncio.to_thread(llm.complete, MSGS)  # the newest is reused, and waits again from here
        clock[0] = http.IDLE_SECONDS + 0.5
        await asyncio.to_thread(llm.complete, MSGS)  # reused again; the two left since 0 are closed
        assert len(set(fake.peers)) == 3
        assert sum(len(idle) for idle in transport._waiting.values()) == 1
        await wait_until(lambda: fake.open_connections() == 1, what="the idle connections closed")


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
async def test_a_proxy_in_the_environment_carries_the_model_calls(monkeypatch, variable):
    """A daemon that reaches its model through a proxy keeps doing so."""
    async with OneAnswerPerConnection() as proxy:
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.setenv(variable, proxy.url.removesuffix("/v1"))
        llm = client("http://model.invalid:8000/v1", max_retries=0)
        assert (await asyncio.to_thread(llm.complete, MSGS))["content"] == "fine"
        assert proxy.request_lines == [b"POST http://model.invalid:8000/v1/chat/completions HTTP/1.1"]


def _self_signed(tmp_path) -> tuple[str, str]:
    """A certificate for 127.0.0.1 signed by itself, and its key: (cert path, key path)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "herald test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


async def test_https_is_verified_against_the_trusted_certificates(tmp_path, monkeypatch):
    """An HTTPS model whose certificate nothing trusts is refused (a connection error, never an answer); trusted
    through SSL_CERT_FILE, as the SDK's own client allows, it answers, and its connection is kept."""
    import ssl

    from agent_core.errors import LLMError

    cert, key = _self_signed(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    fake = FakeLLM()
    fake.ssl_context = server_ctx
    async with fake:
        url = fake.base_url
        assert url.startswith("https://")
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        with pytest.raises(LLMError) as refused:
            await asyncio.to_thread(client(url, max_retries=0).complete, MSGS)
        assert refused.value.kind == "connection" and not fake.requests
        monkeypatch.setenv("SSL_CERT_FILE", cert)
        fake.script(Reply("over tls"), Reply("again"))
        llm = client(url, max_retries=0)
        answers = await asyncio.to_thread(lambda: [llm.complete(MSGS)["content"] for _ in range(2)])
        assert answers == ["over tls", "again"] and len(set(fake.peers)) == 1


async def test_a_streamed_request_body_goes_whole_with_its_length():
    """httpx sends a body given as an iterator in chunked encoding; this client sends it whole, as one the
    server reads by its Content-Length."""
    import httpx2

    from agent_core.http import LeanTransport

    async with OneAnswerPerConnection() as server:
        def post() -> bytes:
            with httpx2.Client(transport=LeanTransport()) as http:
                response = http.post(server.url + "/chat/completions", content=iter([b'{"a":', b" 1}"]))
                return response.content

        assert await asyncio.to_thread(post) == ANSWER
        assert server.request_lines == [b"POST /v1/chat/completions HTTP/1.1"]
