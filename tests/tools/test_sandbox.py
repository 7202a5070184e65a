"""The sandbox around the agent's commands and the file tools' view of the filesystem (tools/sandbox.py).

A fake daemon: a HERALD_HOME full of secrets outside /tmp (so the sandbox's private /tmp does not hide it
by accident), a config file and a SQLite database elsewhere, a credential lock folder, and secrets in the
daemon's environment. Commands run under real bubblewrap; the same file-tool and environment checks run
with ``sandbox: none`` too.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from gateway.config import ConfigError, Paths, parse_config
from gateway.turns import sandboxing
from tools import fileio, sandbox
from tools.dangerous import Decision
from tools.registry import ToolContext, load_builtin_tools
from tools.sandbox import Refused, SandboxUnavailable, resolve_mode, run_sandboxed

registry = load_builtin_tools()

_BWRAP_MODE, _BWRAP_PROBLEM = resolve_mode("bwrap")
needs_bwrap = pytest.mark.skipif(_BWRAP_MODE != "bwrap", reason=f"bubblewrap is unusable here: {_BWRAP_PROBLEM}")
BOTH = [pytest.param("bwrap", marks=needs_bwrap), "none"]

TG_TOKEN = "secret-tg-" + uuid.uuid4().hex
OPENAI_KEY = "sk-secret-" + uuid.uuid4().hex
FILE_SECRETS = {name: f"SECRET-{name}-{uuid.uuid4().hex}" for name in
                ("db", "env", "web", "cfg", "otherdb", "elsewhere_cfg", "elsewhere_db", "wal", "extra", "lock",
                 "media", "log")}
SECRETS = [TG_TOKEN, OPENAI_KEY, *FILE_SECRETS.values()]


@dataclass
class Daemon:
    root: Path  # a folder outside /tmp holding everything below
    base: Path  # HERALD_HOME
    user_home: Path  # stands for the daemon user's home: must stay read-only
    config_file: Path
    db_file: Path
    lock_dir: Path
    extra: Path
    paths: Paths
    cfg: Any

    def ctx(self, mode: str, **terminal: Any) -> ToolContext:
        data = {"sandbox": mode, "hidden_paths": [str(self.extra)], **terminal}
        cfg = parse_config({"database": {"url": f"sqlite+aiosqlite:///{self.db_file}"},
                            "tools": {"terminal": data}})
        policy = sandboxing.policy(cfg, self.paths)
        # Everything the approval rules ask about is approved: here the sandbox alone must hold.
        approve = lambda command, verdict, ctx: Decision("approved", "approved by the test")  # noqa: E731
        return ToolContext("s", str(policy.workspace), threading.Event(), cfg.tools, extras={"approve": approve},
                           sandbox=policy)

    @property
    def workspace(self) -> Path:
        return self.base / "workspace"


def _outside_tmp() -> Path:
    for parent in ("/var/tmp", str(Path(__file__).resolve().parents[2])):
        try:
            return Path(tempfile.mkdtemp(prefix="herald-sbx-", dir=parent))
        except OSError:
            continue
    pytest.skip("no writable folder outside /tmp")


@pytest.fixture
def daemon(monkeypatch: pytest.MonkeyPatch) -> Iterator[Daemon]:
    root = _outside_tmp()
    try:
        base = root / "userhome" / ".herald"
        (base / "profiles" / "other").mkdir(parents=True)
        (base / "media").mkdir()
        (base / "logs").mkdir()
        (base / "state.db").write_text(FILE_SECRETS["db"])
        (base / ".env").write_text(f"OPENAI_API_KEY={FILE_SECRETS['env']}\n")
        (base / "web_token").write_text(FILE_SECRETS["web"])
        (base / "config.yaml").write_text(f"# {FILE_SECRETS['cfg']}\n")
        (base / "media" / "tg-1-2-photo.jpg").write_text(FILE_SECRETS["media"])
        (base / "logs" / "herald.log").write_text(FILE_SECRETS["log"])
        (base / "profiles" / "other" / "state.db").write_text(FILE_SECRETS["otherdb"])
        (root / "etc").mkdir()
        config_file = root / "etc" / "herald.yaml"
        config_file.write_text(f"# {FILE_SECRETS['elsewhere_cfg']}\n")
        (root / "db").mkdir()
        db_file = root / "db" / "herald.db"
        db_file.write_text(FILE_SECRETS["elsewhere_db"])
        Path(f"{db_file}-wal").write_text(FILE_SECRETS["wal"])
        state = root / "userhome" / ".local" / "state"
        (state / "herald" / "locks").mkdir(parents=True)
        (state / "herald" / "locks" / "telegram.lock").write_text(FILE_SECRETS["lock"])
        extra = root / "userhome" / ".ssh"
        extra.mkdir()
        (extra / "id_ed25519").write_text(FILE_SECRETS["extra"])
        (root / "userhome" / ".bashrc").write_text("# bashrc\n")
        (root / "userhome" / "notes.txt").write_text("ordinary notes\n")

        monkeypatch.setenv("HERALD_HOME", str(base))
        monkeypatch.setenv("XDG_STATE_HOME", str(state))
        monkeypatch.setenv("TELEGRAM_BOT_TOKEN", TG_TOKEN)
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
        monkeypatch.delenv("HERALD_PROFILE", raising=False)
        paths = Paths(home=base, config_file=config_file)
        yield Daemon(root=root, base=base, user_home=root / "userhome", config_file=config_file, db_file=db_file,
                     lock_dir=state / "herald", extra=extra, paths=paths, cfg=None)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def term(ctx: ToolContext, command: str, **args: Any) -> dict[str, Any]:
    return json.loads(registry.dispatch("terminal", {"command": command, **args}, ctx))


def call(ctx: ToolContext, name: str, **args: Any) -> dict[str, Any]:
    return json.loads(registry.dispatch(name, args, ctx))


def assert_no_secret(text: str) -> None:
    leaked = [s for s in SECRETS if s in text]
    assert not leaked, f"secrets leaked: {leaked}\n{text[:3000]}"


def processes_with(token: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if token.encode() in f.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found


def wait_gone(token: str, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not processes_with(token):
            return True
        time.sleep(0.05)
    return False


# ---- what a command can see ----------------------------------------------------------------------------


@needs_bwrap
def test_commands_see_none_of_the_daemons_secrets(daemon: Daemon) -> None:
    ctx = daemon.ctx("bwrap")
    b = daemon.base
    command = "; ".join([
        "echo canary-$((6*7))",
        "cat /proc/$PPID/environ", "cat /proc/1/environ", "cat /proc/*/environ", "env",
        f"ls -laR {b} {daemon.lock_dir}", f"cat {b}/state.db {b}/.env {b}/web_token {b}/config.yaml",
        f"cat {b}/media/* {b}/logs/* {b}/profiles/other/state.db",
        f"cat {daemon.config_file} {daemon.db_file} {daemon.db_file}-wal {daemon.extra}/id_ed25519",
        f"cat {daemon.lock_dir}/locks/*", f"grep -r SECRET- {daemon.root} /run 2>&1 | head",
        "cat /proc/*/cmdline | tr '\\0' ' '",
        # Run as root, bwrap would keep the capabilities to take the hiding mounts away again.
        f"umount -l {b} 2>/dev/null; umount -l {daemon.config_file} 2>/dev/null; cat {b}/state.db {daemon.config_file}",
    ])
    res = term(ctx, command)
    out = res["output"]
    assert "canary-42" in out
    assert_no_secret(out)
    assert "pytest" not in out  # the daemon's processes are not visible: a PID namespace of its own
    # Hidden folders are there but empty (the workspace's mount point aside); hidden files cannot be opened.
    listing = term(ctx, f"ls -A {b}; ls -A {daemon.lock_dir}; cat {daemon.config_file} 2>/dev/null || echo unreadable")
    assert listing["output"].split() == ["workspace", "unreadable"]


@needs_bwrap
def test_the_daemons_own_proc_is_not_visible(daemon: Daemon) -> None:
    res = term(daemon.ctx("bwrap"), f"ls /proc/{os.getpid()} >/dev/null 2>&1 && echo visible; "
                                    "ls /proc | grep -c '^[0-9]'")
    assert "visible" not in res["output"]
    assert int(res["output"].split()[-1]) < 10  # bwrap's init, bash, ls, grep


@pytest.mark.parametrize("mode", BOTH)
def test_the_environment_is_an_allowlist(daemon: Daemon, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERALD_TEST_PLAIN", "not-passed")
    monkeypatch.setenv("GH_TOKEN", "gh-passed-through")
    monkeypatch.setenv("PATH", "relative/bin:" + os.environ.get("PATH", ""))
    ctx = daemon.ctx(mode, env_passthrough=["GH_TOKEN", "NOT_SET_ANYWHERE"])
    out = term(ctx, "env")["output"]
    assert_no_secret(out)
    env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    allowed = {"PATH", "HOME", "TMPDIR", "TERM", "SHELL", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_ALL",
               "LC_CTYPE", "TZ", "PWD", "SHLVL", "_", "GH_TOKEN"}
    assert set(env) <= allowed, set(env) - allowed
    assert env["GH_TOKEN"] == "gh-passed-through" and "NOT_SET_ANYWHERE" not in env
    assert env["HOME"] == str(daemon.workspace) and env["PWD"] == str(daemon.workspace)
    assert "relative/bin" not in env["PATH"] and "/usr/bin" in env["PATH"]


# ---- what a command can change -------------------------------------------------------------------------


@needs_bwrap
def test_only_the_workspace_and_tmp_are_writable(daemon: Daemon) -> None:
    ctx = daemon.ctx("bwrap")
    bashrc = daemon.user_home / ".bashrc"
    res = term(ctx, f"touch /etc/herald-sbx-test || echo etc-refused; echo evil >> {bashrc} || echo rc-refused; "
                    f"echo x > {daemon.base}/new || echo home-refused; echo mine > ~/made-here && echo ws-ok; "
                    "echo t > /tmp/t && cat /tmp/t; echo also > $TMPDIR/u && echo tmpdir-ok")
    out = res["output"]
    for word in ("etc-refused", "rc-refused", "home-refused", "ws-ok", "tmpdir-ok"):
        assert word in out, out
    assert "t\n" in out
    assert not os.path.exists("/etc/herald-sbx-test")
    assert bashrc.read_text() == "# bashrc\n" and not (daemon.base / "new").exists()
    assert (daemon.workspace / "made-here").read_text() == "mine\n"


@needs_bwrap
def test_tmp_is_private_to_each_command(daemon: Daemon, tmp_path: Path) -> None:
    ctx = daemon.ctx("bwrap")
    host_file = tmp_path / "host-only.txt"
    host_file.write_text("host")
    marker = f"/tmp/sbx-{uuid.uuid4().hex}"
    out = term(ctx, f"cat {host_file} || echo host-tmp-invisible; echo in > {marker} && cat {marker}")["output"]
    assert "host-tmp-invisible" in out and "in\n" in out
    assert not os.path.exists(marker)
    assert "gone" in term(ctx, f"cat {marker} 2>/dev/null || echo gone")["output"]


@needs_bwrap
def test_workspace_containing_herald_home_keeps_the_home_hidden(daemon: Daemon) -> None:
    """cwd = the user's home (which holds HERALD_HOME): writable, but Herald's files stay hidden in it."""
    ctx = daemon.ctx("bwrap", cwd=str(daemon.user_home))
    res = term(ctx, "cat notes.txt; cat .herald/state.db .herald/.env .ssh/id_ed25519; ls -A .herald; "
                    "cat .local/state/herald/locks/*; echo ok > new.txt && echo wrote; touch .herald/x || echo ro")
    out = res["output"]
    assert "ordinary notes" in out and "wrote" in out and "ro" in out
    assert_no_secret(out)
    assert (daemon.user_home / "new.txt").exists() and not (daemon.base / "x").exists()


@needs_bwrap
@pytest.mark.parametrize("where", ["default", "cwd"])
def test_the_daemon_users_home_is_hidden_but_a_workspace_inside_it_works(
        daemon: Daemon, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """$HOME (here a fake one) and the passwd entry's home are hidden whole, credentials and all; a workspace
    inside the home (the default one under ~/.herald, or tools.terminal.cwd) stays visible and writable."""
    monkeypatch.setenv("HOME", str(daemon.user_home))
    home = daemon.user_home
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text(f"aws_secret_access_key = {FILE_SECRETS['extra']}\n")
    (home / ".netrc").write_text(f"machine x login y password {FILE_SECRETS['extra']}\n")
    terminal: dict[str, Any] = {"sandbox": "bwrap"}
    if where == "cwd":
        terminal["cwd"] = str(home / "projects" / "app")
        (home / "projects" / "app").mkdir(parents=True)
        (home / "projects" / "secret-plans.txt").write_text("ordinary notes\n")
    cfg = parse_config({"database": {"url": f"sqlite+aiosqlite:///{daemon.db_file}"}, "tools": {"terminal": terminal}})
    policy = sandboxing.policy(cfg, daemon.paths)
    ws = policy.workspace
    assert home in ws.parents
    approve = lambda command, verdict, ctx: Decision("approved", "approved by the test")  # noqa: E731
    ctx = ToolContext("s", str(ws), threading.Event(), cfg.tools, extras={"approve": approve}, sandbox=policy)
    res = term(ctx, f"cat {home}/notes.txt {home}/.bashrc {home}/.ssh/id_ed25519 {home}/.aws/credentials "
                    f"{home}/.netrc {home}/projects/secret-plans.txt; ls -A {home}; "
                    "echo made > here.txt && cat here.txt")
    out = res["output"]
    assert_no_secret(out)
    assert "ordinary notes" not in out and "# bashrc" not in out
    assert out.rstrip().endswith("made") and (ws / "here.txt").read_text() == "made\n"
    listed = out.split("No such file or directory\n")[-1].split()
    assert listed[:-1] == [ws.relative_to(home).parts[0]], out  # only the way to the workspace
    # The passwd entry's home is hidden too (this process's own, whatever $HOME says).
    import pwd
    passwd_home = pwd.getpwuid(os.getuid()).pw_dir
    if os.path.isdir(passwd_home) and passwd_home != "/" and Path(passwd_home) not in ws.parents:
        assert term(ctx, f"ls -A {passwd_home} | wc -l")["output"].strip() == "0"
    for path in (home / "notes.txt", home / ".ssh" / "id_ed25519", home / ".aws" / "credentials"):
        assert "error" in call(ctx, "read_file", path=str(path))
    assert "error" not in call(ctx, "write_file", path="sub/x.txt", content="ok")
    assert call(ctx, "read_file", path="here.txt")["content"].endswith("made")


@needs_bwrap
def test_no_command_line_in_the_sandbox_names_a_hidden_path(daemon: Daemon) -> None:
    # bwrap (PID 1 in the sandbox) reads its options from a descriptor it then closes: its command line
    # is "bwrap --args N -- <the command>". (Mount points still show in /proc/self/mountinfo.)
    ctx = daemon.ctx("bwrap")
    res = term(ctx, "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done; ls -l /proc/1/fd")
    lines = res["output"].splitlines()
    assert any(line.startswith(f"{ctx.sandbox.bwrap} --args ") for line in lines), res  # type: ignore[union-attr]
    for path in (daemon.root, daemon.base, daemon.config_file, daemon.db_file, daemon.lock_dir, daemon.user_home,
                 daemon.extra, *sandbox.daemon_homes()):
        assert str(path) not in res["output"], (path, res["output"])
    assert "memfd" not in res["output"]


@pytest.mark.parametrize("mode", BOTH)
def test_a_timeout_kills_background_children_too(daemon: Daemon, mode: str) -> None:
    token = f"{1000 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6}"
    res = term(daemon.ctx(mode), f"sleep {token} & sleep {token}; wait", timeout=0.5)
    assert res["timed_out"] is True and res["exit_code"] is None
    assert wait_gone(token), f"a background sleep {token} outlived the call"


@needs_bwrap
def test_nothing_a_command_started_outlives_it(daemon: Daemon) -> None:
    token = f"{2000 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6}"
    res = term(daemon.ctx("bwrap"), f"(setsid sleep {token} &); nohup sleep {token} >/dev/null 2>&1 & echo quick")
    assert res["exit_code"] == 0 and "quick" in res["output"]
    assert wait_gone(token), "a detached process outlived the sandbox"


def test_without_a_workspace_nothing_runs(daemon: Daemon) -> None:
    ctx = daemon.ctx("none", cwd=str(daemon.root / "missing"))
    assert "does not exist" in term(ctx, "true")["error"]


# ---- modes ---------------------------------------------------------------------------------------------


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(sandbox, "find_bwrap", lambda: None)
    sandbox.reset_probe_cache()
    yield
    sandbox.reset_probe_cache()


def test_auto_without_bwrap_turns_the_terminal_off(no_bwrap: None, daemon: Daemon) -> None:
    assert resolve_mode("auto") == ("off", sandbox.NOT_INSTALLED)
    assert resolve_mode("bwrap")[0] == "off"
    assert resolve_mode("none") == ("none", None)
    ctx = daemon.ctx("auto")
    assert "terminal" not in registry.names(ctx.config)
    err = term(ctx, "echo hi")["error"]
    assert err.startswith("the terminal is off: bubblewrap (bwrap) is not installed;")
    assert "read_file" in registry.names(ctx.config)  # the file tools still work, under the same rules
    assert "hidden" in call(ctx, "read_file", path=str(daemon.base / "state.db"))["error"]
    cfg = parse_config({})
    assert sandboxing.warnings(cfg) == [
        "terminal tool off: bubblewrap is not installed (apt install bubblewrap), or set tools.terminal.sandbox: "
        "none to run commands unsandboxed"]
    assert sandboxing.warnings(parse_config({"tools": {"terminal": {"sandbox": "none"}}})) == [
        "tools.terminal.sandbox is none: the agent's commands run unsandboxed"]
    assert sandboxing.warnings(parse_config({"tools": {"terminal": {"enabled": False}}})) == []


def test_a_bwrap_that_cannot_make_namespaces_counts_as_missing(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sandbox, "find_bwrap", lambda: str(fake))
    sandbox.reset_probe_cache()
    try:
        mode, problem = resolve_mode("auto")
        assert mode == "off" and "No permissions to create new namespace" in (problem or "")
        line = sandbox.startup_problem(mode, problem)
        assert line and line.startswith("terminal tool off: bubblewrap (bwrap) cannot create a sandbox here")
    finally:
        sandbox.reset_probe_cache()


@needs_bwrap
def test_the_bwrap_command_line(daemon: Daemon) -> None:
    policy = daemon.ctx("bwrap", network=False).sandbox
    assert policy is not None
    args = sandbox.argv("echo hi", policy)
    for flag in ("--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--die-with-parent",
                 "--new-session"):
        assert flag in args
    assert args[-3:] == ["/bin/bash", "-c", "echo hi"]
    inner = args.index("--")
    assert args[inner + 1 : inner + 3] == ["/bin/bash", "-c"] and args[inner + 2] != "echo hi"  # behind the prelude
    assert "--setenv" not in args  # the environment goes through exec, not the world-readable argv
    ws = str(daemon.workspace)
    binds = [i for i, a in enumerate(args) if a == "--bind"]
    assert [args[i + 1] for i in binds] == [ws]
    # Hides first, then the workspace (so it shows inside the hidden home), then /run stays hidden.
    assert args.index(str(daemon.base)) < binds[0]
    assert args[args.index("--tmpfs") + 1] == "/tmp"
    bare = replace(policy, limits=sandbox.Limits(), max_processes=0)
    assert sandbox.argv("echo hi", replace(bare, mode="none")) == ["/bin/bash", "-c", "echo hi"]
    with sandbox.launch("echo hi", policy) as (line, fds):
        assert line[:2] == [policy.bwrap, "--args"] and line[2] == str(fds[0])
        assert line[3:] == args[inner:]
        assert os.pread(fds[0], 1 << 20, 0).split(b"\0")[:-1] == [os.fsencode(a) for a in args[1:inner]]
    with pytest.raises(SandboxUnavailable):
        sandbox.argv("echo hi", replace(policy, mode="off", problem="x"))


# ---- run_sandboxed (cron scripts) ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", BOTH)
async def test_run_sandboxed(daemon: Daemon, mode: str) -> None:
    policy = daemon.ctx(mode).sandbox
    assert policy is not None
    code, out, err = await run_sandboxed("echo out; echo err >&2; env; exit 3", policy, timeout=20)
    assert code == 3 and out.startswith("out\n") and err == "err\n"
    assert_no_secret(out)
    token = f"{3000 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6}"
    with pytest.raises(TimeoutError):
        await run_sandboxed(f"sleep {token} & sleep {token}; wait", policy, timeout=0.5)
    assert wait_gone(token)
    task = asyncio.create_task(run_sandboxed(f"sleep {token}", policy, timeout=30))
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert wait_gone(token)
    with pytest.raises(SandboxUnavailable, match="not installed"):
        await run_sandboxed("true", replace(policy, mode="off", problem=sandbox.NOT_INSTALLED))


# ---- the file tools see what the sandbox shows ---------------------------------------------------------


@pytest.mark.parametrize("mode", BOTH)
def test_file_tools_refuse_what_the_sandbox_hides(daemon: Daemon, mode: str) -> None:
    ctx = daemon.ctx(mode)
    b = daemon.base
    for path in (b / "state.db", b / ".env", b / "web_token", b / "config.yaml", b / "media" / "tg-1-2-photo.jpg",
                 b / "logs" / "herald.log", b / "profiles" / "other" / "state.db", daemon.config_file,
                 daemon.db_file, Path(f"{daemon.db_file}-wal"), daemon.extra / "id_ed25519",
                 daemon.lock_dir / "locks" / "telegram.lock", "/proc/self/environ", f"/proc/{os.getpid()}/environ",
                 "/proc/1/environ", "../state.db", "~/../.env", "/dev/zero"):
        res = call(ctx, "read_file", path=str(path))
        assert "error" in res and "cannot read" in res["error"], (path, res)
        assert_no_secret(json.dumps(res))
    assert "hidden from the agent" in call(ctx, "read_file", path=str(b / "state.db"))["error"]
    assert "/proc" in call(ctx, "read_file", path="/proc/self/environ")["error"]


@pytest.mark.parametrize("mode", BOTH)
def test_file_tools_read_ordinary_files_and_write_only_the_workspace(daemon: Daemon, mode: str) -> None:
    ctx = daemon.ctx(mode)
    ws = daemon.workspace
    assert call(ctx, "read_file", path=str(daemon.user_home / "notes.txt"))["content"] == "1\tordinary notes"
    assert "content" in call(ctx, "read_file", path="/etc/passwd")
    assert call(ctx, "write_file", path="a/b.txt", content="x")["path"] == str(ws / "a" / "b.txt")
    assert call(ctx, "write_file", path="~/c.txt", content="y")["path"] == str(ws / "c.txt")
    assert call(ctx, "read_file", path="~/c.txt")["content"] == "1\ty"
    bashrc = daemon.user_home / ".bashrc"
    for target in (bashrc, "/etc/herald-sbx-test", "../outside.txt", "/tmp/x", daemon.base / "new"):
        res = call(ctx, "write_file", path=str(target), content="evil")
        assert "error" in res, (target, res)
    res = call(ctx, "write_file", path=str(bashrc), content="evil")
    assert res["error"] == (f"write_file may only write inside the workspace {ws}; {bashrc} resolves to {bashrc} "
                            "outside it")
    assert bashrc.read_text() == "# bashrc\n" and not (daemon.base / "outside.txt").exists()
    assert not os.path.exists("/etc/herald-sbx-test")


@pytest.mark.parametrize("mode", BOTH)
def test_symlinks_in_the_workspace_do_not_lead_out(daemon: Daemon, mode: str) -> None:
    ctx = daemon.ctx(mode)
    ws = daemon.workspace
    (ws / "to-db").symlink_to(daemon.base / "state.db")
    (ws / "to-cfg").symlink_to(daemon.config_file)
    (ws / "to-home").symlink_to(daemon.user_home)
    (ws / "to-etc").symlink_to("/etc")
    (ws / "chain").symlink_to(ws / "to-home")
    for path in ("to-db", "to-cfg", "to-home/.herald/web_token", "chain/.ssh/id_ed25519"):
        res = call(ctx, "read_file", path=path)
        assert "hidden from the agent" in res.get("error", ""), (path, res)
    for path in ("to-db", "to-cfg", "to-home/.bashrc", "to-etc/herald-sbx-test", "chain/x"):
        res = call(ctx, "write_file", path=path, content="evil")
        assert "error" in res, (path, res)
    assert (daemon.base / "state.db").read_text() == FILE_SECRETS["db"]
    assert (daemon.user_home / ".bashrc").read_text() == "# bashrc\n"
    # Visible outside the workspace: read through a link like the sandbox would; ordinary files there too.
    assert call(ctx, "read_file", path="to-home/notes.txt")["content"] == "1\tordinary notes"
    assert "content" in call(ctx, "read_file", path="to-etc/passwd")


def test_the_host_tmp_is_not_what_the_sandbox_shows(daemon: Daemon, tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("host tmp")
    res = call(daemon.ctx("none"), "read_file", path=str(tmp_path / "f.txt"))
    assert "/tmp" in res["error"] and "workspace" in res["error"]


def test_a_fifo_is_refused_without_blocking(daemon: Daemon) -> None:
    ctx = daemon.ctx("none")
    os.mkfifo(daemon.workspace / "pipe")
    assert "not a regular file" in call(ctx, "read_file", path="pipe")["error"]


def test_a_link_swapped_in_after_the_check_is_not_followed(daemon: Daemon) -> None:
    policy = daemon.ctx("none").sandbox
    assert policy is not None
    ws = daemon.workspace
    outside = daemon.user_home / "notes.txt"
    # The final name becomes a link: the rename replaces the link, the target is untouched.
    real = sandbox.resolve_for_write("f.txt", policy)
    (ws / "f.txt").symlink_to(outside)
    fileio.write_atomically(real, b"new", str(ws))
    assert not (ws / "f.txt").is_symlink() and (ws / "f.txt").read_bytes() == b"new"
    assert outside.read_text() == "ordinary notes\n"
    # A folder on the way becomes a link: refused.
    (ws / "d").mkdir()
    real = sandbox.resolve_for_write("d/g.txt", policy)
    (ws / "d").rmdir()
    (ws / "d").symlink_to(daemon.user_home)
    with pytest.raises(Refused):
        fileio.write_atomically(real, b"evil", str(ws))
    assert not (daemon.user_home / "g.txt").exists()
    # Reading: the checked file is swapped for a link to a secret.
    (ws / "r.txt").write_text("fine")
    real = sandbox.resolve_for_read("r.txt", policy)
    (ws / "r.txt").unlink()
    (ws / "r.txt").symlink_to(daemon.base / "state.db")
    with pytest.raises(Refused):
        fileio.open_for_read(real)


def test_write_keeps_mode_and_creates_no_temp_leftovers(daemon: Daemon) -> None:
    ctx = daemon.ctx("none")
    target = daemon.workspace / "run.sh"
    target.write_text("old")
    target.chmod(0o750)
    assert call(ctx, "write_file", path="run.sh", content="new")["bytes_written"] == 3
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o750
    assert sorted(p.name for p in daemon.workspace.iterdir()) == ["run.sh"]


# ---- the gateway's side --------------------------------------------------------------------------------


def test_the_default_workspace_is_created_private_and_is_not_home(daemon: Daemon) -> None:
    policy = sandboxing.policy(parse_config({}), daemon.paths)
    assert policy.workspace == daemon.base / "workspace" != Path.home()
    assert stat.S_IMODE(policy.workspace.stat().st_mode) == 0o700
    hidden = set(policy.hidden)
    assert {daemon.base, daemon.config_file, daemon.lock_dir} <= hidden


def test_a_workspace_inside_a_hidden_folder_is_a_config_error(daemon: Daemon) -> None:
    for cwd in (daemon.base, daemon.base / "profiles" / "other", daemon.lock_dir):
        with pytest.raises(ConfigError, match=r"tools\.terminal\.cwd"):
            sandboxing.workspace(parse_config({"tools": {"terminal": {"cwd": str(cwd)}}}), daemon.paths)
    inside_default = daemon.base / "workspace" / "project"
    cfg = parse_config({"tools": {"terminal": {"cwd": str(inside_default)}}})
    assert sandboxing.workspace(cfg, daemon.paths) == inside_default


def test_cwd_at_home_is_named_as_a_warning(monkeypatch: pytest.MonkeyPatch, daemon: Daemon) -> None:
    monkeypatch.setenv("HOME", str(daemon.user_home))
    lines = sandboxing.warnings(parse_config({"tools": {"terminal": {"cwd": str(daemon.user_home),
                                                                      "sandbox": "none"}}}))
    assert any("~/.bashrc" in line for line in lines)


async def test_runner_attaches_the_policy_and_readyz_names_sandbox_none(make_runner: Any, home: Path) -> None:
    import aiohttp

    runner, _qa = await make_runner({"tools": {"terminal": {"enabled": True, "sandbox": "none"}}})
    assert runner.sandbox.mode == "none" and runner.sandbox.workspace == home / "workspace"
    ctx = runner.agents.tool_context("k", threading.Event(), None)
    assert ctx.sandbox is runner.sandbox and ctx.cwd == str(home / "workspace")
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{runner.http_port}/readyz") as resp:
        body = await resp.json()
    assert body["warnings"] == ["tools.terminal.sandbox is none: the agent's commands run unsandboxed"]


def test_check_config_prints_the_sandbox_warning(home: Path, tmp_path: Path) -> None:
    from tests.cli.test_profiles import invoke

    cfg = tmp_path / "c.yaml"
    cfg.write_text("tools:\n  terminal:\n    sandbox: none\n")
    code, out = invoke("check-config", "--config", str(cfg))
    assert code == 0 and "warning: tools.terminal.sandbox is none: the agent's commands run unsandboxed" in out
    cfg.write_text(f"tools:\n  terminal:\n    cwd: {home}\n")
    code, out = invoke("check-config", "--config", str(cfg))
    assert code == 2 and "tools.terminal.cwd" in out


def test_config_keys() -> None:
    t = parse_config({}).tools.terminal
    assert (t.sandbox, t.network, t.env_passthrough, t.hidden_paths) == ("auto", True, [], [])
    for bad, where in (({"env_passthrough": ["OK", "bad-name"]}, "tools.terminal.env_passthrough"),
                       ({"env_passthrough": ["HOME"]}, "tools.terminal.env_passthrough"),
                       ({"hidden_paths": ["relative/path"]}, "tools.terminal.hidden_paths"),
                       ({"sandbox": "docker"}, "tools.terminal.sandbox"),
                       ({"network": "maybe"}, "tools.terminal.network")):
        with pytest.raises(ConfigError, match=where):
            parse_config({"tools": {"terminal": bad}})
