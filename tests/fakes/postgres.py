"""A PostgreSQL server that refuses every password, speaking the real frontend/backend protocol (v3).

The local test server trusts every connection, so a wrong password cannot be produced there. This fake answers
what a real server with ``password`` authentication answers: ``N`` to an SSL or GSS encryption request, then to
the startup message an AuthenticationCleartextPassword request, and to the password an ErrorResponse
``FATAL 28P01 password authentication failed for user "…"`` — which asyncpg raises as InvalidPasswordError.
It records the user and password it was sent (so a test can check the client really sent one).
"""

from __future__ import annotations

import socketserver
import struct
import threading
from typing import Any

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
PROTOCOL_3 = 196608


def _read_exact(sock: Any, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("client went away")
        data += chunk
    return data


def _error(code: str, message: str) -> bytes:
    fields = b"".join(kind + value.encode() + b"\0" for kind, value in
                      ((b"S", "FATAL"), (b"V", "FATAL"), (b"C", code), (b"M", message)))
    body = fields + b"\0"
    return b"E" + struct.pack("!i", len(body) + 4) + body


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        sock = self.request
        try:
            while True:
                length, code = struct.unpack("!ii", _read_exact(sock, 8))
                rest = _read_exact(sock, length - 8)
                if code in (SSL_REQUEST, GSSENC_REQUEST):
                    sock.sendall(b"N")  # no encryption here: go on in the clear
                    continue
                if code != PROTOCOL_3:
                    return
                parts = rest.split(b"\0")
                params = dict(zip(parts[0::2], parts[1::2], strict=False))
                user = params.get(b"user", b"").decode()
                break
            sock.sendall(b"R" + struct.pack("!ii", 8, 3))  # AuthenticationCleartextPassword
            kind = _read_exact(sock, 1)
            (length,) = struct.unpack("!i", _read_exact(sock, 4))
            password = _read_exact(sock, length - 4).rstrip(b"\0").decode()
            if kind == b"p":
                self.server.attempts.append((user, password))
            sock.sendall(_error("28P01", f'password authentication failed for user "{user}"'))
        except (ConnectionError, struct.error, OSError):
            return


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.attempts: list[tuple[str, str]] = []


class FakePostgresRefusingPasswords:
    """``with FakePostgresRefusingPasswords() as pg: pg.port``; ``pg.attempts`` lists (user, password)."""

    def __init__(self) -> None:
        self._server = _Server()
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-postgres", daemon=True)

    @property
    def attempts(self) -> list[tuple[str, str]]:
        return self._server.attempts

    def __enter__(self) -> FakePostgresRefusingPasswords:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
