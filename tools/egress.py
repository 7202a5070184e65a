"""The sandbox's one way out to the network: an HTTP and SOCKS5 proxy outside it (tools.terminal.network: true).

Commands run in a network namespace of their own (``bwrap --unshare-net``): the host's loopback services, its
abstract unix sockets and its other interfaces are out of their reach. Their way out is this proxy. It runs
in the daemon, in a thread with an event loop of its own (a big download never delays the daemon's loop), and
listens on a unix socket in a private folder (0700) which the sandbox sees at ``/run/herald-egress``. Inside, a
bridge (tools/bridge.py) turns that socket into ``127.0.0.1:<port>`` on the sandbox's own loopback, and
HTTP_PROXY, HTTPS_PROXY and ALL_PROXY (and their lower-case forms) name it. The proxy

- speaks HTTP CONNECT, plain HTTP proxying (absolute-form requests) and SOCKS5 (CONNECT, no authentication);
- resolves names itself, so proxied clients need no DNS in the sandbox (and cannot tunnel data through it);
- connects only to public addresses, judged after resolution: loopback, private, link-local (the cloud
  metadata endpoints), CGNAT, multicast, reserved and unspecified ones are refused, and an IPv6 address that
  carries an IPv4 one (mapped, 6to4, NAT64, Teredo) is judged by that too. It connects to the very address it
  judged, so a name that resolves differently a moment later cannot slip past;
- with ``tools.terminal.allowed_domains`` set, reaches only those names ("example.com" itself, "*.example.com"
  the names below it); an IP address only when it is listed.

``tools.terminal.host_ports`` are the host's loopback services the operator opens to commands: each port gets a
unix socket of its own in the same folder, bridged to the same port on the sandbox's loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import re
import shutil
import socket
import struct
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("herald.egress")

SANDBOX_DIR = "/run/herald-egress"  # where the sandbox sees the sockets' folder
PROXY_SOCKET = "proxy.sock"
PROXY_PORT = 3128  # on the sandbox's loopback (the next free one when a host port takes it)
_HEAD_LIMIT = 64 * 1024
_CONNECT_TIMEOUT = 15.0
_HANDSHAKE_TIMEOUT = 30.0
_CHUNK = 65536
_HALF_OPEN_IDLE = 60.0  # after the client's side ended: how long a silent server keeps the connection

IP = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[str]]]
Dialer = Callable[[str, int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


def port_socket(port: int) -> str:
    return f"port-{port}.sock"


@dataclass(frozen=True)
class EgressPoint:
    """Where a command's traffic leaves the sandbox: the sockets' folder on the host (bound at
    ``SANDBOX_DIR``), the proxy's port on the sandbox's loopback, and the host ports forwarded there."""

    folder: str
    proxy_port: int
    host_ports: tuple[int, ...] = ()

    def bridges(self) -> list[tuple[int, str]]:
        """(port on the sandbox's loopback, socket path inside the sandbox), the proxy first."""
        return [(self.proxy_port, f"{SANDBOX_DIR}/{PROXY_SOCKET}"),
                *((p, f"{SANDBOX_DIR}/{port_socket(p)}") for p in self.host_ports)]

    def env(self) -> dict[str, str]:
        http = f"http://127.0.0.1:{self.proxy_port}"
        socks = f"socks5h://127.0.0.1:{self.proxy_port}"  # "h": the proxy resolves the name
        direct = "localhost,127.0.0.1,::1"  # the host ports are on the sandbox's own loopback
        out = {}
        for name, value in (("HTTP_PROXY", http), ("HTTPS_PROXY", http), ("ALL_PROXY", socks), ("NO_PROXY", direct)):
            out[name] = out[name.lower()] = value
        return out


# ---- the rules -------------------------------------------------------------------------------------------


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in ipaddress.IPv6Network("64:ff9b::/96") or ip in ipaddress.IPv6Network("64:ff9b:1::/48"):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def refusal(ip: IP) -> str | None:
    """Why the sandbox may not reach ``ip`` (None: a public address it may)."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_v4(ip)
        if inner is not None and (why := refusal(inner)) is not None:
            return why
        if ip.scope_id:
            return "a link-local address"
    for test, why in ((ip.is_loopback, "a loopback address"), (ip.is_link_local, "a link-local address"),
                      (ip.is_multicast, "a multicast address"), (ip.is_unspecified, "an unspecified address"),
                      (ip in ipaddress.IPv4Network("100.64.0.0/10") if ip.version == 4 else False,
                       "a carrier-grade NAT address"),
                      (ip.is_private, "a private address"), (ip.is_reserved, "a reserved address"),
                      (not ip.is_global, "not a public address")):
        if test:
            return why
    return None


def _ip(host: str) -> IP | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


class Rules:
    """Which names commands may reach: any (no allowlist) or those of ``tools.terminal.allowed_domains``."""

    def __init__(self, allowed_domains: Iterable[str] = ()) -> None:
        self.exact: set[str] = set()
        self.below: set[str] = set()
        for entry in allowed_domains:
            name = entry.strip().lower().rstrip(".")
            if name.startswith("*."):
                self.below.add(name[2:])
            elif name:
                self.exact.add(str(_ip(name) or name))

    @property
    def open(self) -> bool:
        return not (self.exact or self.below)

    def allows(self, host: str) -> bool:
        if self.open:
            return True
        ip = _ip(host)
        if ip is not None:
            return str(ip) in self.exact
        return host in self.exact or any(host.endswith("." + d) for d in self.below)


class Refused(Exception):
    """The proxy will not connect; ``socks`` is the SOCKS5 reply code, ``http`` the status."""

    def __init__(self, reason: str, socks: int = 2, http: int = 403) -> None:
        super().__init__(reason)
        self.socks = socks
        self.http = http


async def _resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def _dial(address: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(address, port, limit=_CHUNK)


# ---- the proxy -------------------------------------------------------------------------------------------


class Egress:
    """The proxy and the host-port forwarders, in a thread of their own: :meth:`start` returns the
    :class:`EgressPoint` policies carry, :meth:`stop` ends every connection and removes the folder.

    ``resolve`` and ``dial`` are for tests, which keep every connection on this machine.
    """

    def __init__(self, allowed_domains: Iterable[str] = (), host_ports: Iterable[int] = (), *,
                 resolve: Resolver | None = None, dial: Dialer | None = None, max_connections: int = 512,
                 host: str = "127.0.0.1") -> None:
        self.rules = Rules(allowed_domains)
        self.host_ports = tuple(dict.fromkeys(host_ports))
        self.max_connections = max_connections
        self._resolve = resolve or _resolve
        self._dial = dial or _dial
        self._host = host  # where the host ports are served
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: list[asyncio.AbstractServer] = []
        self._clients: set[asyncio.Task[None]] = set()
        self.point: EgressPoint | None = None
        self.refused: list[tuple[str, str]] = []  # (destination, reason): the latest few, for tests and logs

    # ---- lifecycle (called from any thread) ----

    def start(self) -> EgressPoint:
        if self.point is not None:
            return self.point
        _sweep()
        # 0700: only this user reaches the proxy. The pid in the name lets a later start remove what a killed
        # process left.
        folder = tempfile.mkdtemp(prefix=f"herald-egress-{os.getpid()}-", dir=_base())
        port = PROXY_PORT
        while port in self.host_ports:
            port += 1
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._listen(Path(folder)))
            except BaseException as exc:
                failure.append(exc)
                started.set()
                loop.close()
                return
            started.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self._close())
                loop.close()

        self._thread = threading.Thread(target=run, name="herald-egress", daemon=True)
        self._thread.start()
        started.wait()
        if failure:
            shutil.rmtree(folder, ignore_errors=True)
            raise failure[0]
        self.point = EgressPoint(folder=folder, proxy_port=port, host_ports=self.host_ports)
        log.info("egress proxy started in %s (host ports %s, %s)", folder, list(self.host_ports),
                 "any public host" if self.rules.open else "allowed_domains only")
        return self.point

    def stop(self) -> None:
        loop, thread, point = self._loop, self._thread, self.point
        if loop is None or thread is None:
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        self._loop = self._thread = self.point = None
        if point is not None:
            shutil.rmtree(point.folder, ignore_errors=True)

    async def _listen(self, folder: Path) -> None:
        self._servers.append(await asyncio.start_unix_server(self._client, path=str(folder / PROXY_SOCKET),
                                                             limit=_HEAD_LIMIT))
        for port in self.host_ports:
            self._servers.append(await asyncio.start_unix_server(
                lambda r, w, p=port: self._track(self._forward(r, w, p)), path=str(folder / port_socket(port))))

    async def _close(self) -> None:
        for server in self._servers:
            server.close()
        for task in list(self._clients):
            task.cancel()
        await asyncio.gather(*self._clients, return_exceptions=True)
        self._servers.clear()

    async def _track(self, work: Awaitable[None]) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        try:
            await work
        finally:
            self._clients.discard(task)

    # ---- one client ----

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self._track(self._serve(reader, writer))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if len(self._clients) > self.max_connections:
                return  # closed at once: a command cannot hold the daemon's descriptors without end
            async with asyncio.timeout(_HANDSHAKE_TIMEOUT):
                first = await reader.readexactly(1)
                if first == b"\x05":
                    upstream = await self._socks(reader, writer)
                else:
                    upstream = await self._http(first, reader, writer)
            if upstream is not None:
                await _pipe(reader, writer, *upstream)
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ValueError):
            pass
        finally:
            writer.close()

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int) -> None:
        try:
            upstream = await asyncio.wait_for(asyncio.open_connection(self._host, port, limit=_CHUNK),
                                              _CONNECT_TIMEOUT)
            await _pipe(reader, writer, *upstream)
        except (OSError, TimeoutError):
            pass
        finally:
            writer.close()

    async def open(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to ``host:port`` when the rules allow it, else :class:`Refused` saying why."""
        host = host.strip().strip("[]").lower().rstrip(".")
        if not host or not 0 < port < 65536:
            raise Refused(f"bad destination {host!r}:{port}", socks=1, http=400)
        try:
            if not self.rules.allows(host):
                raise Refused(f"{host} is not in tools.terminal.allowed_domains")
            if host == "localhost" or host.endswith(".localhost"):  # this machine, whatever a resolver says
                raise Refused(f"{host} is this machine: commands may reach only public addresses")
            literal = _ip(host)
            try:
                addresses = [str(literal)] if literal else await asyncio.wait_for(self._resolve(host, port),
                                                                                 _CONNECT_TIMEOUT)
            except (OSError, TimeoutError) as exc:
                raise Refused(f"cannot resolve {host}: {exc}", socks=4, http=502) from None
            judged = [(a, refusal(ipaddress.ip_address(a.split("%")[0]))) for a in addresses]
            allowed = [a for a, why in judged if why is None]
            if not allowed:
                a, why = judged[0] if judged else (host, "no address")
                raise Refused(f"{host} is {a}, {why}: commands may reach only public addresses")
            last: BaseException | None = None
            for address in allowed:
                try:
                    return await asyncio.wait_for(self._dial(address, port), _CONNECT_TIMEOUT)
                except (OSError, TimeoutError) as exc:
                    last = exc
            raise Refused(f"cannot connect to {host}:{port}: {last}", socks=5, http=502)
        except Refused as exc:
            self.refused = [*self.refused[-31:], (f"{host}:{port}", str(exc))]
            if exc.http == 403:
                log.warning("egress refused %s:%s: %s", host, port, exc)
            raise

    async def _http(self, first: bytes, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        head = first + await reader.readuntil(b"\r\n\r\n")
        line, _, rest = head.partition(b"\r\n")
        try:
            method, target, version = line.decode("latin-1").split(" ")
        except ValueError:
            await _answer(writer, 400, "not an HTTP proxy request")
            return None
        try:
            if method == "CONNECT":
                host, port = _split_authority(target, None)
            elif target.lower().startswith("http://"):
                host, port = _split_authority(target[7:].split("/", 1)[0], 80)
            else:
                raise ValueError("send absolute http:// URLs, or CONNECT for https")
        except ValueError as exc:
            await _answer(writer, 400, str(exc))
            return None
        try:
            upstream = await self.open(host, port)
        except Refused as exc:
            await _answer(writer, exc.http, str(exc))
            return None
        if method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            path = target[7:].partition("/")[1:]
            headers = [h for h in rest.split(b"\r\n") if h and h.split(b":", 1)[0].strip().lower() not in
                       (b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive")]
            # One request per connection: the client opens another for the next, which is judged again.
            upstream[1].write(f"{method} {''.join(path) or '/'} {version}\r\n".encode("latin-1")
                              + b"".join(h + b"\r\n" for h in headers) + b"Connection: close\r\n\r\n")
        return upstream

    async def _socks(self, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        methods = await reader.readexactly((await reader.readexactly(1))[0])
        if 0 not in methods:
            writer.write(b"\x05\xff")
            return None
        writer.write(b"\x05\x00")
        version, command, _, kind = await reader.readexactly(4)
        if kind == 1:
            host = str(ipaddress.IPv4Address(await reader.readexactly(4)))
        elif kind == 4:
            host = str(ipaddress.IPv6Address(await reader.readexactly(16)))
        elif kind == 3:
            host = (await reader.readexactly((await reader.readexactly(1))[0])).decode("idna")
        else:
            writer.write(_socks_reply(8))
            return None
        port = struct.unpack("!H", await reader.readexactly(2))[0]
        if version != 5 or command != 1:  # only CONNECT: no BIND, no UDP
            writer.write(_socks_reply(7))
            return None
        try:
            upstream = await self.open(host, port)
        except Refused as exc:
            writer.write(_socks_reply(exc.socks))
            return None
        writer.write(_socks_reply(0))
        return upstream


def _base() -> str:
    """The temp folder, unless it is too deep for a socket path (108 bytes, the name included)."""
    base = tempfile.gettempdir()
    return base if len(base) <= 60 else "/tmp"


def _sweep() -> None:
    """Remove the socket folders of this user's proxies whose process is gone (killed, not stopped)."""
    with contextlib.suppress(OSError), os.scandir(_base()) as entries:
        for entry in entries:
            m = re.fullmatch(r"herald-egress-(\d+)-\w+", entry.name)
            if not m or int(m.group(1)) == os.getpid() or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            try:
                os.kill(int(m.group(1)), 0)
            except ProcessLookupError:
                shutil.rmtree(entry.path, ignore_errors=True)
            except PermissionError:
                pass


def _socks_reply(code: int) -> bytes:
    return bytes([5, code, 0, 1, 0, 0, 0, 0, 0, 0])


def _split_authority(authority: str, default: int | None) -> tuple[str, int]:
    """(host, port) of ``host:port``, ``[v6]:port`` or, with a default port, a bare host."""
    if authority.startswith("["):
        host, _, after = authority[1:].partition("]")
        port = after[1:] if after.startswith(":") else ""
    else:
        host, sep, port = authority.rpartition(":")
        if not sep:
            host, port = authority, ""
    if not port and default is None:
        raise ValueError(f"no port in {authority!r}")
    return host, int(port) if port else int(default or 0)


async def _answer(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}.get(status, "Error")
    body = f"Herald's sandbox: {text}\n".encode()
    writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                 f"X-Herald-Refused: {text[:200]}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                 .encode("utf-8", "replace") + body)
    with contextlib.suppress(OSError):
        await writer.drain()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter) -> None:
    """Both directions until both ends are done; whatever the client sent after its request head is
    already in ``reader`` and goes first. Once the client's side has ended (a half-close, or the sandbox
    gone: the two look alike), the other direction lasts only while the server keeps sending."""
    loop = asyncio.get_running_loop()
    last = [loop.time()]

    async def copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter, mark: bool) -> None:
        try:
            while chunk := await src.read(_CHUNK):
                if mark:
                    last[0] = loop.time()
                dst.write(chunk)
                await dst.drain()
            if dst.can_write_eof():
                dst.write_eof()
        except OSError:
            dst.close()

    back = asyncio.create_task(copy(up_reader, writer, True))
    try:
        await writer.drain()
        await copy(reader, up_writer, False)
        while not back.done():
            await asyncio.wait({back}, timeout=_HALF_OPEN_IDLE)
            if loop.time() - last[0] >= _HALF_OPEN_IDLE:
                back.cancel()
        await asyncio.gather(back, return_exceptions=True)
    finally:
        back.cancel()
        up_writer.close()
