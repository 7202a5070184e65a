"""What a new user meets in the CLI: --version, --help naming the real platforms, one exit-code rule,
unknown profiles, `herald web-url`, `herald cron add` refusing targets that never resolve."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gateway.cli import app, state
from gateway.platforms import PLATFORMS


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    state.profile = state.config = None
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.output


def write_config(home: Path, data: dict) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump(data))


# ---- --version, --help --------------------------------------------------------------------------------


def test_version(home: Path) -> None:
    from importlib.metadata import version

    code, out = invoke("--version")
    assert code == 0 and out.strip() == f"herald {version('herald')}"


def test_help_names_the_registered_platforms_and_the_exit_codes(home: Path) -> None:
    code, out = invoke("--help")
    assert code == 0
    text = " ".join(out.split())
    for declared in PLATFORMS.values():
        assert declared.label in text
    for missing in ("Discord", "Slack"):  # named only once they are in the registry
        assert (missing.lower() in PLATFORMS) == (missing in text)
    assert "Exit status: 0 done; 1 " in text and "2 the command line or the configuration is wrong" in text


# ---- the exit-code rule -----------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "code"), [
    # 2: the command line or the configuration is wrong
    (("cron", "add", "--schedule", "whenever", "--prompt", "x"), 2),
    (("cron", "add", "--schedule", "1h", "--prompt", "x", "--deliver", "nowhere"), 2),
    (("approvals", "revoke"), 2),
    (("approvals", "revoke", "abc"), 2),
    (("profile", "create", "a b"), 2),
    (("--profile", "ghost", "paths"), 2),
    (("cron", "frobnicate"), 2),
    # 1: well-formed, but it cannot be done
    (("cron", "pause", "nosuchjob"), 1),
    (("cron", "history", "nosuchjob"), 0),  # an empty history is an answer
    (("approvals", "revoke", "42"), 1),
    (("pairing", "approve", "telegram", "ABCDEFGH"), 1),
    (("pairing", "revoke", "telegram", "1"), 1),
])
def test_one_exit_code_rule_for_every_subcommand(home: Path, args: tuple[str, ...], code: int) -> None:
    got, out = invoke(*args)
    assert got == code, out
    if code == 1:
        assert out.startswith("herald: "), out  # one line saying why, the same shape everywhere


def test_a_bad_config_is_2_everywhere(home: Path) -> None:
    write_config(home, {"gateway": {"busy_mod": "queue"}})
    for args in (("paths",), ("check-config",), ("cron", "list"), ("pairing", "list"), ("approvals", "list"),
                 ("web-url",)):
        code, out = invoke(*args)
        assert code == 2 and "gateway.busy_mod: unknown key" in out, (args, out)


# ---- profiles -------------------------------------------------------------------------------------------


def test_an_unknown_profile_fails_with_the_list_instead_of_creating_one(home: Path) -> None:
    assert invoke("profile", "create", "work")[0] == 0
    for args, env in ((("--profile", "wrok"), None), ((), {"HERALD_PROFILE": "wrok"})):
        for command in (("run",), ("check-config",), ("paths",), ("cron", "list"), ("pairing", "list"),
                        ("profile", "list"), ("web-url",)):
            code, out = invoke(*args, *command, env=env)
            assert code == 2, (command, out)
            assert "no profile 'wrok' (profiles: default, work)" in out and "herald profile create wrok" in out
    assert sorted(p.name for p in (home / "profiles").iterdir()) == ["work"]
    assert invoke("--profile", "work", "paths")[0] == 0


# Arguments that make each command get as far as choosing its profile (their own checks pass).
SAMPLE_ARGS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("backup",): ("{tmp}/copy.db",),
    ("pairing", "approve"): ("telegram", "ABCDEFGH"),
    ("pairing", "revoke"): ("telegram", "1"),
    ("cron", "add"): ("--schedule", "1h", "--prompt", "x"),
    **{("cron", verb): ("nosuchjob",) for verb in ("remove", "pause", "resume", "approve", "run", "history")},
    ("approvals", "revoke"): ("42",),
    ("api-key", "create"): ("ci",),
    ("api-key", "revoke"): ("ci",),
    ("service", "install"): ("--user",),
    ("service", "status"): ("--user",),
    ("send",): ("somewhere", "hello"),
}


def _every_command() -> list[tuple[tuple[str, ...], list[str]]]:
    """Every leaf command of the CLI (walked from the app, so a new command is covered without editing
    this test) with the names of its required parameters."""
    import typer.main

    out: list[tuple[tuple[str, ...], list[str]]] = []

    def walk(command: Any, path: tuple[str, ...]) -> None:
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, (*path, name))
        else:
            out.append((path, [p.name for p in command.params if p.required]))

    walk(typer.main.get_command(app), ())
    return out


def test_every_command_refuses_an_unknown_profile(home: Path, tmp_path: Path) -> None:
    assert invoke("profile", "create", "work")[0] == 0
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}  # where a user unit would be written
    commands = [(path, required) for path, required in _every_command() if path != ("profile", "create")]
    assert len(commands) >= 20
    for path, required in commands:
        assert not required or path in SAMPLE_ARGS, f"{path} needs SAMPLE_ARGS to reach its profile check"
        args = [a.format(tmp=tmp_path) for a in SAMPLE_ARGS.get(path, ())]
        for prefix, extra in ((("--profile", "nosuch"), {}), ((), {"HERALD_PROFILE": "nosuch"})):
            code, out = invoke(*prefix, *path, *args, env={**env, **extra})
            assert code == 2, (path, prefix, out)
            assert "no profile 'nosuch' (profiles: default, work)" in out, (path, out)
    # Nothing was made for the unknown name: no profile folder, no unit.
    assert sorted(p.name for p in (home / "profiles").iterdir()) == ["work"]
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "copy.db").exists()


def test_service_takes_the_profile_from_its_own_option_or_the_global_one(home: Path, tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    units = tmp_path / "xdg" / "systemd" / "user"
    for args in (("service", "install", "--user", "--profile", "nosuch"), ("--profile", "nosuch", "service",
                                                                           "install", "--user")):
        code, out = invoke(*args, env=env)
        assert code == 2 and "no profile 'nosuch' (profiles: default)" in out, out
        assert "herald profile create nosuch" in out
    code, out = invoke("service", "status", "--user", "--profile", "nosuch", env=env)
    assert code == 2 and "no profile 'nosuch'" in out, out
    assert not units.exists()
    assert invoke("profile", "create", "work")[0] == 0
    code, out = invoke("--profile", "work", "service", "install", "--user", env=env)
    assert code == 0 and (units / "herald-work.service").exists(), out


# ---- herald web-url -------------------------------------------------------------------------------------


def test_web_url_prints_the_address_with_the_daemons_token(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_CONNECTION", raising=False)
    code, out = invoke("web-url")
    assert code == 0, out
    token = (home / "web_token").read_text().strip()  # created here; the daemon reads the same file
    assert out.strip() == f"http://127.0.0.1:8650/#token={token}"
    assert oct((home / "web_token").stat().st_mode & 0o777) == "0o600"
    code, out = invoke("web-url", "--host", "herald.example.org")
    assert out.splitlines()[0] == f"http://herald.example.org:8650/#token={token}"


def test_web_url_with_a_host_name_for_a_daemon_on_loopback_says_how_to_reach_it(home: Path) -> None:
    import subprocess
    import sys

    def web_url(*args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("SSH_CONNECTION", "HERALD_PROFILE")}
        return subprocess.run([str(Path(sys.executable).with_name("herald")), "web-url", *args],
                              env={**env, "HERALD_HOME": str(home)}, capture_output=True, text=True, timeout=60)

    out = web_url("--host", "herald.example.org")
    assert out.returncode == 0
    token = (home / "web_token").read_text().strip()
    assert out.stdout == f"http://herald.example.org:8650/#token={token}\n"  # stdout: the address only
    assert out.stderr == (
        "note: Herald listens on 127.0.0.1 only, so herald.example.org:8650 cannot be reached from other machines. "
        "Forward the port from your computer (ssh -L 8650:127.0.0.1:8650 herald.example.org) and open "
        "http://127.0.0.1:8650/#token=… there, or set http.host (0.0.0.0: every interface) and restart Herald.\n")
    assert web_url("--host", "localhost").stderr == ""  # a loopback name is reachable as it is
    write_config(home, {"http": {"host": "0.0.0.0"}})
    out = web_url("--host", "herald.example.org")
    assert out.stdout == f"http://herald.example.org:8650/#token={token}\n" and out.stderr == ""


def test_commands_that_write_in_the_home_keep_it_private(tmp_path: Path) -> None:
    import subprocess
    import sys

    herald = str(Path(sys.executable).with_name("herald"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERALD_")}
    # Before the first `herald run`: the home does not exist yet, whatever the caller's umask.
    for command, home in ((["web-url"], tmp_path / "a" / "home"),
                          (["cron", "add", "--schedule", "1h", "--prompt", "x"], tmp_path / "b" / "home")):
        out = subprocess.run([herald, *command], env={**env, "HERALD_HOME": str(home)}, capture_output=True,
                             text=True, timeout=60, preexec_fn=lambda: os.umask(0o022))
        assert out.returncode == 0, out.stderr
        modes = {p.relative_to(home.parent).as_posix(): oct(p.stat().st_mode & 0o777)
                 for p in [home, *home.rglob("*")]}
        assert modes["home"] == "0o700", modes
        assert all(mode == ("0o700" if (home.parent / name).is_dir() else "0o600") for name, mode in modes.items()), \
            modes
    assert (tmp_path / "a" / "home" / "web_token").exists() and (tmp_path / "b" / "home" / "state.db").exists()


def test_web_url_over_ssh(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSH_CONNECTION", "203.0.113.5 50000 198.51.100.7 22")
    code, out = invoke("web-url")
    # Listening on loopback only: the address plus how to forward the port.
    assert code == 0 and out.splitlines()[0].startswith("http://127.0.0.1:8650/#token=")
    assert "ssh -L 8650:127.0.0.1:8650" in out
    write_config(home, {"http": {"host": "0.0.0.0", "port": 9000}})
    code, out = invoke("web-url")
    # On every interface: the address this SSH session reached the machine by.
    assert out.strip().startswith("http://198.51.100.7:9000/#token=") and "ssh -L" not in out


def test_web_url_when_the_web_chat_is_off(home: Path) -> None:
    write_config(home, {"platforms": {"web": {"enabled": False}}})
    code, out = invoke("web-url")
    assert code == 1 and "platforms.web.enabled" in out


# ---- herald cron add: only targets that can resolve --------------------------------------------------------


def test_cron_add_refuses_targets_that_can_never_resolve(home: Path) -> None:
    for deliver, why in (("nowhere", "unknown platform 'nowhere'"),
                         ("telegram", "telegram is not enabled"),
                         ("telegram:123", "telegram is not enabled"),
                         ("web", "web has no home chat")):
        code, out = invoke("cron", "add", "--schedule", "1h", "--prompt", "x", "--deliver", deliver)
        assert code == 2 and why in out, (deliver, out)
    code, out = invoke("cron", "list", "--json")
    assert json.loads(out) == []
    for deliver in ("local", "web:c1"):
        assert invoke("cron", "add", "--schedule", "1h", "--prompt", "x", "--deliver", deliver)[0] == 0
    write_config(home, {"platforms": {"web": {"home_chat": "c1"}}})
    assert invoke("cron", "add", "--schedule", "1h", "--prompt", "x", "--deliver", "web")[0] == 0


def test_success_goes_to_stdout_plainly_and_failure_to_stderr(home: Path) -> None:
    """A success message once came out in the red error style: successes are plain lines on stdout, and only a
    failure's one ``herald:`` line goes to stderr."""
    write_config(home, {})

    def run(*args: str) -> Any:
        state.profile = state.config = None
        return CliRunner().invoke(app, list(args), color=True)  # as on a terminal: colour allowed

    for args in (("check-config",), ("profile", "create", "work"), ("paths",),
                 ("cron", "add", "--schedule", "1h", "--prompt", "x", "--deliver", "web:chat")):
        result = run(*args)
        assert result.exit_code == 0, result.output
        assert result.stdout.strip() and result.stderr == "", args
        assert "\x1b[" not in result.stdout, args  # no styling on a success
    failed = run("cron", "pause", "nosuchjob")
    assert failed.exit_code == 1 and failed.stdout == "" and failed.stderr.startswith("herald: ")
