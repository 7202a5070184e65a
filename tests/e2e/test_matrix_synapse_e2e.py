"""Matrix end to end against a real homeserver: Synapse (matrix-synapse from PyPI, SQLite), its users registered
through the shared-secret admin API, and the real ``herald run`` logging in with a password.

One Synapse serves the module. A person (plain HTTP) invites the bot to a DM; the bot joins, answers, and after a
restart answers what was said while it was down, once. With ``encryption: true`` a person's own nio client (its
keys on disk) talks to the bot in an encrypted room: the bot decrypts the question and answers encrypted.

Synapse is not one of Herald's dependencies: this module is skipped where ``synapse`` is not importable.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import importlib.util
import json
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml

from tests.e2e import conftest as e2e
from tests.e2e.conftest import Herald, free_port
from tests.support.polling import wait_until_sync as wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(importlib.util.find_spec("synapse") is None,
                       reason="matrix-synapse is not installed in this environment (it is not a dependency of "
                              "Herald: pip install matrix-synapse into the venv to run this test)"),
]

START_TIMEOUT = 90.0
PASSWORD = "correct horse battery staple"
# Synapse's rate limits would slow a test that logs in and writes quickly: lifted.
_UNLIMITED = {"per_second": 1000, "burst_count": 1000}


@pytest.fixture(autouse=True)
def patient_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Herald is ready once its Matrix login and first sync are done: Synapse on a busy machine takes its time."""
    monkeypatch.setattr(e2e, "START_TIMEOUT", START_TIMEOUT)


@dataclass
class Synapse:
    url: str
    secret: str
    folder: Path

    def call(self, method: str, path: str, body: Any = None, token: str | None = None) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{method} {path}: HTTP {exc.code} {exc.read()[:300]!r}") from None

    def register(self, name: str) -> dict[str, Any]:
        """A user, through the shared-secret registration API (as ``register_new_matrix_user`` does)."""
        nonce = self.call("GET", "/_synapse/admin/v1/register")["nonce"]
        mac = hmac.new(self.secret.encode(), digestmod=hashlib.sha1)
        for part in (nonce, name, PASSWORD):
            mac.update(part.encode() + b"\x00")
        mac.update(b"notadmin")
        return self.call("POST", "/_synapse/admin/v1/register",
                         {"nonce": nonce, "username": name, "password": PASSWORD, "mac": mac.hexdigest(),
                          "admin": False})


