"""Backups the agent cannot read: `herald backup` without PATH writes into the profile's backups folder, which the
sandbox hides (checked from inside real bubblewrap); a PATH the sandbox shows is written 0600 all the same and
named in a one-line warning; one inside tools.terminal.hidden_paths is not."""

from __future__ import annotations

import shutil
import sqlite3
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gateway.config import parse_config, resolve_paths
from gateway.turns import sandboxing
from tests.cli.test_profiles import invoke
from tests.tools.test_sandbox import needs_bwrap, term
from tools.dangerous import Decision
from tools.registry import ToolContext

SECRET = "conversation-only-people-may-read"


@pytest.fixture
def setup(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """A HERALD_HOME outside /tmp (the sandbox hides the host's /tmp anyway), with a database and a config that
    hides one extra folder."""
    root = Path(tempfile.mkdtemp(prefix="herald-bak-", dir="/var/tmp"))
    try:
        home, vault, shared = root / "home", root / "vault", root / "shared"
        for d in (home, vault, shared):
            d.mkdir()
        conn = sqlite3.connect(home / "state.db")
        conn.execute("CREATE TABLE messages (text TEXT)")
        conn.execute("INSERT INTO messages VALUES (?)", (SECRET,))
        conn.commit()
        conn.close()
        (home / "config.yaml").write_text(yaml.safe_dump({"tools": {"terminal": {"hidden_paths": [str(vault)]}}}))
        monkeypatch.setenv("HERALD_HOME", str(home))
        monkeypatch.delenv("HERALD_PROFILE", raising=False)
        yield home, root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_without_a_path_the_backup_goes_where_the_sandbox_hides_it(setup: tuple[Path, Path]) -> None:
    home, root = setup
    code, out = invoke("backup")
    assert code == 0, out
    (copy,) = (home / "backups").glob("herald-default-*.db")
    assert stat.S_IMODE((home / "backups").stat().st_mode) == 0o700
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    assert "warning" not in out

    code, out = invoke("backup", str(root / "vault"))
    assert code == 0 and "warning" not in out, out

    code, out = invoke("backup", str(root / "shared"))
    assert code == 0, out
    (shown,) = (root / "shared").glob("*.db")
    assert stat.S_IMODE(shown.stat().st_mode) == 0o600
    (line,) = [x for x in out.splitlines() if x.startswith("warning:")]
    assert str(shown) in line and "tools.terminal.hidden_paths" in line


@needs_bwrap
def test_the_default_backup_is_invisible_from_inside_the_sandbox(setup: tuple[Path, Path]) -> None:
    home, root = setup
    assert invoke("backup")[0] == 0
    assert invoke("backup", str(root / "shared"))[0] == 0
    (copy,) = (home / "backups").glob("*.db")
    (shown,) = (root / "shared").glob("*.db")
    paths = resolve_paths()
    (root / "ws").mkdir()
    cfg = parse_config({**yaml.safe_load(paths.config_file.read_text()),
                        "tools": {"terminal": {"sandbox": "bwrap", "cwd": str(root / "ws"),
                                               "hidden_paths": [str(root / "vault")]}}})
    policy = sandboxing.policy(cfg, paths)
    approve = lambda command, verdict, ctx: Decision("approved", "approved by the test")  # noqa: E731
    ctx = ToolContext("s", str(policy.workspace), threading.Event(), cfg.tools, extras={"approve": approve},
                      sandbox=policy)
    out = term(ctx, f"test -e {copy} && echo SEES-DEFAULT || echo NO-DEFAULT; ls -A {home} | wc -l; "
                    f"grep -qa {SECRET} {shown} && echo READS-SHOWN")["output"]
    assert out.split() == ["NO-DEFAULT", "0", "READS-SHOWN"], out  # the one it warned about can be read
