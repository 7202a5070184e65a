"""Slack's secrets follow its mode: Socket Mode connects with the app-level token, HTTP mode checks requests with
the signing secret, and neither needs the other's. `herald check-config` (the same checks `herald run` makes
before it starts) and `herald doctor` say so; the real `herald run` is in tests/e2e/test_slack_modes_e2e.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gateway.cli import app, state
from gateway.config import parse_config, resolve_paths
from gateway.ops.doctor import Doctor
from tests.fakes.slack_api import FakeSlack

SECRETS = {"socket": "SLACK_APP_TOKEN", "http": "SLACK_SIGNING_SECRET"}
OTHER = {"socket": "SLACK_SIGNING_SECRET", "http": "SLACK_APP_TOKEN"}
KEY = {"socket": "app_token_env", "http": "signing_secret_env"}


def only_own_secrets(monkeypatch: pytest.MonkeyPatch, mode: str, own: bool = True) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-0000000000-checks-only")
    monkeypatch.delenv(OTHER[mode], raising=False)
    if own:
        monkeypatch.setenv(SECRETS[mode], "xapp-1-0000000000-checks-only" if mode == "socket" else "0" * 32)
    else:
        monkeypatch.delenv(SECRETS[mode], raising=False)


def check_config(home: Path, section: dict) -> tuple[int, str]:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump({"platforms": {"slack": {"enabled": True, **section}}}))
    state.profile = state.config = None
    result = CliRunner().invoke(app, ["check-config"])
    return result.exit_code, result.output


@pytest.mark.parametrize("mode", ["socket", "http"])
def test_each_mode_starts_with_only_its_own_secrets(home: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    only_own_secrets(monkeypatch, mode)
    code, out = check_config(home, {"mode": mode})
    assert code == 0 and out.startswith("config ok"), out


@pytest.mark.parametrize("mode", ["socket", "http"])
def test_each_mode_asks_for_its_own_secret_and_not_the_other(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                             mode: str) -> None:
    only_own_secrets(monkeypatch, mode, own=False)
    code, out = check_config(home, {"mode": mode})
    assert code == 2, out
    lines = out.strip().splitlines()
    assert len(lines) == 1, out
    assert lines[0].startswith(f"herald: config error: platforms.slack.{KEY[mode]}: the environment variable "
                               f"{SECRETS[mode]} is not set"), out
    assert f"mode: {mode}" in lines[0] and OTHER[mode] not in out


def test_the_bot_token_is_needed_in_either_mode(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    only_own_secrets(monkeypatch, "http")
    monkeypatch.delenv("SLACK_BOT_TOKEN")
    code, out = check_config(home, {"mode": "http"})
    assert code == 2 and "platforms.slack.bot_token_env: the environment variable SLACK_BOT_TOKEN is not set" in out


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_doctor_accepts_each_mode_with_only_its_own_secrets(home: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path, mode: str) -> None:
    fake = FakeSlack()
    await fake.start()
    try:
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the credential locks' folder
        monkeypatch.setenv("SLACK_BOT_TOKEN", fake.bot_token)
        monkeypatch.setenv(SECRETS[mode], fake.app_token if mode == "socket" else fake.signing_secret)
        monkeypatch.delenv(OTHER[mode], raising=False)
        cfg = parse_config({"platforms": {"slack": {"enabled": True, "mode": mode, "api_base_url": fake.api_url}}})
        checks = await Doctor(cfg, resolve_paths(), timeout=5).platforms()
    finally:
        await fake.stop()
    assert [c.status for c in checks if c.name == "platforms.slack"][:1] == ["ok"], checks
    assert all(c.status == "ok" for c in checks), checks
    said = next(c.message for c in checks if c.name == "platforms.slack")
    assert ("app-level token accepted" in said) == (mode == "socket"), said
