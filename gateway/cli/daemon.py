"""``herald run``, ``herald check-config`` and ``herald paths``: the daemon and where it keeps its state."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from typing import Annotated

import typer

from gateway.cli.common import fail_config, load
from gateway.config import Config, ConfigError, Paths, configured_secrets

app = typer.Typer()


def check_workspace(cfg: Config, paths: Paths) -> None:
    """tools.terminal.cwd inside a folder the sandbox hides (Herald's home, ...) is a config error."""
    from gateway import sandboxing

    try:
        sandboxing.workspace(cfg, paths)
    except ConfigError as exc:
        fail_config(exc)


@app.command()
def run(config: Annotated[str | None, typer.Option("--config", "-c", help="path to config.yaml")] = None) -> None:
    """Run the gateway daemon in the foreground."""
    cfg, paths = load(config)
    check_workspace(cfg, paths)
    from gateway.filemodes import secure_home
    from gateway.logs import configure_logging, get_logger

    # First, before anything is created: umask 077, the home 0700, looser files left from before tightened.
    tightened = secure_home(paths, cfg.database.url)
    configure_logging(paths.logs_dir, cfg.logging.level, secrets=configured_secrets(cfg))
    if tightened:
        get_logger("herald").info("file_modes_tightened", paths=tightened)
    # The loop gives up the GIL at every socket call and must win it back from busy turn threads; at the
    # default 5 ms switch interval each of those waits shows up as loop lag and ingress latency.
    sys.setswitchinterval(0.001)
    code = asyncio.run(_serve(cfg, paths))
    # Abandoned turns may still sit in a blocking call in a worker thread; don't let them hold the exit.
    sys.stdout.flush()
    sys.stderr.flush()
    if any(t.name.startswith("turn") and t.is_alive() for t in threading.enumerate()):
        os._exit(code)
    raise typer.Exit(code)


async def _serve(cfg: Config, paths: Paths) -> int:
    from gateway.logs import add_secret, get_logger
    from gateway.runner import GatewayRunner

    log = get_logger("herald")
    runner = GatewayRunner(cfg, paths)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, runner.stop_event.set)
    try:
        await runner.start()
    except OSError as exc:
        log.error("startup_failed", error=str(exc))
        typer.echo(f"herald: could not start: {exc}", err=True)
        await runner.shutdown()
        return 1
    web = runner.adapters.get("web")
    host = cfg.http.host if cfg.http.host not in ("0.0.0.0", "::") else "127.0.0.1"
    url = f"http://{host}:{runner.http_port}/"
    if web is not None:
        add_secret(web.token)  # type: ignore[attr-defined]
        if sys.stdout.isatty():
            typer.echo(f"Herald web chat: {url}#token={web.token}")  # type: ignore[attr-defined]
        else:
            typer.echo(f"Herald web chat: {url} (access token in {paths.web_token_file})")
    else:
        typer.echo(f"Herald is running (http on {url})")
    for line in runner.warnings:  # the sandbox's: unsandboxed by choice, or the terminal off
        typer.echo(f"warning: {line}")
    if not cfg.model.configured:
        typer.echo("No model configured: set model.base_url, model.name and model.api_key_env in "
                   f"{paths.config_file} (see config.example.yaml).")
    sys.stdout.flush()
    await runner.stop_event.wait()
    log.info("signal_received")
    await runner.shutdown()
    return 0


@app.command("check-config")
def check_config(config: Annotated[str | None, typer.Option("--config", "-c")] = None) -> None:
    """Validate the config file and exit (status 2 and the key path when it is wrong)."""
    cfg, paths = load(config)
    from gateway import sandboxing

    check_workspace(cfg, paths)
    where = paths.config_file if paths.config_file.exists() else "embedded defaults"
    typer.echo(f"config ok ({where}); home {paths.home}; model {cfg.model.name or 'not configured'}")
    for line in sandboxing.warnings(cfg):
        typer.echo(f"warning: {line}")


@app.command()
def paths() -> None:
    """Show where this profile keeps its config, database, logs and web token."""
    _, p = load()
    for label, value in (("home", p.home), ("config", p.config_file), ("database", p.db_file),
                         ("logs", p.logs_dir), ("web token", p.web_token_file)):
        typer.echo(f"{label:10} {value}")
