"""``herald run``, ``herald check-config`` and ``herald paths``: the daemon and where it keeps its state."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import threading
from typing import Annotated

import typer

from gateway.cli.common import EXIT_FAILED, EXIT_USAGE, fail, load, load_checked
from gateway.config import Config, ConfigError, Paths, configured_secrets

app = typer.Typer()


def workspace_problem(cfg: Config, paths: Paths) -> None:
    """tools.terminal.cwd inside a folder the sandbox hides (Herald's home, ...) is a config error."""
    from gateway.turns import sandboxing

    sandboxing.workspace(cfg, paths)


def preflight(cfg: Config, paths: Paths, create_home: bool, schema: list[str] | None = None,
              skip: frozenset[str] = frozenset()) -> None:
    """Every problem that stops a start, each one line (``schema``: the config's validation problems, first);
    exits (2, or 1 if only the world failed) when there are any, after printing them all."""
    from gateway.ops import preflight as checks

    problems = asyncio.run(checks.check(cfg, paths, create_home=create_home and not schema, skip=skip))
    if "tools" not in skip:
        try:
            workspace_problem(cfg, paths)
        except ConfigError as exc:
            problems.append(checks.Problem("tools.terminal.cwd", str(exc).removeprefix("tools.terminal.cwd: ")))
    for line in schema or []:
        typer.echo(f"herald: config error: {line}", err=True)
    for problem in problems:
        kind = "cannot start" if problem.runtime else "config error"
        typer.echo(f"herald: {kind}: {problem}", err=True)
    unchecked = sorted(checks.gated(skip))
    if unchecked:  # not a problem of its own: what the lines above kept from being checked
        typer.echo(f"herald: not checked until fixed: {', '.join(unchecked)} (run again then)", err=True)
    if schema or problems:
        raise typer.Exit(EXIT_USAGE if schema or any(not p.runtime for p in problems) else EXIT_FAILED)


@app.command()
def run(config: Annotated[str | None, typer.Option("--config", "-c", help="path to config.yaml")] = None) -> None:
    """Run the gateway daemon in the foreground."""
    cfg, paths, schema, skip = load_checked(config)
    preflight(cfg, paths, create_home=True, schema=schema, skip=skip)
    from gateway.kernel.logs import configure_logging, get_logger, hold_stderr
    from gateway.ops.filemodes import secure_home

    # First, before anything is created: umask 077, the home 0700, looser files left from before tightened.
    tightened = secure_home(paths, cfg.database.url)
    from gateway.kernel.memory import cap_arenas

    cap_arenas()  # before the turn threads start (gateway/kernel/memory.py)
    try:
        configure_logging(paths.logs_dir, cfg.logging.level, secrets=configured_secrets(cfg),
                          console=cfg.logging.format == "console", file=cfg.logging.file,
                          max_bytes=cfg.logging.max_bytes, backups=cfg.logging.backups)
    except OSError as exc:  # the log folder changed since the checks above
        from gateway.ops import preflight as checks

        problem = checks.file_problem(paths, exc) or checks.Problem("logging", str(exc))
        fail(f"config error: {problem}", EXIT_USAGE)
    # Start-up's log lines wait: a start that fails ends in one line of its own (the rest is in the log file).
    # Without a log file stderr is the only record (journald keeps it): nothing is held back then.
    if cfg.logging.file:
        hold_stderr()
    if tightened:
        get_logger("herald").info("file_modes_tightened", paths=tightened)
    # The loop gives up the GIL at every socket call and must win it back from busy turn threads; at the
    # default 5 ms switch interval each of those waits shows up as loop lag and ingress latency.
    sys.setswitchinterval(0.001)
    # uvloop: the same loop in C (libuv); measured 5-6% less daemon CPU per message than asyncio's own.
    import uvloop

    code = uvloop.run(_serve(cfg, paths))
    # Abandoned turns may still sit in a blocking call in a worker thread; don't let them hold the exit.
    sys.stdout.flush()
    sys.stderr.flush()
    if any(t.name.startswith("turn") and t.is_alive() for t in threading.enumerate()):
        os._exit(code)
    raise typer.Exit(code)


async def _serve(cfg: Config, paths: Paths) -> int:
    from gateway.kernel.logs import get_logger, release_stderr
    from gateway.runner import GatewayRunner

    log = get_logger("herald")
    runner: GatewayRunner | None = None
    try:
        runner = GatewayRunner(cfg, paths)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, runner.stop_event.set)
        await runner.start()
    except Exception as exc:
        line, code = _failure_line(cfg, paths, exc)
        # The traceback goes to the log file only; stderr gets the one line below.
        log.error("startup_failed", error=line, exc_info=True)
        if runner is not None:
            try:
                await runner.shutdown()
            except Exception as stop_exc:
                log.warning("shutdown_after_failed_start", error=str(stop_exc))
        release_stderr(write=False)
        typer.echo(f"herald: {line}", err=True)
        return code
    release_stderr()
    from gateway.cli.address import http_url

    url = http_url(cfg, runner.http_port)
    # How to reach each platform that says so (the web chat's address); a secret only to a terminal.
    lines = [line for adapter in runner.adapters.values() if (line := adapter.announce(url, sys.stdout.isatty()))]
    for line in lines or [f"Herald is running (http on {url})"]:
        typer.echo(line)
    for line in runner.warnings:  # the sandbox's: unsandboxed by choice, or the terminal off
        typer.echo(f"warning: {line}")
    if not cfg.model.configured:
        typer.echo("No model configured: set model.base_url, model.name and model.api_key_env in "
                   f"{paths.config_file} (see config.example.yaml).")
    sys.stdout.flush()
    # What start-up made (modules, config, the adapters) lives as long as the daemon: frozen, out of the cyclic
    # collector's sight, so its full collections under load walk only what turns create, not ~10^6 objects
    # each time. Collected first, so start-up's garbage is not kept for good.
    gc.collect()
    gc.freeze()
    await runner.stop_event.wait()
    log.info("signal_received")
    await runner.shutdown()
    return 0


