"""Albums: several pictures sent together arrive on some platforms as one message each (a Telegram media
group), yet are one thing said. The adapter marks each part with ``pending["album"]`` (the group's id); the
lane, taking the first part, gathers the others from its queue as they come — until none has come for
``QUIET`` seconds (at most ``MOST``) — and runs one turn with every file. The merge is stored before the
turn: the first part's row carries all files and the others are done, in one transaction.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from gateway.platforms.base import Accepted
from gateway.storage.store import Store

QUIET = 1.0  # seconds since the newest part after which the album is taken as whole
MOST = 5.0  # seconds at most that a first part waits for the rest
POLL = 0.05


async def gather(queue: deque[Accepted], first: Accepted, store: Store, stopping: Callable[[], bool]) -> int:
    """Take ``first``'s album siblings out of ``queue`` into ``first``; how many joined it."""
    album = (first.msg.pending or {}).get("album")
    newest = first.msg.received_at or time.time()
    give_up = time.time() + MOST
    parts: list[Accepted] = []
    while True:
        for item in list(queue):
            if (item.msg.pending or {}).get("album") == album and item.inbox_id != first.inbox_id:
                queue.remove(item)
                parts.append(item)
                newest = max(newest, item.msg.received_at or 0.0)
        if stopping() or time.time() >= min(newest + QUIET, give_up):
            break
        await asyncio.sleep(POLL)
    if not parts:
        return 0
    parts.sort(key=lambda item: item.inbox_id or 0)
    msg = first.msg
    files: list[Any] = list((msg.pending or {}).get("files") or [])
    texts = [msg.text] if msg.text.strip() else []
    for part in parts:
        files += list((part.msg.pending or {}).get("files") or [])
        if part.msg.text.strip():
            texts.append(part.msg.text)
    msg.pending = {**(msg.pending or {}), "files": files}
    msg.text = "\n".join(texts)
    if first.inbox_id is not None:
        await store.inbox.merge(first.inbox_id, msg.to_dict(), [p.inbox_id for p in parts if p.inbox_id is not None])
    return len(parts)
