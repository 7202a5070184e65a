"""The egress proxy itself (tools/egress.py), spoken to on its unix socket: the address rules as a table,
SOCKS5 and HTTP requests, refusals, and what a stopped proxy leaves behind. Nothing leaves this machine:
the resolver and the dialer are the test's."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tools.egress import PROXY_SOCKET, Egress, Rules, port_socket, refusal

PUBLIC = ["93.184.216.34", "8.8.8.8", "2606:2800:220:1:248:1893:25c8:1946", "2a00:1450:4001:80b::200e"]
REFUSED = {
    "127.0.0.1": "loopback", "127.8.9.10": "loopback", "::1": "loopback", "0.0.0.0": "unspecified", "::": "unspecified",
    "10.1.2.3": "private", "172.16.0.1": "private", "192.168.1.1": "private", "fd00::1": "private",
    "fc00::5": "private", "169.254.169.254": "link-local", "fe80::1": "link-local", "100.64.0.1": "carrier-grade",
    "100.100.100.200": "carrier-grade", "224.0.0.1": "multicast", "239.255.255.250": "multicast",
    "ff02::1": "multicast", "::ffff:127.0.0.1": "loopback", "::ffff:10.0.0.1": "private",
    "::ffff:169.254.169.254": "link-local", "2002:7f00:1::": "loopback", "64:ff9b::a00:1": "private",
    "64:ff9b::7f00:1": "loopback", "2001:0:4136:e378:8000:63bf:80ff:fffe": "",  # Teredo to 127.0.0.1
    "192.0.2.1": "", "198.51.100.7": "", "203.0.113.9": "", "240.0.0.1": "", "255.255.255.255": "",
    "192.0.0.170": "", "198.18.0.1": "", "2001:db8::1": "",
}


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str) -> None:
    assert refusal(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(("address", "why"), REFUSED.items())
def test_addresses_the_sandbox_may_not_reach(address: str, why: str) -> None:
    reason = refusal(ipaddress.ip_address(address))
    assert reason is not None and why in reason, (address, reason)


def test_allowed_domain_patterns() -> None:
    rules = Rules(["Example.com", "*.github.com", "1.2.3.4", "2001:db8::1"])
    assert rules.allows("example.com") and not rules.allows("www.example.com")
    assert rules.allows("api.github.com") and rules.allows("a.b.github.com") and not rules.allows("github.com")
    assert not rules.allows("evilgithub.com") and not rules.allows("github.com.evil.net")
    assert rules.allows("1.2.3.4") and not rules.allows("1.2.3.5") and rules.allows("2001:0db8::0001")
    assert Rules().allows("anything.example")


# ---- speaking to the proxy ----------------------------------------------------------------------------------


class Upstream:
    """The test's 'internet': one echo server; the dialer records which address it was asked for."""

    def __init__(self) -> None:
        self.dialed: list[tuple[str, int]] = []
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self) -> None:
        async def echo(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            while data := await r.read(65536):
                w.write(data)
                await w.drain()
            w.close()

        self.server = await asyncio.start_server(echo, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]


@pytest.fixture
async def proxy() -> AsyncIterator[tuple[Egress, Upstream]]:
    up = Upstream()
    await up.start()
    names = {"public.example": ["93.184.216.34"], "inside.example": ["192.168.0.9"]}

    async def resolve(host: str, port: int) -> list[str]:
        if host not in names:
            raise socket.gaierror("unknown")
        return names[host]

    async def dial(address: str, port: int) -> Any:
        up.dialed.append((address, port))
        return await asyncio.open_connection("127.0.0.1", up.port)

    egress = Egress(resolve=resolve, dial=dial, host_ports=[up.port])
    await asyncio.to_thread(egress.start)
    yield egress, up
    await asyncio.to_thread(egress.stop)
    assert up.server is not None
    up.server.close()


async def _open(egress: Egress, name: str = PROXY_SOCKET) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    assert egress.point is not None
    return await asyncio.open_unix_connection(str(Path(egress.point.folder) / name))


async def _socks(egress: Egress, atyp: int, address: bytes, port: int, methods: bytes = b"\x00",
                 command: int = 1) -> tuple[bytes, asyncio.StreamReader, asyncio.StreamWriter]:
    r, w = await _open(egress)
    w.write(b"\x05" + bytes([len(methods)]) + methods)
    choice = await r.readexactly(2)
    if choice != b"\x05\x00":
        return choice, r, w
    w.write(bytes([5, command, 0, atyp]) + address + struct.pack("!H", port))
    return await r.readexactly(10), r, w


async def test_socks5_by_name_and_address(proxy: tuple[Egress, Upstream]) -> None:
    egress, up = proxy
    reply, r, w = await _socks(egress, 3, bytes([14]) + b"public.example", 443)
    assert reply[1] == 0
    w.write(b"ping")
    assert await r.readexactly(4) == b"ping"
    w.close()
    reply, r, w = await _socks(egress, 1, socket.inet_aton("93.184.216.34"), 80)
    assert reply[1] == 0
    w.close()
    reply, r, w = await _socks(egress, 4, socket.inet_pton(socket.AF_INET6, "2606:2800:220:1::1"), 80)
    assert reply[1] == 0
    w.close()
    assert up.dialed == [("93.184.216.34", 443), ("93.184.216.34", 80), ("2606:2800:220:1::1", 80)]


async def test_socks5_refusals(proxy: tuple[Egress, Upstream]) -> None:
    egress, up = proxy
    cases = [((1, socket.inet_aton("127.0.0.1"), 22), 2), ((3, bytes([14]) + b"inside.example", 80), 2),
             ((4, socket.inet_pton(socket.AF_INET6, "::ffff:10.0.0.1"), 80), 2),
             ((3, bytes([9]) + b"localhost", 80), 2), ((3, bytes([7]) + b"unknown", 80), 4)]
    for args, code in cases:
        reply, _, w = await _socks(egress, *args)
        assert reply[1] == code, (args, reply)
        w.close()
    reply, _, w = await _socks(egress, 1, socket.inet_aton("93.184.216.34"), 80, command=3)  # UDP ASSOCIATE
    assert reply[1] == 7
    w.close()
    choice, _, w = await _socks(egress, 1, b"", 0, methods=b"\x02")  # username/password only
    assert choice == b"\x05\xff"
    w.close()
    assert up.dialed == []


async def test_http_connect_plain_and_bad_requests(proxy: tuple[Egress, Upstream]) -> None:
    egress, up = proxy
    r, w = await _open(egress)
    w.write(b"CONNECT public.example:443 HTTP/1.1\r\nHost: public.example:443\r\n\r\nearly")
    assert (await r.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
    assert await r.readexactly(5) == b"early"  # bytes sent with the request head are not lost
    w.close()
    r, w = await _open(egress)
    w.write(b"GET http://public.example:8080/a HTTP/1.1\r\nHost: public.example\r\nConnection: keep-alive\r\n\r\n")
    echoed = await r.readuntil(b"\r\n\r\n")
    assert echoed == b"GET /a HTTP/1.1\r\nHost: public.example\r\nConnection: close\r\n\r\n"
    w.close()
    for request, status in ((b"CONNECT inside.example:443 HTTP/1.1\r\n\r\n", b"403"),
                            (b"CONNECT public.example HTTP/1.1\r\n\r\n", b"400"),
                            (b"GET /relative HTTP/1.1\r\n\r\n", b"400"),
                            (b"CONNECT nowhere.example:443 HTTP/1.1\r\n\r\n", b"502"),
                            (b"garbage\r\n\r\n", b"400")):
        r, w = await _open(egress)
        w.write(request)
        assert (await r.readline()).split(b" ")[1] == status, request
        w.close()
    assert up.dialed == [("93.184.216.34", 443), ("93.184.216.34", 8080)]


async def test_host_ports_and_stop(proxy: tuple[Egress, Upstream]) -> None:
    egress, up = proxy
    r, w = await _open(egress, port_socket(up.port))
    w.write(b"straight")
    assert await r.readexactly(8) == b"straight"
    assert up.dialed == []
    assert egress.point is not None
    folder = egress.point.folder
    assert os.stat(folder).st_mode & 0o777 == 0o700  # only this user reaches the proxy
    await asyncio.to_thread(egress.stop)
    assert not Path(folder).exists()  # noqa: ASYNC240
    assert await r.read() == b""  # a connection still open is ended
    w.close()


def test_a_killed_proxys_folder_is_removed_at_the_next_start(monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    import subprocess
    import tempfile

    tmp_path = Path(tempfile.mkdtemp(prefix="eg-", dir="/tmp"))  # short: a socket path has 108 bytes
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"herald-egress-{dead.pid}-abc123"
    alive = tmp_path / f"herald-egress-{os.getppid()}-def456"
    for folder in (stale, alive):
        folder.mkdir()
        (folder / PROXY_SOCKET).touch()
    egress = Egress()
    point = egress.start()
    try:
        assert not stale.exists() and alive.exists()
        assert Path(point.folder).parent == tmp_path and f"-{os.getpid()}-" in point.folder
    finally:
        egress.stop()
        shutil.rmtree(tmp_path)


async def test_a_silent_server_does_not_outlive_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.polling import wait_until
    from tools import egress as egress_module

    monkeypatch.setattr(egress_module, "_HALF_OPEN_IDLE", 0.2)
    held: list[asyncio.StreamWriter] = []

    async def silent(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        held.append(w)  # never answers, never closes

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]

    async def dial(address: str, p: int) -> Any:
        return await asyncio.open_connection("127.0.0.1", port)

    egress = Egress(resolve=lambda h, p: asyncio.sleep(0, ["93.184.216.34"]), dial=dial)
    await asyncio.to_thread(egress.start)
    try:
        r, w = await _open(egress)
        w.write(b"CONNECT public.example:443 HTTP/1.1\r\n\r\n")
        assert (await r.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        assert len(egress._clients) == 1
        w.close()  # the sandbox side goes away; the server says nothing
        await wait_until(lambda: not egress._clients, what="the proxy to let the connection go")
    finally:
        await asyncio.to_thread(egress.stop)
        server.close()
