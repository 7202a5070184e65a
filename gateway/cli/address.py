"""``herald <name>-url`` for each platform that declares a page (``herald web-url``): the page's address with
what lets its owner in, wherever the daemon's output went.

The daemon prints that address only to a terminal, and logs it without the secret; under systemd, Docker or
``make run | tee`` this command is how to get it (``docker exec CONTAINER herald web-url --host HOST``). The
secret is the platform's own (``PlatformAdapter.page_credential``: the web chat's token, created here if the
daemon has not run yet: the daemon then uses the same one).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Annotated
from urllib.parse import urljoin

import typer

from gateway.config import Config
from gateway.platforms.declaration import Declaration

WILDCARDS = ("0.0.0.0", "::", "")


def http_url(cfg: Config, port: int | None = None, host: str | None = None) -> str:
    """The daemon's http address. ``host`` overrides the name in it; otherwise ``http.host``, or for a server
    listening on every interface the address an SSH session came in on (else 127.0.0.1)."""
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


def page_command(name: str, declared: Declaration) -> Callable[..., None]:
    """The command printing platform ``name``'s page address (``declared.page``) with its owner's credential."""

    def command(
        host: Annotated[str | None, typer.Option("--host", help="the machine's name or address as your browser "
                                                                 "reaches it (default: http.host)")] = None,
    ) -> None:
        from gateway.cli.common import fail, load
        from gateway.platforms import adapter_class

        cfg, paths = load()
        section = getattr(cfg.platforms, name)
        if not section.enabled:
            fail(f"the {declared.label} is disabled (platforms.{name}.enabled: false in {paths.config_file})", 1)
        try:
            credential = adapter_class(name).page_credential(section, paths.home)
        except RuntimeError as exc:
            fail(str(exc), 1)
        key, value = credential or ("", "")

        def address(host: str | None, shown: str) -> str:
            url = urljoin(http_url(cfg, host=host), declared.page or "/")
            return f"{url}#{key}={shown}" if key else url

        typer.echo(address(host, value))
        # The address, on stdout, is for scripts; why it may not open from elsewhere goes to stderr.
        _reachability_note(cfg, host, address("127.0.0.1", "…"))

    command.__doc__ = f"Print the {declared.label}'s address with its access token (open it in a browser)."
    return command


def _reachability_note(cfg: Config, host: str | None, local_address: str) -> None:
    if not is_loopback(cfg.http.host):
        return
    port = cfg.http.port
    if host and not is_loopback(host):
        typer.echo(f"note: Herald listens on {cfg.http.host} only, so {host}:{port} cannot be reached from other "
                   f"machines. Forward the port from your computer (ssh -L {port}:127.0.0.1:{port} {host}) and open "
                   f"{local_address} there, or set http.host (0.0.0.0: every interface) and restart Herald.",
                   err=True)
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
