"""``herald service install | status``: the systemd unit Herald runs under (gateway/ops/service.py writes it)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Annotated

import typer

from gateway.cli.common import EXIT_FAILED, fail, require_profile, state

app = typer.Typer(no_args_is_help=True, help="The systemd unit: install it (system or --user), show its state.")

UserOpt = Annotated[bool, typer.Option("--user", help="a user unit (~/.config/systemd/user), running as you")]
ProfileOpt = Annotated[str | None, typer.Option("--profile", "-p", help="the profile the unit runs")]


def _profile(profile: str | None, user: bool, run_as: str = "herald") -> str | None:
    """The profile the unit runs, which must exist where that unit keeps its state: your $HERALD_HOME for a
    user unit, /var/lib/herald for a system one (an unknown one fails with exit 2, as everywhere)."""
    from gateway.config import herald_base
    from gateway.ops.service import SYSTEM_HOME, herald_executable

    profile = profile or state.profile or os.environ.get("HERALD_PROFILE") or None
    if profile == "default":
        return None
    if user:
        require_profile(profile, herald_base())
    else:
        require_profile(profile, Path(SYSTEM_HOME), create_hint=f"sudo -u {run_as} env HERALD_HOME={SYSTEM_HOME} "
                                                                f"{herald_executable()} profile create")
    return profile


def _unit_path(user: bool, profile: str | None, directory: str | None) -> Path:
    from gateway.ops.service import SYSTEM_DIR, unit_name, user_unit_dir

    folder = Path(directory).expanduser() if directory else (user_unit_dir() if user else SYSTEM_DIR)
    return folder / unit_name(profile)


def _systemctl(user: bool, *args: str) -> subprocess.CompletedProcess[str] | None:
    exe = shutil.which("systemctl")
    if exe is None:
        return None
    try:
        return subprocess.run([exe, *(["--user"] if user else []), *args], capture_output=True, text=True,
                              timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return None


@app.command()
def install(
    user: UserOpt = False,
    profile: ProfileOpt = None,
    run_as: Annotated[str, typer.Option("--run-as", help="system unit: the account it runs as")] = "herald",
    directory: Annotated[str | None, typer.Option("--dir", help="write the unit into this folder instead")] = None,
    print_only: Annotated[bool, typer.Option("--print", help="print the unit instead of writing it")] = False,
) -> None:
    """Write the systemd unit (system: /etc/systemd/system, as user `herald` with state in /var/lib/herald;
    --user: ~/.config/systemd/user with your HERALD_HOME), Type=notify with a watchdog."""
    from gateway.config import herald_base
    from gateway.ops.service import SYSTEM_HOME, Unit, herald_executable

    profile = _profile(profile, user, run_as)
    home = str(herald_base()) if user else SYSTEM_HOME
    unit = Unit("user" if user else "system", herald_executable(), profile=profile, run_as=run_as, home=home)
    text = unit.render()
    if print_only:
        typer.echo(text, nl=False)
        return
    path = _unit_path(user, profile, directory)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text)
        tmp.chmod(0o644)  # systemd reads units as whoever; it holds no secret
        tmp.replace(path)
    except PermissionError:
        fail(f"service: cannot write {path}: permission denied (a system unit needs root: sudo "
             f"{herald_executable()} service install, or --user for a user unit)", EXIT_FAILED)
    except OSError as exc:
        fail(f"service: cannot write {path}: {exc.strerror or exc}", EXIT_FAILED)
    typer.echo(f"wrote {path}")
    ctl = "systemctl --user" if user else "sudo systemctl"
    if directory is None:
        reloaded = _systemctl(user, "daemon-reload")
        if reloaded is None or reloaded.returncode != 0:
            typer.echo(f"then: {ctl} daemon-reload")
    if not user:
        typer.echo(f"state goes to {SYSTEM_HOME}" + (f"/profiles/{profile}" if profile else "")
                   + f", run as {run_as} (create it: sudo useradd --system --home-dir {SYSTEM_HOME} "
                     f"--shell /usr/sbin/nologin {run_as}); check it: sudo -u {run_as} env HERALD_HOME="
                     f"{SYSTEM_HOME} {herald_executable()} doctor")
    typer.echo(f"start it: {ctl} enable --now {unit.name}")
    if user:
        typer.echo("keep it running while you are logged out: loginctl enable-linger $USER")


_SHOWN = ("LoadState", "ActiveState", "SubState", "StatusText", "MainPID", "NRestarts", "WatchdogUSec",
          "ActiveEnterTimestamp", "Result")


@app.command()
def status(user: UserOpt = False, profile: ProfileOpt = None,
           directory: Annotated[str | None, typer.Option("--dir", help="where the unit was written")] = None) -> None:
    """Show the unit and what systemd says of it (state, Herald's status line, restarts); exit 0 only when it
    is active."""
    profile = _profile(profile, user)
    path = _unit_path(user, profile, directory)
    from gateway.ops.service import unit_name

    name = unit_name(profile)
    if not path.exists():
        fail(f"service: {name} is not installed ({path} does not exist): herald service install"
             f"{' --user' if user else ''}", EXIT_FAILED)
    typer.echo(f"unit      {path}")
    shown = _systemctl(user, "show", name, "--property=" + ",".join(_SHOWN))
    if shown is None or shown.returncode != 0 or not shown.stdout.strip():
        why = (shown.stderr.strip().splitlines() or ["no answer"])[-1] if shown is not None else "no systemctl"
        fail(f"service: systemd cannot be asked about {name} here ({why})", EXIT_FAILED)
    props = dict(line.split("=", 1) for line in shown.stdout.splitlines() if "=" in line)
    for key in _SHOWN:
        if props.get(key):
            typer.echo(f"{key:<20} {props[key]}")
    if props.get("ActiveState") != "active":
        raise typer.Exit(EXIT_FAILED)
