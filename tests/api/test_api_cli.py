"""``herald api-key``: a key is printed once and kept only as its hash; list and revoke by name."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gateway.cli import app
from gateway.cli.api_keys import parse_duration
from gateway.cli.common import state
from gateway.storage.api_keys import ApiKeyStore, digest
from gateway.storage.store import Store


def invoke(*args: str) -> tuple[int, str, str]:
    state.profile = state.config = None
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_create_prints_the_key_once_and_stores_only_its_hash(home: Path) -> None:
    code, out, err = invoke("api-key", "create", "open-webui", "--expires", "90d")
    assert code == 0, err
    key = out.strip()
    assert key.startswith("sk-herald-") and "api:open-webui" in err and "not shown again" in err
    assert key not in (home / "state.db").read_bytes().decode(errors="replace")

    async def check() -> None:
        store = Store(f"sqlite+aiosqlite:///{home / 'state.db'}")
        await store.init()
        try:
            rows = await store.run_read(lambda c: [dict(r._mapping) for r in c.exec_driver_sql(
                "select name, key_hash, expires_at from api_keys")])
            assert [(r["name"], r["key_hash"]) for r in rows] == [("open-webui", digest(key))]
            assert await ApiKeyStore(store).verify(key) == "open-webui"
        finally:
            await store.close()

    asyncio.run(check())
    code, _out, err = invoke("api-key", "create", "open-webui")
    assert code == 1 and "has a key already" in err
    code, out, _err = invoke("api-key", "list", "--json")
    (row,) = json.loads(out)
    assert row["name"] == "open-webui" and row["state"] == "live" and "key_hash" not in row
    assert invoke("api-key", "revoke", "open-webui")[0] == 0
    assert json.loads(invoke("api-key", "list", "--json")[1])[0]["state"] == "revoked"
    code, _out, err = invoke("api-key", "revoke", "open-webui")
    assert code == 1 and "no live API key" in err


def test_names_and_durations_are_checked(home: Path) -> None:
    code, _out, err = invoke("api-key", "create", "two words")
    assert code == 2 and "not a usable name" in err
    code, _out, err = invoke("api-key", "create", "ok", "--expires", "soon")
    assert code == 2 and "--expires" in err
    assert parse_duration("90d") == 90 * 86400 and parse_duration("12h") == 43200 and parse_duration("2w") == 1209600
    with pytest.raises(ValueError):
        parse_duration("0d")


def test_check_config_refuses_approvals_put_where_nobody_can_answer(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump({"api": {"enabled": True, "approvals_to": "telegram:123"}}))
    code, out, err = invoke("check-config")
    assert code == 2, out + err
    assert "api.approvals_to: telegram is not enabled" in out + err
    (home / "config.yaml").write_text(yaml.safe_dump({"api": {"enabled": True, "approvals_to": "dashboard"}}))
    assert invoke("check-config")[0] == 0
