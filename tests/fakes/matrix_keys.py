"""The fake homeserver's end-to-end part (tests/fakes/matrix_api.py): the key server and to-device messages, which
is all a homeserver does for encryption — it stores and hands out what clients upload, never reads it.

``/keys/upload`` keeps a device's identity keys and one-time keys, ``/keys/query`` hands out a user's devices,
``/keys/claim`` one one-time key per device, ``/sendToDevice`` queues a message (a room key, a key request) for
a device, which its next /sync carries. ``hold_to_device(user)`` keeps a user's devices' to-device messages back
until ``release_to_device(user)``: a room key that arrives a sync or more after the message it opens.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web


class KeyServer:
    def __init__(self) -> None:
        self.device_keys: dict[str, dict[str, dict[str, Any]]] = {}  # user -> device -> its signed keys
        self.one_time_keys: dict[tuple[str, str], dict[str, Any]] = {}  # (user, device) -> key id -> key
        self.to_device: dict[tuple[str, str], list[dict[str, Any]]] = {}  # (user, device) -> queued events
        self.held_users: set[str] = set()
        self.changed_users: list[tuple[int, str]] = []  # (stream position, user) of each device change

    def key_routes(self, prefix: str) -> list[web.AbstractRouteDef]:
        return [web.post(f"{prefix}/keys/upload", self._keys_upload), web.post(f"{prefix}/keys/query", self._query),
                web.post(f"{prefix}/keys/claim", self._claim),
                web.put(f"{prefix}/sendToDevice/{{type}}/{{txn}}", self._send_to_device)]

    def hold_to_device(self, user: str) -> None:
        self.held_users.add(user)

    def release_to_device(self, user: str) -> None:
        self.held_users.discard(user)
        self.position += 1  # type: ignore[attr-defined]
        self._wake()  # type: ignore[attr-defined]

    def waiting_for(self, user: str, device: str) -> bool:
        return bool(self.to_device.get((user, device))) and user not in self.held_users

    def device_part(self, user: str, device: str, since: int | None) -> dict[str, Any]:
        """What a /sync answer says to one device: its to-device messages (taken now) and its key counts."""
        events = [] if user in self.held_users else self.to_device.pop((user, device), [])
        counts = {"signed_curve25519": len(self.one_time_keys.get((user, device), {}))}
        changed = sorted({u for at, u in self.changed_users if since is not None and at > since})
        return {"to_device": {"events": events}, "device_one_time_keys_count": counts,
                "device_lists": {"changed": changed, "left": []}}

    async def _keys_upload(self, request: web.Request) -> web.Response:
        user, device, _token = self._auth(request)  # type: ignore[attr-defined]
        body = await request.json()
        if body.get("device_keys"):
            self.device_keys.setdefault(user, {})[device] = body["device_keys"]
            self.changed_users.append((self.position, user))  # type: ignore[attr-defined]
        self.one_time_keys.setdefault((user, device), {}).update(body.get("one_time_keys") or {})
        return web.json_response({"one_time_key_counts": {
            "signed_curve25519": len(self.one_time_keys[(user, device)])}})

    async def _query(self, request: web.Request) -> web.Response:
        self._auth(request)  # type: ignore[attr-defined]
        wanted = (await request.json()).get("device_keys") or {}
        return web.json_response({"device_keys": {u: dict(self.device_keys.get(u, {})) for u in wanted},
                                  "failures": {}})

    async def _claim(self, request: web.Request) -> web.Response:
        self._auth(request)  # type: ignore[attr-defined]
        wanted = (await request.json()).get("one_time_keys") or {}
        claimed: dict[str, dict[str, Any]] = {}
        for user, devices in wanted.items():
            for device in devices:
                keys = self.one_time_keys.get((user, device)) or {}
                if keys:
                    key_id = next(iter(keys))
                    claimed.setdefault(user, {})[device] = {key_id: keys.pop(key_id)}
        return web.json_response({"one_time_keys": claimed, "failures": {}})

    async def _send_to_device(self, request: web.Request) -> web.Response:
        sender, _device, _token = self._auth(request)  # type: ignore[attr-defined]
        event_type = request.match_info["type"]
        for user, devices in ((await request.json()).get("messages") or {}).items():
            targets = list(self.device_keys.get(user, {})) if "*" in devices else list(devices)
            for device in targets:
                content = devices.get(device, devices.get("*"))
                self.to_device.setdefault((user, device), []).append(
                    {"type": event_type, "sender": sender, "content": json.loads(json.dumps(content))})
        # To-device messages are a stream of their own on a real homeserver: its token moves with them, and a
        # client that sees a sync answer's token again takes the answer for one it already handled.
        self.position += 1  # type: ignore[attr-defined]
        self._wake()  # type: ignore[attr-defined]
        return web.json_response({})