def _failure_line(cfg: Config, paths: Paths, exc: BaseException) -> tuple[str, int]:
    """A failed start as one line naming what failed and what to do, and its exit status (module doc of
    gateway/cli/common.py: 1 the world, 2 the configuration)."""
    from gateway.ops import preflight as checks

    problem = checks.describe_failure(cfg, paths, exc)
    if problem is not None:
        kind = "cannot start" if problem.runtime else "config error"
        return f"{kind}: {problem}", EXIT_FAILED if problem.runtime else EXIT_USAGE
    where = paths.logs_dir / "herald.log" if cfg.logging.file else "the log lines above"
    return (f"could not start: {type(exc).__name__}: {exc}: the traceback is in {where}; herald doctor checks "
            "the whole installation"), EXIT_FAILED


@app.command("check-config")
def check_config(config: Annotated[str | None, typer.Option("--config", "-c")] = None) -> None:
    """Run start-up's checks without starting (config, home, database, platform secrets, model): every
    problem with its key path; exit 2 (1 if only the database did not answer)."""
    cfg, paths, schema, skip = load_checked(config)
    from gateway.turns import sandboxing

    preflight(cfg, paths, create_home=False, schema=schema, skip=skip)
    where = paths.config_file if paths.config_file.exists() else "embedded defaults"
    typer.echo(f"config ok ({where}); home {paths.home}; model {cfg.model.name or 'not configured'}")
    from gateway.mcp.service import warnings as mcp_warnings

    for line in [*sandboxing.warnings(cfg), *mcp_warnings(cfg.mcp)]:
        typer.echo(f"warning: {line}")


@app.command()
def paths() -> None:
    """Show where this profile keeps its config, database, logs and web token."""
    from gateway.platforms import home_files

    _, p = load()
    for label, value in (("home", p.home), ("config", p.config_file), ("database", p.db_file),
                         ("logs", p.logs_dir), *((what, p.home / name) for what, name in home_files())):
        typer.echo(f"{label:10} {value}")
