"""systemd's notify protocol (sd_notify), without libsystemd: one datagram per message to ``$NOTIFY_SOCKET``.

Under ``Type=notify`` systemd waits for ``READY=1`` before it calls the service started, shows the latest
``STATUS=`` line in ``systemctl status``, expects ``WATCHDOG=1`` at least every ``WatchdogSec=`` (or it kills
and restarts the service), and reads ``STOPPING=1`` as "shutting down on purpose". Without ``NOTIFY_SOCKET``
(a terminal, Docker, tests) every call here is a no-op.

The watchdog pings come from a task on the event loop, not from a thread: a thread would keep pinging while
the loop is wedged (a blocking call, a busy loop), which is exactly what the watchdog is there to catch.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Callable

import structlog

log = structlog.get_logger("herald.systemd")

# How often, as a fraction of WatchdogSec, the loop pings: systemd suggests half; a third leaves room for a
# ping that is itself a little late (a long GC pause, a slow disk write on the loop's thread).
PING_FRACTION = 1 / 3


class SystemdNotifier:
    """Sends notify messages to the socket systemd named in the environment (read once, at construction)."""

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self.address = _address(env.get("NOTIFY_SOCKET", ""))
        self.watchdog_seconds = _watchdog_seconds(env)
        self._sock: socket.socket | None = None
        self._last_status: str | None = None

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def notify(self, *fields: str) -> bool:
        """Send ``KEY=value`` lines as one datagram; False when there is nowhere to send them or it failed."""
        if self.address is None:
            return False
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.sendto("\n".join(fields).encode(), self.address)
            return True
        except OSError as exc:
            # A full socket buffer or systemd restarting: the next message tries again; never the daemon's end.
            log.warning("sd_notify_failed", error=str(exc), message=fields[0].split("=")[0] if fields else "")
            return False

    def ready(self, status: str | None = None) -> bool:
        return self.notify("READY=1", *([f"STATUS={status}"] if status else []))

    def status(self, text: str) -> bool:
        """``STATUS=text``, sent only when it changed."""
        if text == self._last_status:
            return True
        self._last_status = text
        return self.notify(f"STATUS={text}")

    def stopping(self, status: str = "draining") -> bool:
        return self.notify("STOPPING=1", f"STATUS={status}")

    def ping(self) -> bool:
        return self.notify("WATCHDOG=1")

    def close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None

    async def watchdog(self, status: Callable[[], str] | None = None, period: float | None = None) -> None:
        """Ping ``WATCHDOG=1`` from this loop every ``period`` (a third of WatchdogSec), and send ``status()``
        when it changed. Returns at once when systemd asked for no watchdog and there is no status to keep."""
        if period is None:
            if self.watchdog_seconds is None and status is None:
                return
            period = self.watchdog_seconds * PING_FRACTION if self.watchdog_seconds else 1.0
        while True:
            if self.watchdog_seconds is not None:
                self.ping()
            if status is not None:
                try:
                    self.status(status())
                except Exception:
                    log.exception("sd_status_failed")
            await asyncio.sleep(period)


def _address(value: str) -> str | bytes | None:
    if not value:
        return None
    if value.startswith("@"):  # an abstract socket: a leading NUL byte instead of the @
        return b"\0" + value[1:].encode()
    if value.startswith("/"):
        return value
    return None  # vsock:… and other forms are for VMs; not ours


def _watchdog_seconds(env: dict[str, str] | os._Environ[str]) -> float | None:
    """WatchdogSec= as seconds, when systemd set it for this very process (WATCHDOG_PID, when present)."""
    usec = env.get("WATCHDOG_USEC", "")
    pid = env.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) <= 0:
        return None
    if pid and pid != str(os.getpid()):
        return None  # meant for another process (we were started by something that inherited it)
    return int(usec) / 1_000_000
