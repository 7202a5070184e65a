"""Start-up's checks (gateway/ops/preflight.py), shared by `herald run` and `herald check-config`: each failure
one line naming what failed and what to do, every problem at once, exit 2 for configuration and 1 for the
world failing (a database that does not answer), never a traceback."""

from __future__ import annotations

import getpass
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gateway.cli import app, state
from gateway.config import Paths, parse_config, resolve_paths
from gateway.ops import preflight
from tests.conftest import PG_URL
from tests.fakes.postgres import FakePostgresRefusingPasswords

HERALD = Path(sys.executable).with_name("herald")
DOWN = "postgresql+asyncpg://herald:hunter2-secret@127.0.0.1:1/herald"  # nothing listens on port 1


@pytest.fixture
def unset_env(monkeypatch: pytest.MonkeyPatch):
    def unset(*names: str) -> None:
        for name in names:
            monkeypatch.delenv(name, raising=False)

    return unset


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    state.profile = state.config = None
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.output


def write_config(home: Path, data: dict) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump(data))


def herald(*args: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("HERALD_", "TELEGRAM_"))}
    environ.update(HERALD_HOME=str(home), **env)
    return subprocess.run([str(HERALD), *args], env=environ, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


# ---- every problem at once, with its key path --------------------------------------------------------------


def test_check_config_reports_every_problem_with_its_key_path(home: Path, unset_env) -> None:
    unset_env("TELEGRAM_BOT_TOKEN", "HERALD_TEST_KEY")
    write_config(home, {
        "model": {"base_url": "https://api.openai.com/v1", "name": "gpt-4o-mini"},
        "platforms": {"telegram": {"enabled": True}},
        "approvals": {"timeout_seconds": 60},
    })
    code, out = invoke("check-config")
    lines = out.strip().splitlines()
    assert code == 2, out
    assert len(lines) == 2 and all(line.startswith("herald: config error: ") for line in lines), out
    assert "platforms.telegram.token_env: the environment variable TELEGRAM_BOT_TOKEN is not set" in out
    assert "model.api_key_env: not set, but https://api.openai.com/v1 is not a local server" in out


def test_every_validation_problem_is_reported_not_only_the_first(home: Path) -> None:
    write_config(home, {"http": {"port": -1}, "gateway": {"busy_mode": "x", "max_queu": 3}})
    code, out = invoke("check-config")
    assert code == 2
    for path in ("http.port", "gateway.busy_mode", "gateway.max_queu: unknown key"):
        assert path in out, out
    assert len(out.strip().splitlines()) == 3  # gateway and http: no other check reads them, nothing to add


def test_a_schema_error_does_not_hide_the_other_problems(home: Path, tmp_path: Path, unset_env) -> None:
    unset_env("TELEGRAM_BOT_TOKEN")
    write_config(home, {"gateway": {"busy_mod": "queue"},  # a typo
                        "platforms": {"telegram": {"enabled": True}},  # and no token
                        "database": {"url": f"sqlite+aiosqlite:///{tmp_path}/no/such/dir/state.db"}})
    code, out = invoke("check-config")
    assert code == 2
    lines = out.strip().splitlines()
    assert lines[0] == f"herald: config error: {home / 'config.yaml'}: gateway.busy_mod: unknown key"
    # The sections that validated are still checked: the platform's secret, the database.
    assert (f"herald: config error: platforms.telegram.token_env: the environment variable TELEGRAM_BOT_TOKEN is "
            f"not set: export it, or add the line TELEGRAM_BOT_TOKEN=<value> to {home / '.env'}") in lines
    assert any("database.url: cannot create SQLite database" in line for line in lines), out
    assert len(lines) == 3, out
    # A section with a problem is not checked on its defaults: an invalid database.url is not replaced by
    # the default SQLite file and reported as fine or broken.
    write_config(home, {"database": {"url": "mysql://x"}, "platforms": {"telegram": {"enabled": True}}})
    code, out = invoke("check-config")
    assert code == 2 and "database.url: Value error, must start with" in out, out
    assert "TELEGRAM_BOT_TOKEN is not set" in out
    assert "SQLite" not in out
    assert out.strip().splitlines()[-1] == "herald: not checked until fixed: database (run again then)"
    # herald run says the same.
    code, run_out = invoke("run")
    assert code == 2 and run_out == out
    # Not a mapping of keys: nothing else can be checked.
    (home / "config.yaml").write_text("- just\n- a list\n")
    code, out = invoke("check-config")
    assert code == 2 and out.strip().splitlines() == [
        f"herald: config error: {home / 'config.yaml'}: the top level must be a mapping of keys"]


@pytest.mark.parametrize(("model", "key", "says"), [
    ({"base_url": "https://api.openai.com/v1"}, "model.name", "not set, but model.base_url is"),
    ({"name": "gpt-4o-mini"}, "model.base_url", "not set, but model.name is"),
    ({"api_key_env": "HERALD_TEST_KEY"}, "model.base_url", "not set, but model.api_key_env is"),
    ({"base_url": "https://x.example/v1", "name": "m", "api_key_env": "HERALD_TEST_KEY"}, "model.api_key_env",
     "HERALD_TEST_KEY is not set"),
    ({"base_url": "http://127.0.0.1:1/v1", "name": "m", "fallbacks": [{"base_url": "https://o.example/v1",
                                                                       "name": "m"}]},
     "model.fallbacks.0.api_key_env", "not a local server"),
])
def test_an_incomplete_model_section_is_a_problem(model: dict, key: str, says: str, unset_env, tmp_path: Path) -> None:
    unset_env("HERALD_TEST_KEY")
    problems = preflight.config_problems(parse_config({"model": model}), resolve_paths())
    assert any(p.key == key and says in p.message for p in problems), problems


@pytest.mark.parametrize("base_url", ["http://localhost:11434/v1", "http://127.0.0.1:8080/v1", "http://ollama:11434/v1",
                                      "http://10.0.0.5:8000/v1", "http://gpu.lan:8000/v1"])
def test_a_local_model_server_needs_no_key(base_url: str) -> None:
    cfg = parse_config({"model": {"base_url": base_url, "name": "llama"}})
    assert preflight.config_problems(cfg, resolve_paths()) == []


def test_a_complete_setup_has_no_problems(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERALD_TEST_KEY", "sk-test")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:abc")
    write_config(home, {"model": {"base_url": "https://api.openai.com/v1", "name": "m",
                                  "api_key_env": "HERALD_TEST_KEY"},
                        "platforms": {"telegram": {"enabled": True}}})
    code, out = invoke("check-config")
    assert code == 0 and out.startswith("config ok"), out


def test_telegram_webhook_needs_a_public_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:abc")
    cfg = parse_config({"platforms": {"telegram": {"enabled": True, "mode": "webhook"}}})
    (problem,) = preflight.platform_problems(cfg)
    assert problem.key == "platforms.telegram.public_url"


# ---- the home and the database ------------------------------------------------------------------------------


def test_a_home_that_is_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("HERALD_HOME", str(tmp_path / "file"))
    code, out = invoke("check-config")
    assert code == 2 and out.strip() == (f"herald: config error: HERALD_HOME: {tmp_path / 'file'} is a file, not a "
                                         "folder: point HERALD_HOME at a folder, or move the file")


def test_a_home_that_cannot_be_created(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERALD_HOME", "/proc/herald-home")  # not even root creates folders in /proc
    code, out = invoke("check-config")
    assert code == 2 and "HERALD_HOME: cannot create /proc/herald-home" in out and len(out.splitlines()) == 1
    assert not Path("/proc/herald-home").exists()


def test_an_sqlite_path_that_cannot_be_opened(home: Path, tmp_path: Path) -> None:
    write_config(home, {"database": {"url": f"sqlite+aiosqlite:///{tmp_path}/no/such/dir/state.db"}})
    code, out = invoke("check-config")
    assert code == 2 and "database.url: cannot create SQLite database" in out and "is not a folder" in out
    (tmp_path / "junk.db").write_bytes(b"this is not sqlite" * 100)
    write_config(home, {"database": {"url": f"sqlite+aiosqlite:///{tmp_path}/junk.db"}})
    code, out = invoke("check-config")
    assert code == 2 and "is not a usable SQLite database" in out, out


def test_an_existing_sqlite_database_passes(home: Path) -> None:
    home.mkdir(parents=True)
    sqlite3.connect(home / "state.db").close()
    assert invoke("check-config")[0] == 0


def test_an_unreachable_database_is_named_with_its_password_masked(home: Path) -> None:
    write_config(home, {"database": {"url": DOWN}})
    code, out = invoke("check-config")
    assert code == 1, out  # the world failing, not the configuration
    assert "hunter2" not in out
    assert ("herald: cannot start: database.url: database postgresql+asyncpg://herald:***@127.0.0.1:1/herald: "
            "cannot connect to 127.0.0.1:1") in out
    assert "is PostgreSQL running" in out


@pytest.mark.skipif(not PG_URL, reason="HERALD_TEST_DATABASE_URL is not set: PostgreSQL paths are not tested here")
def test_postgresql_refusals_say_what_to_fix(home: Path) -> None:
    assert PG_URL
    host = PG_URL.split("@", 1)[1].split("/", 1)[0]
    write_config(home, {"database": {"url": f"postgresql+asyncpg://herald_nobody:pw-secret@{host}/test"}})
    code, out = invoke("check-config")
    assert code == 2 and "pw-secret" not in out and "herald_nobody" in out, out
    write_config(home, {"database": {"url": PG_URL.rsplit("/", 1)[0] + "/herald_no_such_db"}})
    code, out = invoke("check-config")
    assert code == 2 and "the database does not exist: create it (createdb herald_no_such_db)" in out, out
    write_config(home, {"database": {"url": PG_URL}})
    assert invoke("check-config")[0] == 0


# ---- the real command: one line, the documented exit status ----------------------------------------------------


def test_herald_run_fails_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    result = herald("run", home=tmp_path / "file")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"herald: config error: HERALD_HOME: {tmp_path / 'file'} is a file, not a folder: point HERALD_HOME at a "
        "folder, or move the file"]
    home = tmp_path / "home"
    write_config(home, {"database": {"url": DOWN}})
    result = herald("run", home=home)
    assert result.returncode == 1 and "Traceback" not in result.stderr and "hunter2" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "cannot connect to 127.0.0.1:1" in result.stderr


@pytest.mark.slow
def test_other_subcommands_name_the_database_too(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home, {"database": {"url": DOWN}})
    for args in (("cron", "list"), ("pairing", "list"), ("approvals", "list")):
        result = herald(*args, home=home)
        assert result.returncode == 1, (args, result.stderr)
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("herald: database.url: database postgresql+asyncpg://herald:***@127.0.0.1:1/herald")
        assert "hunter2" not in line


@pytest.mark.slow
def test_a_taken_port_is_one_line_naming_http_port_and_the_address(tmp_path: Path) -> None:
    import json
    import socket

    home = tmp_path / "home"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        write_config(home, {"http": {"port": port}, "tools": {"terminal": {"enabled": False}}})
        result = herald("run", home=home)
    assert result.returncode == 1, result.stderr  # the world (another program), not the configuration
    # Nothing but the one line: start-up's log lines are in the log file, not in front of it.
    assert result.stderr.strip().splitlines() == [
        f"herald: cannot start: http.port: 127.0.0.1:{port} is already in use (another Herald, or another "
        f"program, listens there): stop that one, or set http.port in {home / 'config.yaml'} to a free port"]
    events = [json.loads(line) for line in (home / "logs" / "herald.log").read_text().splitlines()]
    (failed,) = [e for e in events if e["event"] == "startup_failed"]
    assert failed["exception"][0]["exc_type"] == "OSError"  # the traceback, in the file only
    assert any(e["event"] == "gateway_stopped" for e in events)


@pytest.mark.slow
def test_a_log_folder_that_is_a_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "logs").write_text("not a folder")
    expected = (f"herald: config error: HERALD_HOME: {home / 'logs'} is a file, not a folder: Herald writes its "
                "log files there; move that file away, or set logging.file: false to log to stdout only")
    for command in ("check-config", "run"):
        result = herald(command, home=home)
        assert result.returncode == 2, (command, result.stderr)
        assert result.stderr.strip().splitlines() == [expected], command
    assert (home / "logs").read_text() == "not a folder"  # left as it was
    write_config(home, {"logging": {"file": False}})  # no log file wanted: nothing to complain about
    assert herald("check-config", home=home).returncode == 0


