"""Matrix inbound: a room event (as the homeserver sent it, or as nio decrypted it) becomes an ``InboundMessage``, a
reaction on one of the bot's prompts a press, an invite a decision.

Which messages are for the bot: every message in a DM (a room of the bot and one person); in rooms a mention
(a pill, the ``m.mentions`` it carries, the bot's id or display name in the text), a reply to the bot, a
follow-up in a thread the bot posted in, or a known command (``!status``; ``/status`` too, where a client sends
it); with ``require_mention: false`` everything. A thread (an ``m.thread`` relation) is its own session, keyed
by its root event. A person's edit (``m.replace``) of a message the bot took is an ``InboundMessage`` with
``edit_of`` (the gateway decides what it does); an edit of anything else, notices (other bots) and the bot's own
events are not messages for it. Files are only listed here (``pending``) and downloaded after the sync token
passed them, before the turn, so only for people the gateway accepted. The platform message id is
``<room id>/<event id>``.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from gateway.platforms.base import ChatType, Gateway, InboundMessage, Source, file_ref, parse_text_command

if TYPE_CHECKING:
    from gateway.platforms.matrix.config import MatrixConfig

MESSAGE = "m.room.message"
REACTION = "m.reaction"
ENCRYPTED = "m.room.encrypted"
# msgtype -> what the agent is told the user sent, and the default name of its file
_FILES = {"m.image": ("photo", "image"), "m.file": ("document", "file"), "m.audio": ("audio file", "audio"),
          "m.video": ("video", "video")}
_TEXTS = frozenset({"m.text", "m.emote"})
_PILL = re.compile(r"""href=["']https://matrix\.to/#/([^"'?]+)""")


def relation(content: dict[str, Any]) -> dict[str, Any]:
    rel = content.get("m.relates_to")
    return rel if isinstance(rel, dict) else {}


def thread_of(content: dict[str, Any]) -> str | None:
    rel = relation(content)
    root = rel.get("event_id")
    return str(root) if rel.get("rel_type") == "m.thread" and isinstance(root, str) else None


def replied_to(content: dict[str, Any]) -> str | None:
    reply = relation(content).get("m.in_reply_to")
    event = reply.get("event_id") if isinstance(reply, dict) else None
    if not isinstance(event, str):
        return None
    # A thread's fallback reply only points at the thread's last event: it is not the user replying.
    return None if relation(content).get("is_falling_back") else event


class Recent:
    """A bounded set, oldest forgotten first."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._items: OrderedDict[Any, None] = OrderedDict()

    def add(self, item: Any) -> None:
        self._items[item] = None
        self._items.move_to_end(item)
        while len(self._items) > self.keep:
            self._items.popitem(last=False)

    def __contains__(self, item: Any) -> bool:
        return item in self._items


class MatrixInbound:
    def __init__(self, name: str, cfg: MatrixConfig, gateway: Gateway) -> None:
        self.name = name
        self.cfg = cfg
        self.gateway = gateway
        self.user_id = cfg.user_id or ""
        self.display_name = ""
        self.command_names: frozenset[str] = frozenset()
        self.own_events = Recent(20_000)  # the bot's events: a reply to one of them is addressed to it
        self.threads = Recent(20_000)  # (room, root) of the threads the bot posted in
        # (room, event) of the messages taken -> (sender, thread): an edit names only the event it replaces, and
        # only its sender may edit it. Forgotten with a restart: then only a DM's edits are heard (its one person's).
        self.taken: OrderedDict[tuple[str, str], tuple[str, str | None]] = OrderedDict()

    # ---- rooms -----------------------------------------------------------------------------------

    @staticmethod
    def chat_type(room: Any) -> ChatType:
        """A DM is a room of the bot and one other person (joined or invited); anything larger is a group."""
        return "dm" if room is not None and 0 < room.member_count <= 2 else "group"

    def user_name(self, room: Any, user: str) -> str:
        name = room.user_name(user) if room is not None else None
        return str(name or user)

    def saw_own(self, room_id: str, event: dict[str, Any]) -> None:
        """One of the bot's events came back in the sync (or was just sent): remember where it posted."""
        self.own_events.add(event.get("event_id"))
        root = thread_of(event.get("content") or {})
        if root:
            self.threads.add((room_id, root))

    # ---- messages --------------------------------------------------------------------------------

    def message(self, room_id: str, room: Any, event: dict[str, Any]) -> InboundMessage | None:
        content = event.get("content")
        sender, event_id = event.get("sender"), event.get("event_id")
        if event.get("type") != MESSAGE or not isinstance(content, dict) or not sender or not event_id:
            return None
        if sender == self.user_id:
            return None  # its own echo
        if relation(content).get("rel_type") == "m.replace":
            return self.edit(room_id, room, event, content)
        msgtype = content.get("msgtype")
        body = content.get("body") if isinstance(content.get("body"), str) else ""
        if replied_to(content):
            body = strip_reply_fallback(body)
        thread = thread_of(content)
        chat_type = self.chat_type(room)
        pending: dict[str, Any] | None = None
        note = None
        if msgtype in _FILES:
            ref = self._file(content, msgtype)
            pending = {"files": [ref]} if ref is not None else None
            named = content.get("filename") and content.get("filename") != body
            body = body if named else ""  # the body is a caption only when a filename is given besides
        elif msgtype not in _TEXTS:
            if msgtype == "m.notice" or not body:
                return None  # another bot's notice, or nothing to say
            note = f"[The user sent a {str(msgtype).removeprefix('m.')} message, which I can't open here: {body}]"
        text = body.strip()
        addressed, text = self._addressed(room_id, chat_type, thread, content, text)
        if not addressed:
            return None
        if msgtype == "m.emote" and text:
            text = f"* {self.user_name(room, sender)} {text}"
        if note:
            text = note
        if not text and pending is None:
            return None
        parsed = parse_text_command(text, prefix="!") or parse_text_command(text)
        reply = replied_to(content)
        source = Source(platform=self.name, chat_id=room_id, user_id=sender, chat_type=chat_type, thread_id=thread,
                        user_name=self.user_name(room, sender))
        self.taken[(room_id, event_id)] = (sender, thread)
        while len(self.taken) > 20_000:
            self.taken.popitem(last=False)
        return InboundMessage(source=source, text=text, platform_message_id=f"{room_id}/{event_id}",
                              reply_to=f"{room_id}/{reply}" if reply else None, received_at=time.time(),
                              command=parsed[0] if parsed is not None else None, pending=pending)

    def edit(self, room_id: str, room: Any, event: dict[str, Any], content: dict[str, Any]) -> InboundMessage | None:
        """A person's edit of a message the bot took, by that message's sender: its new text, under the edit's own
        event id (each edit once, however often the sync hands it out). An edited command is not run again."""
        original, new = relation(content).get("event_id"), content.get("m.new_content")
        if not isinstance(original, str) or not isinstance(new, dict) or new.get("msgtype") not in _TEXTS:
            return None
        chat_type = self.chat_type(room)
        taken = self.taken.get((room_id, original))
        if taken is None and chat_type == "dm":
            taken = (event["sender"], None)  # taken before a restart: in a DM, everything its one person says is
        if taken is None or taken[0] != event["sender"]:
            return None
        body = new.get("body") if isinstance(new.get("body"), str) else ""
        _, text = self._mentions(new, body.strip())
        if not text.strip():
            return None
        sender, thread = taken
        source = Source(platform=self.name, chat_id=room_id, user_id=sender, chat_type=chat_type, thread_id=thread,
                        user_name=self.user_name(room, sender))
        return InboundMessage(source=source, text=text.strip(), platform_message_id=f"{room_id}/{event['event_id']}",
                              received_at=time.time(), edit_of=f"{room_id}/{original}")

    def _addressed(self, room_id: str, chat_type: ChatType, thread: str | None, content: dict[str, Any],
                   text: str) -> tuple[bool, str]:
        """(whether the message is for the bot, its text without a leading mention of the bot)."""
        mentioned, stripped = self._mentions(content, text)
        if chat_type == "dm" or mentioned or not self.cfg.require_mention:
            return True, stripped
        parsed = parse_text_command(stripped, prefix="!") or parse_text_command(stripped)
        if parsed is not None and parsed[0].name in self.command_names:
            return True, stripped
        if thread is not None and (room_id, thread) in self.threads:
            return True, stripped
        return replied_to(content) in self.own_events, stripped

    def _mentions(self, content: dict[str, Any], text: str) -> tuple[bool, str]:
        me = self.user_id
        mentions = content.get("m.mentions")
        users = mentions.get("user_ids") if isinstance(mentions, dict) else None
        html = content.get("formatted_body") if isinstance(content.get("formatted_body"), str) else ""
        pills = {unquote(target) for target in _PILL.findall(html)}
        names = [n for n in (me, self.display_name, me[1:].partition(":")[0]) if n]
        said = [n for n in names if re.search(rf"(?<![\w@]){re.escape(n)}(?![\w])", text, re.I)]
        mentioned = bool((isinstance(users, list) and me in users) or me in pills or said)
        for name in sorted(said, key=len, reverse=True):
            lead = re.match(rf"\s*@?{re.escape(name)}(?!\w)[\s:,]*", text, re.I)
            if lead:
                return mentioned, text[lead.end():]
        return mentioned, text

    def _file(self, content: dict[str, Any], msgtype: str) -> dict[str, Any] | None:
        encrypted = content.get("file") if isinstance(content.get("file"), dict) else None
        mxc = (encrypted or {}).get("url") or content.get("url")
        if not isinstance(mxc, str):
            return None
        info = content.get("info") if isinstance(content.get("info"), dict) else {}
        kind, default = _FILES[msgtype]
        if msgtype == "m.audio" and ("org.matrix.msc3245.voice" in content or "m.voice" in content):
            kind, default = "voice note", "voice.ogg"
        name = content.get("filename") or content.get("body") or default
        size = info.get("size") if isinstance(info.get("size"), int) else None
        return file_ref(str(name)[:200], kind, size, mxc=mxc, encrypted=encrypted, mime=info.get("mimetype"))

    # ---- reactions and invites -------------------------------------------------------------------

    def reaction(self, room_id: str, room: Any, event: dict[str, Any]) -> tuple[str, str, Source] | None:
        """(the event reacted to, the reaction's key, who reacted) for someone else's reaction."""
        content = event.get("content")
        sender = event.get("sender")
        if event.get("type") != REACTION or not isinstance(content, dict) or not sender or sender == self.user_id:
            return None
        rel = relation(content)
        target, key = rel.get("event_id"), rel.get("key")
        if rel.get("rel_type") != "m.annotation" or not isinstance(target, str) or not isinstance(key, str):
            return None
        source = Source(platform=self.name, chat_id=room_id, user_id=sender, chat_type=self.chat_type(room),
                        user_name=self.user_name(room, sender))
        return target, key, source

    def invite(self, room_id: str, events: list[dict[str, Any]]) -> Source | None:
        """Who invited the bot (as a sender in the room it would join), from the invite's stripped state."""
        for event in events:
            content = event.get("content") if isinstance(event.get("content"), dict) else {}
            if event.get("type") == "m.room.member" and event.get("state_key") == self.user_id \
                    and content.get("membership") == "invite" and isinstance(event.get("sender"), str):
                return Source(platform=self.name, chat_id=room_id, user_id=event["sender"],
                              chat_type="dm" if content.get("is_direct") else "group")
        return None


def strip_reply_fallback(body: str) -> str:
    """A reply's quoted fallback (``> <@alice:x> what was said`` lines, then a blank line) is not the user's."""
    if not body.startswith("> "):
        return body
    lines = body.split("\n")
    index = 0
    while index < len(lines) and lines[index].startswith(">"):
        index += 1
    return "\n".join(lines[index:]).lstrip("\n")
