"""Matrix through matrix-nio: the adapter's lifecycle (the device's login, end-to-end encryption), what each synced
event becomes, invites, presses by reaction, files. The /sync loop and its token's rule live in sync.py,
normalising in inbound.py, sending in outbound.py, buttons and "working" as reactions in reactions.py.

With ``encryption: true`` nio keeps the device's keys in the profile's home (``matrix-store/``, owner-only, its
pickles encrypted with a key kept in ``matrix-session.json``), decrypts what it can as events arrive and
encrypts what the bot sends into encrypted rooms, for every device of their members (trust on first use: an
unverified device is not left out; the README says how to verify the bot's device). With it off, an encrypted
room is told once that the bot cannot read it, and nothing is sent there in the clear.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import structlog

from gateway.kernel.chunking import MARKDOWN
from gateway.platforms.base import (
    AdapterContext,
    Attachment,
    ButtonPress,
    Capabilities,
    FileUnavailable,
    InboundMessage,
    OutboundMessage,
    PlatformAdapter,
    ShuttingDown,
    Source,
    TooBig,
    Unavailable,
)
from gateway.platforms.matrix import STORE_DIR
from gateway.platforms.matrix.config import MatrixConfig
from gateway.platforms.matrix.crypto import KeyWait
from gateway.platforms.matrix.inbound import ENCRYPTED, MESSAGE, REACTION, MatrixInbound, replied_to, thread_of
from gateway.platforms.matrix.markup import MAX_CONTENT
from gateway.platforms.matrix.outbound import MatrixOutbound
from gateway.platforms.matrix.reactions import APPROVAL_KEYS, NUMBERED, variants
from gateway.platforms.matrix.session import Sessions, check
from gateway.platforms.matrix.sync import Outcome, SyncLoop
from gateway.platforms.matrix.transport import Media, call, make_client

log = structlog.get_logger("herald.matrix")

CANNOT_READ = ("🔒 This room is end-to-end encrypted, and this bot's Matrix account has encryption turned off "
               "(platforms.matrix.encryption), so it cannot read what is written here. Talk to it in an "
               "unencrypted room, or ask its operator to turn encryption on.")
CANNOT_DECRYPT = ("🔒 I could not decrypt a message here: this device has not been given its keys. Send it again "
                  "in a moment; if this keeps happening, verify the bot's device (see Herald's README, Matrix).")
LEARN_AGAIN = 60.0  # seconds before a thread or message found not to be the bot's is asked about again
TOLD = "encryption notice sent"  # the cursor mark of a room told CANNOT_READ (once, across restarts)
_KEYS = frozenset(k for key in (*APPROVAL_KEYS.values(), *NUMBERED) for k in variants(key))


class MatrixAdapter(PlatformAdapter):
    name = "matrix"
    capabilities = Capabilities(max_message_length=MAX_CONTENT, dialect=MARKDOWN, buttons=True, edits=True,
                                threads=True, typing=True, idempotent_send=True, command_prefix="!",
                                min_edit_interval=1.0)
    prompt_hint = ("You are talking on Matrix. Your Markdown is shown formatted (bold, italic, headings, lists, "
                   "quotes, code blocks, tables, links).")

    def __init__(self, ctx: AdapterContext) -> None:
        super().__init__(ctx)
        self.cfg: MatrixConfig = ctx.config
        self.client: Any = None
        self.media: Media | None = None
        self.sessions = Sessions(self.cfg, ctx.home)
        self.inbound = MatrixInbound(self.name, self.cfg, self.gateway)
        self.outbound = MatrixOutbound(lambda: self.client, self.inbound, lambda: self.media)
        self.sync: SyncLoop | None = None
        self._told: set[str] = set()  # rooms told they cannot be read (or decrypted)
        self._invites: set[str] = set()  # invites being answered
        self._asked: dict[str, float] = {}  # event id -> when it may be asked about again (``_learn``)
        self.key_wait = KeyWait(lambda: self.client, self._take, self._gave_up,
                                lambda: self.sync.release() if self.sync is not None else None)
        self._tasks: set[asyncio.Task[Any]] = set()

    # ---- lifecycle -------------------------------------------------------------------------------

    @property
    def store(self) -> Path:
        return self.ctx.home / STORE_DIR

    async def start(self) -> None:
        problems = [f"{key}: {said}" for key, said in self.cfg.problems() if key in ("homeserver", "user_id")]
        if problems:
            raise RuntimeError(f"platforms.matrix is enabled but {'; '.join(problems)}")
        assert self.cfg.homeserver and self.cfg.user_id
        store = None
        if self.cfg.encryption:
            store = self.store
            store.mkdir(parents=True, exist_ok=True, mode=0o700)
        client = make_client(self.cfg.homeserver, self.cfg.user_id, store=store,
                             pickle_key=self.sessions.pickle_key() if store else None)
        self.client = client
        try:
            device = await self.sessions.device(client)
            self.media = Media(self.cfg.homeserver, device.access_token)
            await self._know_myself(client)
            if client.olm is not None:
                await self._keys()
                self._private_store()
                fingerprint = client.olm.account.identity_keys["ed25519"]
                log.info("matrix_device", device_id=client.device_id,
                         fingerprint=" ".join(fingerprint[i:i + 4] for i in range(0, len(fingerprint), 4)))
            saved = await self.ctx.cursors.load(self.name) if self.ctx.cursors is not None else {}
            self._told = {room for room, mark in saved.items() if mark == TOLD}
            self.sync = SyncLoop(self.name, self.cfg.user_id, lambda: self.client, self.ctx.cursors, self._take,
                                 self._invited, self._after_sync, self._state, lambda: self.gateway.stopping)
            await self.sync.start(saved)
        except BaseException:
            await self.stop()
            raise
        log.info("matrix_connected", user_id=self.cfg.user_id, device_id=client.device_id,
                 encryption=client.olm is not None)

    async def _know_myself(self, client: Any) -> None:
        self.inbound.user_id = self.cfg.user_id or ""
        self.inbound.command_names = frozenset(name for name, _ in self.gateway.command_menu(self.name))
        try:
            name = (await call(client.get_displayname(self.cfg.user_id))).displayname
        except Exception as exc:  # a display name is a nicety for mentions: never a reason not to connect
            log.info("matrix_displayname_failed", error=f"{type(exc).__name__}: {exc}")
            name = None
        self.inbound.display_name = name or ""

    async def stop(self) -> None:
        self.outbound.stop()
        for task in list(self._tasks):
            task.cancel()
        self._tasks.clear()
        sync, self.sync = self.sync, None
        if sync is not None:
            await sync.stop()
        # What waited for its key comes again from the saved position (held before it) at the next start.
        self.key_wait.waiting.clear()
        client, self.client = self.client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()
            if client.olm is not None:
                self._private_store()
        media, self.media = self.media, None
        if media is not None:
            await media.close()

    def _private_store(self) -> None:
        """nio makes its SQLite files with the process's umask: owner-only, whatever that was."""
        with contextlib.suppress(OSError):
            for path in self.store.iterdir():
                os.chmod(path, 0o600)

    @classmethod
    def credentials_of(cls, config: Any) -> list[tuple[str, str]]:
        # The account, not a token: two processes on one account each answer every message, whatever device
        # or token each one has.
        if not config.homeserver or not config.user_id:
            return []
        return [("matrix", f"{config.homeserver} {config.user_id}")]

    @classmethod
    async def check_credentials(cls, config: Any, timeout: float) -> str | None:
        return await check(config, timeout)

    async def wait_closed(self) -> None:
        assert self.sync is not None and self.sync.closed is not None
        await asyncio.shield(self.sync.closed)

    def _state(self, state: str, error: str | None) -> None:
        if self.client is not None:
            self.state, self.last_error = state, error  # type: ignore[assignment]

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _keys(self) -> None:
        """The end-to-end keys' upkeep after each sync (what nio's own sync_forever does): upload this device's
        keys when short, ask for new devices' keys, claim one-time keys, send what is queued for devices."""
        client = self.client
        if client is None or client.olm is None:
            return
        try:
            if client.should_upload_keys:
                await client.keys_upload()
            if client.should_query_keys:
                await client.keys_query()
            if client.should_claim_keys:
                await client.keys_claim(client.get_users_for_key_claiming())
            await client.send_to_device_messages()
        except Exception as exc:
            log.warning("matrix_keys_failed", error=f"{type(exc).__name__}: {exc}")

    # ---- what each event becomes -----------------------------------------------------------------

    async def _take(self, room_id: str, event: Any) -> Outcome:
        source = getattr(event, "source", None)
        if not isinstance(source, dict):
            return "left"
        if source.get("sender") == self.cfg.user_id:
            self.inbound.saw_own(room_id, source)
            return "own"
        room = await self._room(room_id)
        if source.get("type") == ENCRYPTED:  # still encrypted: nio could not (or may not) decrypt it
            if self.client is not None and self.client.olm is not None:
                self.key_wait.hold(room_id, event)  # its key may yet come
                return "held"
            self._unreadable(room_id, room, source)
            return "left"
        if source.get("type") == REACTION:
            self._reacted(room_id, room, source)
            return "left"
        try:
            msg = self.inbound.message(room_id, room, source)
            if msg is None and self.inbound.chat_type(room) != "dm" and await self._learn(room_id, source):
                msg = self.inbound.message(room_id, room, source)
        except Exception as exc:
            # A bug in normalising one event must not wedge the sync.
            log.error("matrix_event_failed", event_id=source.get("event_id"), error=f"{type(exc).__name__}: {exc}")
            self.faults.record("bad_request", door="matrix", kind="event not understood")
            return "left"
        if msg is None:
            return "left"
        try:
            accepted = await self.accept(msg)
        except (ShuttingDown, Unavailable):
            return "failed"
        except Exception as exc:
            log.error("matrix_accept_failed", event_id=source.get("event_id"), error=f"{type(exc).__name__}: {exc}")
            return "failed"
        if accepted:
            self.outbound.working.note(room_id, msg.source.thread_id, str(source.get("event_id")))
        return "taken" if accepted else "left"

    async def _room(self, room_id: str) -> Any:
        """nio's view of the room, its members asked for when no sync has told them yet (whether it is a DM
        depends on them)."""
        client = self.client
        room = client.rooms.get(room_id) if client is not None else None
        if room is not None and room.member_count == 0:
            try:
                await call(client.joined_members(room_id))
            except Exception as exc:
                log.info("matrix_members_failed", room_id=room_id, error=f"{type(exc).__name__}: {exc}")
        return room

    async def _learn(self, room_id: str, event: dict[str, Any]) -> bool:
        """Whether a message not (yet) seen to be for the bot follows up in a thread it posted in or replies to
        one of its messages, from before this process started: asked of the homeserver (the thread root's
        aggregation says whether the bot took part; a reply's target, who sent it), once per thread or event
        and minute."""
        content = event.get("content") if isinstance(event.get("content"), dict) else {}
        root, reply = thread_of(content), replied_to(content)
        if event.get("type") != MESSAGE or not self.cfg.require_mention:
            return False
        learnt = False
        if root and (room_id, root) not in self.inbound.threads and self._ask(root):
            found = await self._fetch(room_id, root)
            thread = ((found.get("unsigned") or {}).get("m.relations") or {}).get("m.thread") or {}
            if found.get("sender") == self.cfg.user_id or thread.get("current_user_participated"):
                self.inbound.threads.add((room_id, root))
                learnt = True
        if reply and reply not in self.inbound.own_events and self._ask(reply) \
                and (await self._fetch(room_id, reply)).get("sender") == self.cfg.user_id:
            self.inbound.own_events.add(reply)
            learnt = True
        return learnt

    def _ask(self, event_id: str) -> bool:
        now = time.monotonic()
        if self._asked.get(event_id, 0.0) > now:
            return False
        self._asked[event_id] = now + LEARN_AGAIN
        if len(self._asked) > 10_000:
            self._asked = {k: v for k, v in self._asked.items() if v > now}
        return True

    async def _fetch(self, room_id: str, event_id: str) -> dict[str, Any]:
        try:
            found = (await call(self.client.room_get_event(room_id, event_id))).event
        except Exception as exc:
            log.info("matrix_event_lookup_failed", event_id=event_id, error=f"{type(exc).__name__}: {exc}")
            return {}
        source = getattr(found, "source", None)
        return source if isinstance(source, dict) else {}

    def _unreadable(self, room_id: str, room: Any, event: dict[str, Any]) -> None:
        """An encrypted message from someone who may talk here, with encryption off: the room is told once (across
        restarts) why there is no answer."""
        if self._may_be_told(room_id, room, event):
            self._spawn(self._tell(room_id, CANNOT_READ, keep=True), name="matrix:notice")

    def _gave_up(self, room_id: str, event: dict[str, Any]) -> None:
        """An encrypted message whose key never came (crypto.py): the room is told, once while this process runs."""
        room = self.client.rooms.get(room_id) if self.client is not None else None
        if self._may_be_told(room_id, room, event):
            self._spawn(self._tell(room_id, CANNOT_DECRYPT, keep=False), name="matrix:notice")

    def _may_be_told(self, room_id: str, room: Any, event: dict[str, Any]) -> bool:
        sender = str(event.get("sender") or "")
        who = Source(platform=self.name, chat_id=room_id, user_id=sender, chat_type=self.inbound.chat_type(room))
        if room_id in self._told or not self.gateway.may_talk(who):
            return False
        self._told.add(room_id)
        return True

    async def _after_sync(self) -> None:
        await self._keys()
        await self.key_wait.retry()

    async def _tell(self, room_id: str, text: str, keep: bool) -> None:
        try:
            content = {"msgtype": "m.notice", "body": text}
            await call(self.client.room_send(room_id, "m.room.message", content, ignore_unverified_devices=True))
            if keep and self.ctx.cursors is not None:
                await self.ctx.cursors.save(self.name, {room_id: TOLD})
        except Exception as exc:
            self._told.discard(room_id)
            log.info("matrix_notice_failed", room_id=room_id, error=f"{type(exc).__name__}: {exc}")

    def _reacted(self, room_id: str, room: Any, event: dict[str, Any]) -> None:
        found = self.inbound.reaction(room_id, room, event)
        if found is None:
            return
        target, key, who = found
        known = self.outbound.keys.lookup(target, key)
        if known is None:
            if key in _KEYS:  # maybe a prompt sent before this process started
                self._spawn(self._press_later(room_id, target, key, who), name="matrix:press")
            return
        self._press(target, known, who)

    async def _press_later(self, room_id: str, target: str, key: str, who: Source) -> None:
        try:
            known = await self.outbound.keys.read_back(room_id, target, key)
        except Exception as exc:
            log.info("matrix_press_lookup_failed", error=f"{type(exc).__name__}: {exc}")
            return
        self._press(target, known, who)

    def _press(self, target: str, known: tuple[str | None, str | None], who: Source) -> None:
        thread, button_id = known
        if button_id:
            self.press(ButtonPress(replace(who, thread_id=thread), button_id, target))

    def _invited(self, room_id: str, events: list[dict[str, Any]]) -> None:
        if room_id not in self._invites:
            self._invites.add(room_id)
            self._spawn(self._answer_invite(room_id, events), name="matrix:invite")

    async def _answer_invite(self, room_id: str, events: list[dict[str, Any]]) -> None:
        """Joined when someone who may talk to the bot (there) invited it; declined otherwise."""
        inviter = self.inbound.invite(room_id, events)
        welcome = inviter is not None and self.gateway.may_talk(inviter)
        try:
            if welcome:
                await call(self.client.join(room_id))
            else:
                await call(self.client.room_leave(room_id))
            log.info("matrix_invite", room_id=room_id, inviter=inviter.user_id if inviter else None,
                     joined=welcome)
        except Exception as exc:
            log.warning("matrix_invite_failed", room_id=room_id, error=f"{type(exc).__name__}: {exc}")
        finally:
            self._invites.discard(room_id)

    # ---- files -----------------------------------------------------------------------------------

    async def download(self, msg: InboundMessage, ref: dict[str, Any], index: int) -> str:
        """From the content repository with the bot's token, capped while it streams; decrypted (its hash
        checked) when it came from an encrypted room."""
        cap_mb = self.cfg.max_media_mb
        if int(ref.get("size") or 0) > cap_mb * 1024 * 1024:
            raise TooBig(cap_mb)
        if self.media is None:
            raise FileUnavailable("Matrix is not connected right now")
        room, _, event = msg.platform_message_id.partition("/")
        target = self.media_path("mx", room, event, str(index), str(ref.get("name") or "file"))
        await self.media.download(str(ref.get("mxc") or ""), target, cap_mb, ref.get("encrypted"))
        return str(target)

    async def send_file(self, chat_id: str, attachment: Attachment, message: OutboundMessage,
                        idempotency_key: str | None = None) -> list[str]:
        """A file into the chat (the content repository's upload, then its message, in ``message``'s thread);
        its ids."""
        return await self.outbound.send_file(chat_id, attachment.path, filename=attachment.filename,
                                             mime=attachment.mime, caption=attachment.caption,
                                             thread_id=message.thread_id, reply_to=message.reply_to,
                                             idempotency_key=idempotency_key)

    async def file_limit(self, chat_id: str) -> int:
        # The homeserver says its upload limit (m.upload.size); one that does not say takes what it takes, and a
        # refusal then names its size and limit (outbound.too_big).
        limit = await self.media.upload_limit() if self.media is not None else None
        return limit if limit is not None else 1 << 40
