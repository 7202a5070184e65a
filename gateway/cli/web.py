"""``herald web-url``: the web chat's address with its access token, wherever the daemon's output went.

The daemon prints the address with the token only to a terminal, and logs it without the token; under
systemd, Docker or ``make run | tee`` this command is how to get it (``docker exec CONTAINER herald web-url
--host HOST``). The token is the profile's ``web_token`` (created here if the daemon has not run yet: the
daemon then uses the same one).
"""

from __future__ import annotations

import os
from typing import Annotated

import typer

from gateway.config import Config

WILDCARDS = ("0.0.0.0", "::", "")


def chat_url(cfg: Config, port: int | None = None, host: str | None = None) -> str:
    """The page's address without the token. ``host`` overrides the name in it; otherwise ``http.host``,
    or for a server listening on every interface the address an SSH session came in on (else 127.0.0.1)."""
    if not host:
        host = cfg.http.host
        if host in WILDCARDS:
            host = _ssh_server_address() or "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal
    return f"http://{host}:{port if port is not None else cfg.http.port}/"


def _ssh_server_address() -> str | None:
    # SSH_CONNECTION is "client_ip client_port server_ip server_port": server_ip is this machine as the
    # person typing reached it.
    parts = os.environ.get("SSH_CONNECTION", "").split()
    return parts[2] if len(parts) == 4 else None


def web_url(
    host: Annotated[str | None, typer.Option("--host", help="the machine's name or address as your browser "
                                                             "reaches it (default: http.host)")] = None,
) -> None:
    """Print the web chat's address with its access token (open it in a browser)."""
    from gateway.cli.common import fail, load
    from gateway.platforms.web.adapter import web_token

    cfg, paths = load()
    if not cfg.platforms.web.enabled:  # type: ignore[attr-defined]
        fail("the web chat is disabled (platforms.web.enabled: false in "
             f"{paths.config_file})", 1)
    try:
        token = web_token(cfg.platforms.web, paths.web_token_file)  # type: ignore[attr-defined]
    except OSError as exc:
        fail(f"cannot read or create the web token {paths.web_token_file}: {exc.strerror or exc}; "
             "check that this user may write there", 1)
    typer.echo(f"{chat_url(cfg, host=host)}#token={token}")
    # The address, on stdout, is for scripts; why it may not open from elsewhere goes to stderr.
    if not is_loopback(cfg.http.host):
        return
    port = cfg.http.port
    if host and not is_loopback(host):
        typer.echo(f"note: Herald listens on {cfg.http.host} only, so {host}:{port} cannot be reached from other "
                   f"machines. Forward the port from your computer (ssh -L {port}:127.0.0.1:{port} {host}) and open "
                   f"{chat_url(cfg, host='127.0.0.1')}#token=… there, or set http.host (0.0.0.0: every interface) "
                   "and restart Herald.", err=True)
    elif not host and os.environ.get("SSH_CONNECTION"):
        typer.echo(f"note: Herald listens on {cfg.http.host} only. From your own computer, forward the port "
                   f"first (ssh -L {port}:127.0.0.1:{port} THIS-MACHINE) and open the address above there.",
                   err=True)


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost: reachable from this machine only."""
    import ipaddress

    if host.strip("[]").lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