# ---- a home that exists but cannot be written, a wrong PostgreSQL password -------------------------------------


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a 0500 folder anyway: the read-only bind and "
                                              "the /sys tests below cover an unwritable home under root")
def test_an_existing_home_without_write_permission(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o500)
    try:
        result = herald("check-config", home=home)
    finally:
        home.chmod(0o700)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"herald: config error: HERALD_HOME: {home} is not writable by {getpass.getuser()} (Permission denied): "
        f"give {getpass.getuser()} write access to it (chown/chmod), or point HERALD_HOME elsewhere"]


def test_an_existing_home_that_refuses_writes_even_to_root() -> None:
    # sysfs refuses new files whoever asks: a folder that exists and cannot be written, also under root.
    home = Path("/sys/kernel")
    if not home.is_dir():
        pytest.skip("/sys/kernel is not mounted here")
    user = getpass.getuser()
    (problem,) = preflight.home_problems(Paths(home=home, config_file=home / "config.yaml"), create=True)
    assert problem == preflight.Problem(
        "HERALD_HOME", f"{home} is not writable by {user} (Permission denied): give {user} write access to it "
                       "(chown/chmod), or point HERALD_HOME elsewhere")
    assert not problem.runtime  # the environment it names is wrong: exit 2


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_a_home_on_a_read_only_mount(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home, {"tools": {"terminal": {"enabled": False}}})
    # The home bound read-only over itself, as systemd's ProtectSystem=strict does to paths it does not list.
    wrap = ["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(home), str(home)]
    probe = subprocess.run([*wrap, "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"bubblewrap cannot make a mount namespace here: {probe.stderr.strip()}")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("HERALD_")}
    for command in ("check-config", "run"):
        result = subprocess.run([*wrap, str(HERALD), command], env={**environ, "HERALD_HOME": str(home)},
                                capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert result.returncode == 2, (command, result.stderr)
        assert result.stderr.strip().splitlines() == [
            f"herald: config error: HERALD_HOME: {home} is on a read-only file system: point HERALD_HOME at a "
            "writable folder (under systemd's ProtectSystem=strict, one in StateDirectory= or ReadWritePaths=)"]
    assert sorted(p.name for p in home.iterdir()) == ["config.yaml"]


def test_a_wrong_postgresql_password_is_one_line_with_the_password_masked(home: Path) -> None:
    with FakePostgresRefusingPasswords() as pg:
        url = f"postgresql+asyncpg://herald:Wr0ng-pass%40word@127.0.0.1:{pg.port}/herald"
        write_config(home, {"database": {"url": url}})
        expected = (f"database.url: database postgresql+asyncpg://herald:***@127.0.0.1:{pg.port}/herald: password "
                    "authentication failed for user 'herald': check the user and password in database.url")
        code, out = invoke("check-config")
        assert code == 2, out  # the configuration is wrong (exit 2), not the world (exit 1)
        assert out.strip().splitlines() == [f"herald: config error: {expected}"]
        # Any other subcommand that opens the database: the same line, the same status.
        result = herald("cron", "list", home=home)
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip().splitlines() == [f"herald: {expected}"]
        assert pg.attempts and all(attempt == ("herald", "Wr0ng-pass@word") for attempt in pg.attempts)
    assert "Wr0ng" not in out + result.stderr + result.stdout and "pass%40word" not in out + result.stderr


def test_other_start_failures_name_the_key_or_the_file(tmp_path: Path) -> None:
    import errno

    cfg = parse_config({"http": {"host": "192.0.2.7", "port": 80}})
    paths = Paths(home=tmp_path / "home", config_file=tmp_path / "home" / "config.yaml")
    # What asyncio's create_server raises (aiohttp passes it on), wrapped as the runner sees it.
    for code, key, says in ((errno.EADDRNOTAVAIL, "http.host", "192.0.2.7 is not an address of this machine"),
                            (errno.EACCES, "http.port", "ports below 1024 need privileges")):
        try:
            try:
                raise OSError(code, f"error while attempting to bind on address ('192.0.2.7', 80): {os.strerror(code)}")
            except OSError as inner:
                raise RuntimeError("http server failed") from inner
        except RuntimeError as exc:
            problem = preflight.describe_failure(cfg, paths, exc)
        assert problem is not None and problem.key == key and says in problem.message and not problem.runtime
    user = getpass.getuser()
    problem = preflight.describe_failure(cfg, paths, PermissionError(errno.EACCES, "Permission denied",
                                                                     str(paths.home / "media")))
    assert str(problem) == (f"HERALD_HOME: {paths.home / 'media'}: permission denied for {user}: give {user} access "
                            "to it (chown/chmod)")
    problem = preflight.describe_failure(cfg, paths, PermissionError(errno.EACCES, "Permission denied", "/srv/x"))
    assert str(problem) == f"/srv/x: permission denied for {user}: give {user} access to it (chown/chmod)"
    assert preflight.describe_failure(cfg, paths, ValueError("a bug")) is None  # the generic line, with the log
