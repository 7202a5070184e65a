"""``herald profile list | create`` and every subcommand honouring --profile / HERALD_PROFILE."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from gateway.cli import app, state
from gateway.config import parse_config


def invoke(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    state.profile = state.config = None
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.output


def test_create_writes_a_starter_config_that_parses_and_list_shows_it(home):
    code, out = invoke("profile", "create", "work")
    assert code == 0, out
    work = home / "profiles" / "work"
    cfg = parse_config(yaml.safe_load((work / "config.yaml").read_text()))
    assert cfg.http.port != 8650  # can run beside the default profile
    assert (work / "logs").is_dir() and (work / "media").is_dir()
    assert oct(work.stat().st_mode & 0o777) == "0o700"
    code, out = invoke("profile", "list", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert set(rows) == {"default", "work"}
    assert rows["default"]["current"] and not rows["work"]["current"]
    assert rows["work"]["config"] and rows["work"]["home"] == str(work)
    code, out = invoke("--profile", "work", "profile", "list")
    assert any(line.startswith("* work") for line in out.splitlines())


def test_create_refuses_an_existing_profile_and_bad_names(home):
    assert invoke("profile", "create", "work")[0] == 0
    code, out = invoke("profile", "create", "work")
    assert code == 1 and "already exists" in out
    for bad in ("../evil", "default", "a b"):
        code, out = invoke("profile", "create", bad)
        assert code == 2, (bad, out)
    assert sorted(p.name for p in (home / "profiles").iterdir()) == ["work"]


def test_every_subcommand_finds_the_profile_by_option_or_environment(home):
    invoke("profile", "create", "work")
    work = home / "profiles" / "work"
    for args, env in ((("--profile", "work"), None), ((), {"HERALD_PROFILE": "work"})):
        code, out = invoke(*args, "paths", env=env)
        assert code == 0 and f"database   {work / 'state.db'}" in out, out
        code, out = invoke(*args, "check-config", env=env)
        assert code == 0 and str(work / "config.yaml") in out, out
        code, out = invoke(*args, "pairing", "list", "--json", env=env)
        assert code == 0 and json.loads(out)["paired"] == [], out
    assert (work / "state.db").exists() and not (home / "state.db").exists()
