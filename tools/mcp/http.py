"""How the daemon reaches an HTTP MCP server: the address rules of the sandbox's proxy (tools/egress.py).

The name is resolved here and every address judged after resolution (loopback, private, link-local and the cloud
metadata endpoints, CGNAT, IPv6 forms that carry such an IPv4 address...); the connection goes to the very address
that was judged, so a name answering differently a moment later cannot slip past. TLS still checks the server's
certificate against its name. ``allow_private`` in the server's entry lifts the rule for that server only (one on
this machine or the LAN). Redirects are not followed (the SDK follows none that leave the endpoint's origin).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from typing import Any

import httpcore2
import httpx2
from httpcore2._backends.auto import AutoBackend
from httpcore2._backends.base import SOCKET_OPTION, AsyncNetworkBackend, AsyncNetworkStream

from tools.egress import refusal

CONNECT_TIMEOUT = 15.0
READ_TIMEOUT = 300.0  # a server may hold a response stream open; each call has its own timeout above this


class AddressRefused(httpx2.ConnectError):
    """The server's name leads only to addresses the rules refuse; ``str()`` says which and why."""


async def allowed_addresses(host: str, port: int, allow_private: bool) -> list[str]:
    """The addresses of ``host`` that may be reached, in resolution order; ``AddressRefused`` when none."""
    try:
        literal = ipaddress.ip_address(host.strip("[]"))
        found = [str(literal)]
    except ValueError:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        found = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if allow_private:
        return found
    kept, why = [], []
    for address in found:
        reason = refusal(ipaddress.ip_address(address.split("%")[0]))
        if reason is None:
            kept.append(address)
        else:
            why.append(f"{address} is {reason}")
    if not kept:
        raise AddressRefused(f"{host} is not reachable under the address rules ({'; '.join(why) or 'no address'}); "
                             "set allow_private: true in the server's entry for a server on this machine or the LAN")
    return kept


class GuardedBackend(AsyncNetworkBackend):
    """httpcore's network backend with the address rules in front of every TCP connection."""

    def __init__(self, allow_private: bool) -> None:
        self.allow_private = allow_private
        self._inner = AutoBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[SOCKET_OPTION] | None = None) -> AsyncNetworkStream:
        last: Exception | None = None
        for address in await allowed_addresses(host, port, self.allow_private):
            try:
                return await self._inner.connect_tcp(address, port, timeout=timeout, local_address=local_address,
                                                     socket_options=socket_options)
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout, OSError) as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[SOCKET_OPTION] | None = None) -> AsyncNetworkStream:
        raise AddressRefused("unix sockets are not reached")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def guarded_client(headers: dict[str, str], allow_private: bool) -> httpx2.AsyncClient:
    """An httpx2 client for the SDK's HTTP transports that connects only where the rules allow. The daemon's
    proxy variables are ignored (``trust_env`` off): they could route around the rules."""
    transport = httpx2.AsyncHTTPTransport(trust_env=False)
    pool: Any = transport._pool
    # The transport builds its pool without a way to name the backend; the pool keeps it in one attribute.
    pool._network_backend = GuardedBackend(allow_private)
    return httpx2.AsyncClient(transport=transport, headers=headers, trust_env=False, follow_redirects=False,
                              timeout=httpx2.Timeout(CONNECT_TIMEOUT, read=READ_TIMEOUT))
