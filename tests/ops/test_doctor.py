"""`herald doctor`'s model check against the fake OpenAI-compatible server: a model list that answers 200 proves
the key only when a request without the key is refused; where the list is public (OpenRouter's is), one token
of the model proves it. And a config with a schema error still gets the checks that do not depend on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gateway.cli import app, state
from gateway.config import parse_config, resolve_paths
from gateway.ops.doctor import Doctor
from tests.fakes.llm import FakeLLM

KEY = "sk-test-doctor-key-000000000000000000"


async def model_check(fake: FakeLLM, monkeypatch: pytest.MonkeyPatch, key: str | None) -> tuple[str, str]:
    if key is None:
        monkeypatch.delenv("DOCTOR_TEST_KEY", raising=False)
    else:
        monkeypatch.setenv("DOCTOR_TEST_KEY", key)
    cfg = parse_config({"model": {"base_url": fake.base_url, "name": "fake-model",
                                  **({"api_key_env": "DOCTOR_TEST_KEY"} if key is not None else {})}})
    (check,) = await Doctor(cfg, resolve_paths(), timeout=5).model()
    return check.status, check.message


@pytest.mark.parametrize("public", [False, True])
async def test_a_right_key_is_accepted(home: Path, monkeypatch: pytest.MonkeyPatch, public: bool) -> None:
    async with FakeLLM(api_key=KEY, public_models=public) as fake:
        status, message = await model_check(fake, monkeypatch, KEY)
    assert status == "ok", message
    if public:
        assert "key accepted by a one-token request of fake-model (its model list is public)" in message
        assert fake.auth_headers == [f"Bearer {KEY}"]  # one completion, with the key
        assert fake.requests[0]["max_tokens"] == 1
    else:
        assert "key accepted, fake-model offered" in message
        assert fake.requests == []  # the list was enough: no token spent


async def test_a_wrong_key_is_refused_even_where_the_model_list_is_public(home: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeLLM(api_key=KEY, public_models=True) as fake:
        status, message = await model_check(fake, monkeypatch, "sk-wrong-key-00000000000000000000")
    assert status == "fail" and "refused the key in DOCTOR_TEST_KEY (HTTP 401" in message, message
    assert "sk-wrong" not in message


async def test_a_server_without_a_key(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeLLM() as fake:
        status, message = await model_check(fake, monkeypatch, None)
    assert status == "ok" and "no key needed, fake-model offered" in message and fake.requests == []


def test_doctor_reports_a_schema_error_and_still_checks_the_rest(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN", raising=False)
    home.mkdir(parents=True)
    (home / "config.yaml").write_text(yaml.safe_dump({"gateway": {"busy_mod": "queue"},
                                                      "platforms": {"telegram": {"enabled": True}},
                                                      "tools": {"terminal": {"enabled": False}}}))
    state.profile = state.config = None
    result = CliRunner().invoke(app, ["doctor", "--json", "--timeout", "2"])
    assert result.exit_code == 1, result.output
    checks = json.loads(result.output)["checks"]
    failed = {(c["name"], c["message"]) for c in checks if c["status"] == "fail"}
    assert ("config", f"{home / 'config.yaml'}: gateway.busy_mod: unknown key") in failed
    assert ("platforms.telegram.token_env", "the environment variable TELEGRAM_BOT_TOKEN is not set: export it, or "
            f"add the line TELEGRAM_BOT_TOKEN=<value> to {home / '.env'}") in failed
    names = {c["name"] for c in checks}
    assert {"home", "disk", "database", "sandbox", "clock"} <= names
