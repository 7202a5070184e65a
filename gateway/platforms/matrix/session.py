"""The bot's device: which access token it connects with, and what the profile keeps of it.

An access token from the environment (``access_token_env``) is used as it is; whoami tells its device. Without
one, a password (``password_env``) logs in once: the device it makes and its token are kept in the profile's
home (``matrix-session.json``, 0600), and later starts use them, so the password may leave the environment
after the first start (and the device, with its end-to-end keys, stays the same). The same file keeps the key
that encrypts nio's key store, which must not change while the device does not.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from gateway.kernel.configbase import secret
from gateway.platforms.base import CredentialRejected
from gateway.platforms.matrix import SESSION_FILE
from gateway.platforms.matrix.transport import error_of, http_status

log = structlog.get_logger("herald.matrix")


@dataclass(frozen=True)
class Device:
    access_token: str
    device_id: str | None
    stored: bool  # the token came from the profile (a password's login), not from the environment


class Sessions:
    def __init__(self, cfg: Any, home: Path) -> None:
        self.cfg = cfg
        self.path = home / SESSION_FILE
        self._saved: dict[str, Any] | None = None

    @property
    def saved(self) -> dict[str, Any]:
        """What the profile keeps for this homeserver and account; {} for another one's, or none."""
        if self._saved is None:
            try:
                data = json.loads(self.path.read_text())
            except (OSError, ValueError):
                data = {}
            same = isinstance(data, dict) and data.get("homeserver") == self.cfg.homeserver \
                and data.get("user_id") == self.cfg.user_id
            self._saved = {k: v for k, v in data.items() if k not in ("homeserver", "user_id")} if same else {}
        return self._saved

    def update(self, **fields: Any) -> None:
        """Kept owner-only from the file's first byte, and replaced whole (a crash leaves the old or the new)."""
        saved = {**self.saved, **fields}
        saved = {k: v for k, v in saved.items() if v is not None}
        body = json.dumps({"homeserver": self.cfg.homeserver, "user_id": self.cfg.user_id, **saved}, indent=1)
        partial = self.path.with_name(self.path.name + ".part")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(body)
            os.chmod(partial, 0o600)
            os.replace(partial, self.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()
        self._saved = saved

    def pickle_key(self) -> str:
        """The key nio's key store is encrypted with: made once per profile, kept with the session."""
        key = self.saved.get("pickle_key")
        if not key:
            key = secrets.token_urlsafe(32)
            self.update(pickle_key=key)
        return str(key)

    async def device(self, client: Any) -> Device:
        """The token to connect with, checked with the homeserver (whoami), set on the client with its device
        (which loads the key store when encryption is on); logs in with the password when there is no token or
        the kept one was refused."""
        token = secret(self.cfg.access_token_env)
        if token:
            device_id = await self._whoami(client, token, f"the access token in {self.cfg.access_token_env}")
            if device_id != self.saved.get("device_id"):
                self.update(device_id=device_id, access_token=None)  # a kept token is another device's
            return self._restore(client, Device(token, device_id, stored=False))
        kept = self.saved.get("access_token")
        if kept:
            try:
                device_id = await self._whoami(client, kept, "the device kept in " + SESSION_FILE)
                return self._restore(client, Device(kept, device_id or self.saved.get("device_id"), stored=True))
            except CredentialRejected:
                if not secret(self.cfg.password_env):
                    raise
                log.warning("matrix_session_refused", action="logging in again with the password")
        return await self.log_in(client)

    def _restore(self, client: Any, device: Device) -> Device:
        if device.device_id:
            client.restore_login(self.cfg.user_id, device.device_id, device.access_token)
        elif self.cfg.encryption:
            raise RuntimeError("the access token is not tied to a device, and encryption needs one: log in with "
                               "platforms.matrix.password_env instead")
        else:
            client.user_id, client.access_token = self.cfg.user_id, device.access_token
        return device

    async def log_in(self, client: Any) -> Device:
        """A new device, from the password; nio takes it on (and opens its key store)."""
        password = secret(self.cfg.password_env)
        if not password:
            raise RuntimeError(
                f"platforms.matrix has no way to log in: set the access token's variable {self.cfg.access_token_env}"
                + (f", or the password's {self.cfg.password_env}" if self.cfg.password_env else
                   ", or password_env for a first login with the account's password"))
        client.user = self.cfg.user_id
        response = await client.login(password, device_name=self.cfg.device_name)
        if error_of(response) is not None:
            if http_status(response) in (401, 403):
                raise CredentialRejected(f"the homeserver refused the password in {self.cfg.password_env}: "
                                         f"{getattr(response, 'message', '')}")
            raise ConnectionError(f"logging in failed: {response}")
        self.update(access_token=response.access_token, device_id=response.device_id)
        log.info("matrix_logged_in", user_id=self.cfg.user_id, device_id=response.device_id)
        return Device(response.access_token, response.device_id, stored=True)

    async def _whoami(self, client: Any, token: str, what: str) -> str | None:
        client.user_id, client.access_token = self.cfg.user_id, token
        response = await client.whoami()
        if error_of(response) is not None:
            if http_status(response) in (401, 403):
                raise CredentialRejected(f"the homeserver refused {what}: {getattr(response, 'message', '')}")
            raise ConnectionError(f"whoami failed: {response}")
        if response.user_id != self.cfg.user_id:
            raise CredentialRejected(f"{what} belongs to {response.user_id}, not to platforms.matrix.user_id "
                                     f"({self.cfg.user_id})")
        return response.device_id or None


async def check(cfg: Any, timeout: float) -> str | None:
    """``herald doctor``'s question, asked without the profile's files: whoami with the configured token; with a
    password only, a login whose device is logged out again at once (a real check of the password that leaves
    no device behind)."""
    import aiohttp

    base = f"{cfg.homeserver}/_matrix/client/v3"
    token = secret(cfg.access_token_env)
    password = secret(cfg.password_env)
    if not cfg.homeserver or not (token or password):
        return None
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as http:
        if token:
            return await _whoami(http, base, token, cfg)
        body = {"type": "m.login.password", "identifier": {"type": "m.id.user", "user": cfg.user_id},
                "password": password, "initial_device_display_name": f"{cfg.device_name} (herald doctor)"}
        async with http.post(f"{base}/login", json=body) as resp:
            said = await resp.json(content_type=None)
        if resp.status in (401, 403):
            raise CredentialRejected(f"the homeserver refused the password in {cfg.password_env}: "
                                     f"{_said(said)} (HTTP {resp.status})")
        if resp.status != 200 or not isinstance(said, dict):
            raise ConnectionError(f"the homeserver answered HTTP {resp.status}: {_said(said)}")
        async with http.post(f"{base}/logout", headers={"Authorization": f"Bearer {said['access_token']}"}):
            pass
        return f"{said.get('user_id')} (password accepted)"


async def _whoami(http: Any, base: str, token: str, cfg: Any) -> str:
    async with http.get(f"{base}/account/whoami", headers={"Authorization": f"Bearer {token}"}) as resp:
        said = await resp.json(content_type=None)
    if resp.status in (401, 403):
        raise CredentialRejected(f"the homeserver refused the access token in {cfg.access_token_env}: "
                                 f"{_said(said)} (HTTP {resp.status})")
    if resp.status != 200 or not isinstance(said, dict):
        raise ConnectionError(f"the homeserver answered HTTP {resp.status}: {_said(said)}")
    if said.get("user_id") != cfg.user_id:
        raise CredentialRejected(f"the access token belongs to {said.get('user_id')}, not to {cfg.user_id}")
    device = f", device {said['device_id']}" if said.get("device_id") else ""
    return f"{said['user_id']}{device}"


def _said(body: Any) -> str:
    if isinstance(body, dict):
        return f"{body.get('errcode') or ''} {body.get('error') or ''}".strip() or "no reason given"
    return "no reason given"
