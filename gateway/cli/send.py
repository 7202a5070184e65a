"""``herald send TARGET TEXT [--file PATH]``: a message into a chat from the shell (scripts, monitoring hooks).

It goes through the database, not to the platform from here: the message is written to the ``outgoing`` table
(``queued``), and a running Herald connected to the target's platform claims it (one instance wins) and sends
it through the outbox under the same rules as the agent's messages (gateway/talk/outgoing.py) — exactly once,
also across a crash or a restart mid-send. Sending from this process instead would need a second connection
to the platform under the bot's credential lock, which the daemon holds, and could not be coordinated with
it; asking the daemon over HTTP would fail whenever it is down. So the message is safe either way: with Herald
running it is delivered within a second or two (this waits and says so), and with Herald stopped it is
delivered as soon as Herald starts. ``--key`` makes a retried call one message.
"""

from __future__ import annotations

import asyncio
import mimetypes
import shutil
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer

from gateway.cli.common import EXIT_FAILED, EXIT_USAGE, fail, load

WAIT_POLL = 0.2


def _kind(mime: str) -> str:
    major = mime.split("/", 1)[0]
    return {"image": "image", "audio": "audio", "video": "video"}.get(major, "document")


def _stage(path: str, media_dir: Path, max_mb: float) -> dict[str, Any]:
    """A copy of the file in the profile's media folder (the daemon reads it there, whatever happens to the
    original meanwhile), as the Attachment contract's fields. The agent's cap on a file sent
    (``media.max_send_mb``) holds here too: checked before anything is copied or queued, so a refused file
    leaves neither a row nor a stray copy behind."""
    src = Path(path).expanduser()
    if not src.is_file():
        fail(f"send: no such file: {path}", EXIT_USAGE)
    try:
        size = src.stat().st_size
    except OSError as exc:
        fail(f"send: {path} cannot be read ({exc.strerror or type(exc).__name__})", EXIT_USAGE)
    if size > max_mb * 1024 * 1024:
        fail(f"send: {path} is {size / 1048576:.1f} MB; Herald sends at most {max_mb:g} MB (media.max_send_mb)",
             EXIT_USAGE)
    folder = media_dir / "outgoing"
    folder.mkdir(parents=True, exist_ok=True)
    dest = folder / f"{uuid.uuid4().hex[:12]}-{src.name}"
    try:
        shutil.copyfile(src, dest)
    except OSError as exc:
        dest.unlink(missing_ok=True)
        fail(f"send: {path} cannot be read ({exc.strerror or type(exc).__name__})", EXIT_USAGE)
    mime = mimetypes.guess_type(src.name)[0] or "application/octet-stream"
    return {"path": str(dest.resolve()), "filename": src.name, "mime": mime, "kind": _kind(mime)}


def send(
    target: Annotated[str, typer.Argument(help="a platform (its home chat), or platform:chat_id[:thread_id]")],
    text: Annotated[str, typer.Argument(help="the message (markdown); '-' reads it from standard input")],
    file: Annotated[str | None, typer.Option("--file", "-f", help="a file to send after the text")] = None,
    key: Annotated[str | None, typer.Option("--key", help="an idempotency key: the same key is sent once")] = None,
    wait: Annotated[float, typer.Option("--wait", help="seconds to wait for the delivery (0: just queue it)")] = 30.0,
) -> None:
    """Send a message into a chat, exactly once, through the running Herald (queued until it runs)."""
    from gateway.platforms import PLATFORMS
    from gateway.talk.outgoing import TargetRefused, enabled_platforms, op_get, op_insert, resolve

    cfg, paths = load()
    if text == "-":
        text = typer.get_text_stream("stdin").read()
    if not text.strip() and file is None:
        fail("send: the text is empty", EXIT_USAGE)
    url = cfg.database.url
    if not url:
        paths.home.mkdir(parents=True, exist_ok=True)
        url = f"sqlite+aiosqlite:///{paths.db_file}"
    platforms = enabled_platforms(cfg)

    async def main() -> tuple[dict[str, Any], bool]:
        from gateway.cluster.instance import LEASE_SECONDS
        from gateway.storage.db import make_engine
        from gateway.storage.migrations import upgrade
        from gateway.storage.tables import instances

        engine = make_engine(url)
        try:
            async with engine.begin() as conn:
                await conn.run_sync(upgrade)

            async def read(op: Any) -> Any:
                async with engine.connect() as c:
                    return await c.run_sync(op)

            try:
                place = await resolve(target, cfg, read, platforms)
            except TargetRefused as exc:
                known = ", ".join(p for p in PLATFORMS if p in platforms) or "none enabled"
                fail(f"send: {exc} (platforms: {known})", EXIT_USAGE)
            attachment = _stage(file, paths.media_dir, cfg.media.max_send_mb) if file else None
            values = dict(key=key, via="cli", target=target, platform=place.platform, chat_id=place.chat_id,
                          thread_id=place.thread_id, text=text, attachment=attachment, status="queued",
                          created_at=time.time())
            async with engine.begin() as conn:
                row = await conn.run_sync(op_insert(values))
            beat = await read(lambda c: c.execute(instances.select().where(
                instances.c.heartbeat_at > time.time() - LEASE_SECONDS)).first())
            deadline = time.monotonic() + (wait if beat is not None else 0)
            while row["status"] in ("queued", "sending") and time.monotonic() < deadline:
                await asyncio.sleep(WAIT_POLL)
                row = await read(op_get(row["id"])) or row
            return row, beat is not None
        finally:
            await engine.dispose()

    row, running = asyncio.run(main())
    where = f"{row['platform']}:{row['chat_id']}" + (f" (thread {row['thread_id']})" if row["thread_id"] else "")
    if row["status"] == "sent":
        typer.echo(f"sent to {where} (message {row['id']})")
        return
    if row["status"] == "failed":
        fail(f"send: not delivered to {where}: {row['error']}", EXIT_FAILED)
    if wait <= 0:
        typer.echo(f"queued for {where} (message {row['id']})")
        return
    why = "Herald is not running" if not running else f"not delivered within {wait:g} s"
    fail(f"send: {why}; message {row['id']} stays queued and goes out to {where} once a Herald connected to "
         f"{row['platform']} takes it (sending again with the same --key will not repeat it)", EXIT_FAILED)