@pytest.fixture(scope="module")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    folder = tmp_path_factory.mktemp("synapse")
    config = folder / "homeserver.yaml"
    subprocess.run([sys.executable, "-m", "synapse.app.homeserver", "--server-name", "localhost",
                    "--config-path", str(config), "--generate-config", "--report-stats=no",
                    "--data-directory", str(folder)], cwd=folder, check=True, capture_output=True, timeout=120)
    port, secret = free_port(), secrets.token_hex(16)
    settings = yaml.safe_load(config.read_text())
    settings.update(
        listeners=[{"port": port, "bind_addresses": ["127.0.0.1"], "type": "http", "tls": False,
                    "x_forwarded": False, "resources": [{"names": ["client"], "compress": False}]}],
        registration_shared_secret=secret, trusted_key_servers=[], suppress_key_server_warning=True,
        presence={"enabled": False}, url_preview_enabled=False, enable_metrics=False,
        rc_message=_UNLIMITED, rc_joins={"local": _UNLIMITED, "remote": _UNLIMITED},
        rc_login={"address": _UNLIMITED, "account": _UNLIMITED, "failed_attempts": _UNLIMITED},
        rc_invites={"per_room": _UNLIMITED, "per_user": _UNLIMITED, "per_issuer": _UNLIMITED},
        rc_key_requests=_UNLIMITED,
    )
    config.write_text(yaml.safe_dump(settings))
    with open(folder / "synapse.out", "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "synapse.app.homeserver", "-c", str(config)],
                                cwd=folder, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        server = Synapse(f"http://127.0.0.1:{port}", secret, folder)
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while True:
                assert proc.poll() is None, f"synapse exited: {(folder / 'synapse.out').read_text()[-3000:]}"
                try:
                    server.call("GET", "/_matrix/client/versions")
                    break
                except (OSError, AssertionError):
                    assert time.monotonic() < deadline, "synapse did not start in time"
                    time.sleep(0.2)
            yield server
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def matrix_config(server: Synapse, bot: str, allowed: str, **extra: Any) -> dict[str, Any]:
    return {"platforms": {"matrix": {"enabled": True, "homeserver": server.url, "user_id": bot,
                                     "access_token_env": None, "password_env": "MATRIX_PASSWORD",
                                     "allowed_users": [allowed], **extra}}}


def bot_texts(server: Synapse, room: str, token: str, bot: str) -> list[str]:
    page = server.call("GET", f"/_matrix/client/v3/rooms/{quote(room)}/messages?dir=b&limit=100", token=token)
    return [e["content"].get("body", "") for e in reversed(page["chunk"])
            if e["sender"] == bot and e["type"] == "m.room.message" and "m.new_content" not in e["content"]]


def test_a_dm_on_synapse_is_joined_answered_and_answered_once_across_a_restart(
        synapse: Synapse, make_herald: Callable[..., Herald], monkeypatch: pytest.MonkeyPatch) -> None:
    bot = synapse.register("herald")["user_id"]
    alice = synapse.register("alice")
    token = alice["access_token"]
    monkeypatch.setenv("MATRIX_PASSWORD", PASSWORD)
    herald = make_herald(matrix_config(synapse, bot, alice["user_id"]))
    room = synapse.call("POST", "/_matrix/client/v3/createRoom",
                        {"invite": [bot], "is_direct": True, "preset": "trusted_private_chat"}, token=token)["room_id"]

    def send(text: str) -> None:
        synapse.call("PUT", f"/_matrix/client/v3/rooms/{quote(room)}/send/m.room.message/{secrets.token_hex(8)}",
                     {"msgtype": "m.text", "body": text}, token=token)

    members = f"/_matrix/client/v3/rooms/{quote(room)}/joined_members"
    wait_until(lambda: bot in synapse.call("GET", members, token=token)["joined"], 30, "the bot joined the DM")
    send("hello synapse")
    wait_until(lambda: "echo: hello synapse" in bot_texts(synapse, room, token, bot), 30, "the answer")
    assert (herald.home / "matrix-session.json").stat().st_mode & 0o777 == 0o600
    assert herald.stop() == 0
    send("while you were away")
    herald.start()
    wait_until(lambda: "echo: while you were away" in bot_texts(synapse, room, token, bot), 30, "the late answer")
    send("and now")
    wait_until(lambda: "echo: and now" in bot_texts(synapse, room, token, bot), 30, "the next answer")
    texts = bot_texts(synapse, room, token, bot)
    assert [texts.count(t) for t in ("echo: hello synapse", "echo: while you were away", "echo: and now")] == [1, 1, 1]


def test_an_encrypted_dm_on_synapse_is_read_and_answered_encrypted_also_after_a_restart(
        synapse: Synapse, make_herald: Callable[..., Herald], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    bot = synapse.register("herald-e2e")["user_id"]
    alice = synapse.register("alice-e2e")["user_id"]
    monkeypatch.setenv("MATRIX_PASSWORD", PASSWORD)
    herald = make_herald(matrix_config(synapse, bot, alice, encryption=True))

    def restart() -> None:
        assert herald.stop() == 0
        herald.start()  # the same device, its keys read back from the store

    (tmp_path / "alice-store").mkdir()
    answers = asyncio.run(_talk_encrypted(synapse, alice, bot, tmp_path / "alice-store", restart))
    assert answers == ["echo: a secret question", "echo: another one, after a restart"]
    assert any(e.get("event") == "matrix_device" for e in herald.log_events())
    store = herald.home / "matrix-store"
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in store.iterdir())


async def _talk_encrypted(synapse: Synapse, alice: str, bot: str, store: Path, restart: Callable[[], None]
                          ) -> list[str]:
    """Alice's own client: an encrypted DM with the bot, a question, the bot's answer decrypted; the bot restarted,
    another question and its answer."""
    from nio import AsyncClient, AsyncClientConfig

    client = AsyncClient(synapse.url, alice, store_path=str(store),
                         config=AsyncClientConfig(encryption_enabled=True, store_sync_tokens=True))
    try:
        await client.login(PASSWORD)
        await client.keys_upload()
        created = await client.room_create(invite=[bot], is_direct=True, initial_state=[
            {"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}}])
        answers = [await _ask(client, created.room_id, bot, "a secret question")]
        await asyncio.to_thread(restart)
        answers.append(await _ask(client, created.room_id, bot, "another one, after a restart"))
        return answers
    finally:
        await client.close()


async def _ask(client: Any, room: str, bot: str, question: str) -> str:
    """Once the bot is in the room, ``question`` (encrypted); the bot's next answer, which must come encrypted."""
    from nio import RoomMessageText

    deadline = time.monotonic() + 60
    sent = False
    while time.monotonic() < deadline:
        response = await client.sync(timeout=1000)
        if client.should_query_keys:
            await client.keys_query()
        known = client.rooms.get(room)
        if not sent and known is not None and bot in known.users and not known.users[bot].invited:
            await client.room_send(room, "m.room.message", {"msgtype": "m.text", "body": question},
                                   ignore_unverified_devices=True)
            sent = True
        info = response.rooms.join.get(room) if hasattr(response, "rooms") else None
        for event in info.timeline.events if info else []:
            if isinstance(event, RoomMessageText) and event.sender == bot and sent and event.body.endswith(question):
                assert event.decrypted, "the bot answered in the clear in an encrypted room"
                return str(event.body)
    raise AssertionError(f"no answer to {question!r} within 60 s")
