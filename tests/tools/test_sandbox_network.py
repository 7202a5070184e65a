"""The sandbox's network: a namespace of its own even with network on, the egress proxy its only way out
(tools/egress.py), the host ports an operator opens (tools.terminal.host_ports).

Commands run under real bubblewrap. No test sends anything off this machine: the proxy's resolver and dialer
are replaced, so "public.example" resolves to a public-looking address (judged by the real rules) and the
connection then lands on a test server on this machine's loopback.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tools import sandbox
from tools.config import TerminalConfig, ToolsConfig
from tools.dangerous import Decision
from tools.egress import SANDBOX_DIR, Egress
from tools.registry import ToolContext, load_builtin_tools
from tools.sandbox import resolve_mode

registry = load_builtin_tools()
_MODE, _PROBLEM = resolve_mode("bwrap")
needs_bwrap = pytest.mark.skipif(_MODE != "bwrap", reason=f"bubblewrap is unusable here: {_PROBLEM}")
PYTHON = shutil.which("python3", path="/usr/bin:/bin")  # one the sandbox shows (not under a hidden home)
needs_python = pytest.mark.skipif(PYTHON is None, reason="no /usr/bin/python3 to probe sockets with")

NAMES = {"public.example": ["93.184.216.34"], "v6.example": ["2606:2800:220:1:248:1893:25c8:1946"],
         "inside.example": ["10.20.30.40"], "meta.example": ["169.254.169.254"], "mapped.example": ["::ffff:127.0.0.1"],
         "cgnat.example": ["100.64.1.1"], "split.example": ["127.0.0.1", "93.184.216.35"]}


class Server:
    """A TCP server on this machine's loopback: answers every connection with one HTTP response naming
    ``marker`` and records the request head it got."""

    def __init__(self) -> None:
        self.marker = f"reached-{uuid.uuid4().hex}"
        self.heads: list[bytes] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                head = b""
                while b"\r\n\r\n" not in head and (chunk := conn.recv(4096)):
                    head += chunk
                self.heads.append(head)
                body = self.marker.encode()
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


def make_egress(server: Server, **kw: Any) -> tuple[Egress, list[str]]:
    dialed: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        if host not in NAMES:
            raise socket.gaierror(f"no such name {host}")
        return NAMES[host]

    async def dial(address: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        dialed.append(address)  # the address the rules judged; the bytes go to the test server
        return await asyncio.open_connection("127.0.0.1", server.port)

    return Egress(resolve=resolve, dial=dial, **kw), dialed


class Box:
    def __init__(self, workspace: Path, egress: Egress | None, **terminal: Any) -> None:
        self.cfg = TerminalConfig(**{"sandbox": "bwrap", **terminal})
        self.policy = sandbox.make_policy(self.cfg, workspace=workspace, hidden=sandbox.default_hidden(),
                                          egress=egress.start() if egress else None)
        approve = lambda command, verdict, ctx: Decision("approved", "approved by the test")  # noqa: E731
        self.ctx = ToolContext("s", str(workspace), threading.Event(), ToolsConfig(terminal=self.cfg),
                               extras={"approve": approve}, sandbox=self.policy)

    def run(self, command: str) -> dict[str, Any]:
        return json.loads(registry.dispatch("terminal", {"command": command}, self.ctx))


@pytest.fixture
def boxes(tmp_path: Path) -> Iterator[Any]:
    started: list[Egress] = []

    def make(egress: Egress | None = None, **terminal: Any) -> Box:
        if egress is not None:
            started.append(egress)
        return Box(tmp_path, egress, **terminal)

    yield make
    for egress in started:
        egress.stop()


# A CONNECT through the proxy the environment names, then one HTTP request in the tunnel.
CONNECT = r"""
P=${HTTP_PROXY##*:}
exec 3<>/dev/tcp/127.0.0.1/$P || exit 9
printf 'CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n' "$1" "$1" >&3
IFS= read -r status <&3; echo "status: ${status%$'\r'}"
case $status in *" 200 "*) ;; *) exit 3;; esac
while IFS= read -r line <&3 && [ -n "${line%$'\r'}" ]; do :; done
printf 'GET / HTTP/1.0\r\n\r\n' >&3; cat <&3
"""


def connect(box: Box, target: str) -> str:
    (Path(box.ctx.cwd) / "connect.sh").write_text(CONNECT)
    return box.run(f"bash connect.sh {target}")["output"]


# ---- what a command cannot reach ----------------------------------------------------------------------------


@needs_bwrap
@needs_python
def test_an_abstract_unix_socket_of_the_host_is_out_of_reach(boxes: Any, server: Server) -> None:
    name = f"herald-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind("\0" + name)
        listener.listen(8)
        probe = (f"{PYTHON} -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('\\0{name}'); "
                 "print('connected')\" 2>&1 | tail -1")
        assert "connected" in boxes(sandbox="none").run(probe)["output"]  # the probe works
        egress, _ = make_egress(server)
        out = boxes(egress).run(probe)["output"]
    assert "connected" not in out and "ConnectionRefusedError" in out


@needs_bwrap
def test_the_hosts_loopback_services_are_out_of_reach(boxes: Any, server: Server) -> None:
    probe = f"(exec 3<>/dev/tcp/127.0.0.1/{server.port}) 2>/dev/null && echo connected || echo no-route"
    assert "connected" in boxes(sandbox="none").run(probe)["output"]
    egress, dialed = make_egress(server)
    box = boxes(egress)
    assert box.policy.bridged
    assert "no-route" in box.run(probe)["output"]
    # Nor through the proxy: a loopback address is refused however it is spelled.
    for target in (f"127.0.0.1:{server.port}", f"localhost:{server.port}", f"[::1]:{server.port}",
                   f"[::ffff:127.0.0.1]:{server.port}", f"0.0.0.0:{server.port}", f"mapped.example:{server.port}"):
        out = connect(box, target)
        assert "status: HTTP/1.1 403" in out and server.marker not in out, (target, out)
    assert dialed == []


@needs_bwrap
def test_private_addresses_after_resolution_are_refused(boxes: Any, server: Server) -> None:
    egress, dialed = make_egress(server)
    box = boxes(egress)
    for name in ("inside.example", "meta.example", "cgnat.example", "10.1.2.3", "169.254.169.254", "[fd00::1]"):
        out = connect(box, f"{name}:443")
        assert "status: HTTP/1.1 403" in out and server.marker not in out, (name, out)
    assert dialed == []
    reasons = dict(egress.refused)
    assert "private" in reasons["inside.example:443"] and "link-local" in reasons["meta.example:443"]
    assert "carrier-grade NAT" in reasons["cgnat.example:443"]


# ---- the way out ------------------------------------------------------------------------------------------


@needs_bwrap
def test_a_public_destination_goes_through_the_proxy(boxes: Any, server: Server) -> None:
    egress, dialed = make_egress(server)
    box = boxes(egress)
    out = connect(box, "public.example:443")
    assert "status: HTTP/1.1 200" in out and server.marker in out, out
    # Plain HTTP through the proxy: sent on in origin form, one request per connection.
    res = box.run(r"""exec 3<>/dev/tcp/127.0.0.1/${HTTP_PROXY##*:}
printf 'GET http://public.example/some/path?q=1 HTTP/1.1\r\nHost: public.example\r\n' >&3
printf 'Proxy-Connection: keep-alive\r\n\r\n' >&3
cat <&3""")
    assert server.marker in res["output"]
    head = server.heads[-1].decode()
    assert head.startswith("GET /some/path?q=1 HTTP/1.1\r\n") and "Connection: close" in head
    assert "Proxy-Connection" not in head
    # A name with a loopback and a public address: only the public one is dialled.
    assert server.marker in connect(box, "split.example:443")
    assert dialed == ["93.184.216.34", "93.184.216.34", "93.184.216.35"]


@needs_bwrap
def test_curl_uses_the_proxy_from_the_environment(boxes: Any, server: Server) -> None:
    if shutil.which("curl") is None:
        pytest.skip("no curl")
    egress, dialed = make_egress(server)
    box = boxes(egress)
    res = box.run("curl -sS http://public.example/ && echo && curl -sS -x \"$ALL_PROXY\" http://v6.example/ ; "
                  "curl -sS http://inside.example/ 2>&1")
    assert res["output"].count(server.marker) == 2, res
    assert "Herald's sandbox: inside.example is 10.20.30.40, a private address" in res["output"]
    assert dialed == ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"]


@needs_bwrap
def test_allowed_domains_limit_the_names(boxes: Any, server: Server) -> None:
    egress, dialed = make_egress(server, allowed_domains=["public.example", "*.example.org"])
    box = boxes(egress)
    assert server.marker in connect(box, "public.example:443")
    out = connect(box, "v6.example:443")
    assert "status: HTTP/1.1 403" in out and server.marker not in out
    assert "not in tools.terminal.allowed_domains" in dict(egress.refused)["v6.example:443"]
    out = connect(box, "93.184.216.34:443")  # an address is no way around the list
    assert "status: HTTP/1.1 403" in out
    assert dialed == ["93.184.216.34"]


@needs_bwrap
@pytest.mark.parametrize("kind", ["socat", "python"])
def test_the_bridge_inside(boxes: Any, server: Server, kind: str) -> None:
    if kind == "socat" and shutil.which("socat") is None:
        pytest.skip("no socat")
    if kind == "python" and PYTHON is None:
        pytest.skip("no /usr/bin/python3")
    egress, _ = make_egress(server)
    box = boxes(egress)
    program = shutil.which("socat") if kind == "socat" else os.path.realpath(PYTHON or "")
    box.policy = box.ctx.sandbox = replace(box.policy, bridge=(kind, program or ""))
    # The first connection comes at once: the bridge listens before the command starts.
    assert server.marker in connect(box, "public.example:443")
    assert box.run(f"ls {SANDBOX_DIR}")["output"].split() == ["proxy.sock"]


@needs_bwrap
def test_host_ports_are_opted_in(boxes: Any, server: Server) -> None:
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(8)
        egress, dialed = make_egress(server, host_ports=[server.port])
        box = boxes(egress, host_ports=[server.port])
        out = box.run(f"exec 3<>/dev/tcp/127.0.0.1/{server.port}; printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3; "
                      f"(exec 4<>/dev/tcp/127.0.0.1/{other.getsockname()[1]}) 2>/dev/null || echo other-closed")
    assert server.marker in out["output"] and "other-closed" in out["output"]
    assert dialed == []  # straight to the host's port, not through the proxy's rules


@needs_bwrap
def test_the_namespace_has_the_hosts_resolver_configuration_and_network_false_no_way_out(
        boxes: Any, server: Server) -> None:
    egress, _ = make_egress(server)
    box = boxes(egress)
    if os.path.exists("/etc/resolv.conf"):
        host = Path("/etc/resolv.conf").read_text()
        assert box.run("cat /etc/resolv.conf")["output"] == host
    env = box.run("env")["output"]
    assert f"HTTPS_PROXY=http://127.0.0.1:{egress.point.proxy_port}" in env if egress.point else False
    assert "ALL_PROXY=socks5h://" in env and "no_proxy=localhost,127.0.0.1,::1" in env
    cut = boxes(network=False)
    assert not cut.policy.bridged and cut.policy.egress is None
    res = cut.run(f"env | grep -ci proxy; ls {SANDBOX_DIR} 2>&1; cat /proc/net/tcp | wc -l")
    assert res["output"].split()[0] == "0" and "No such file" in res["output"]
    assert res["output"].split()[-1] == "1"  # the header only: nothing listens


@needs_bwrap
def test_network_on_without_a_running_proxy_has_no_way_out(boxes: Any, server: Server) -> None:
    box = boxes()  # tools used outside the gateway, with nobody running the proxy
    assert box.policy.network and not box.policy.bridged
    probe = f"(exec 3<>/dev/tcp/127.0.0.1/{server.port}) 2>/dev/null && echo connected || echo no-network"
    assert "no-network" in box.run(probe)["output"]


def test_a_local_postgresql_within_the_agents_reach_is_named_at_start() -> None:
    from gateway.config import parse_config
    from gateway.turns import sandboxing

    def named(url: str, **terminal: Any) -> bool:
        cfg = parse_config({"database": {"url": url}, "tools": {"terminal": terminal}})
        return any("PostgreSQL" in line for line in sandboxing.warnings(cfg))

    # Commands have a network namespace of their own: the host's loopback is out of reach...
    assert not named("postgresql+asyncpg://herald@127.0.0.1:5432/herald")
    # ... unless the operator opens the port to them.
    assert named("postgresql+asyncpg://herald@127.0.0.1:5432/herald", host_ports=[5432])
    assert named("postgresql+asyncpg://herald@localhost/herald", host_ports=[5432])
    assert not named("postgresql+asyncpg://herald@127.0.0.1:5432/herald", host_ports=[5432], network=False)
    assert not named("postgresql+asyncpg://herald@db.internal/herald", host_ports=[5432])
    # A unix socket in /run or /tmp is hidden; elsewhere the sandbox shows it, network or not.
    assert not named("postgresql+asyncpg://herald@/herald?host=/run/postgresql")
    assert named("postgresql+asyncpg://herald@/herald?host=/srv/pg", network=False)
