"""Discord through discord.py: the adapter's lifecycle, the gateway's events, slash commands, button presses.

discord.py's ``Client`` keeps the gateway websocket (IDENTIFY, heartbeats, RESUME after a cut connection,
reconnecting with backoff) and the REST client with its rate limits; the adapter only reacts to its events:

- ``MESSAGE_CREATE``: taken in order per channel through ``ChannelLog`` (backfill.py), which also reads back
  what was posted while the bot was away, on every new gateway session. Discord does not redeliver, so there is
  no acknowledgement to send; the cursor of a channel moves only past messages the inbox holds.
- ``MESSAGE_UPDATE`` (``on_raw_message_edit``: cached or not): a person's edit, taken after what came before it
  in its channel; Discord does not send it again either.
- ``INTERACTION_CREATE``: a slash command or a button press. Discord wants an answer within 3 seconds and never
  sends an interaction twice, so it is acknowledged (deferred) at once, before anything else (building the
  message may ask Discord about a channel it did not tell us of) and before the inbox write: persisting first
  would buy nothing, and a slow database must not cost the window. The command's answer and the presser's
  notice follow through the interaction (interactions.py), ephemeral.

The adapter's state follows the gateway (``retrying`` while discord.py reconnects), which ``/readyz`` shows.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import aiohttp
import discord
import structlog

from gateway.kernel.configbase import secret
from gateway.platforms.base import (
    AdapterContext,
    Attachment,
    ButtonPress,
    Capabilities,
    CredentialRejected,
    FileUnavailable,
    InboundMessage,
    OutboundMessage,
    PlatformAdapter,
    ShuttingDown,
    TooBig,
    Unavailable,
    save_stream,
)
from gateway.platforms.discord.backfill import ChannelLog, Outcome
from gateway.platforms.discord.config import DiscordConfig
from gateway.platforms.discord.files import DiscordFiles
from gateway.platforms.discord.inbound import DiscordInbound
from gateway.platforms.discord.interactions import Interactions
from gateway.platforms.discord.outbound import ALLOWED_MENTIONS, DIALECT, MAX_CHARS, DiscordOutbound, render
from gateway.platforms.discord.transport import client_options, point_at

log = structlog.get_logger("herald.discord")

START_TIMEOUT = 60.0
_COMMAND_NAME = re.compile(r"[-_a-z0-9]{1,32}")
NOT_ALLOWED = "You are not allowed to use this bot here."
DOWNLOAD_TIMEOUT = 120.0
RESTARTING = "Herald is restarting; please try again in a moment."


def _duration(seconds: float) -> str:
    if seconds >= 86400 and seconds % 86400 == 0:
        return f"{seconds / 86400:g} day" + ("s" if seconds != 86400 else "")
    if seconds >= 3600:
        return f"{seconds / 3600:g} hour" + ("s" if seconds != 3600 else "")
    return f"{max(round(seconds / 60), 1)} minute" + ("s" if seconds >= 90 else "")


class InvalidToken(Exception):
    """The token was refused (named so that /readyz gives the operator its hint: check the token)."""


class _Client(discord.Client):
    """discord.py's client with its events handed to the adapter."""

    def __init__(self, adapter: DiscordAdapter, **options: Any) -> None:
        super().__init__(**options)
        self.herald = adapter

    async def on_connect(self) -> None:
        # Dispatched on READY, before any of the new session's messages: their read-back comes first.
        self.herald.channels.read_back_all()

    async def on_ready(self) -> None:
        self.herald.connected()

    async def on_resumed(self) -> None:
        self.herald.connected()

    async def on_disconnect(self) -> None:
        self.herald.disconnected()

    async def on_message(self, message: discord.Message) -> None:
        self.herald.channels.live(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        await self.herald.interaction(interaction)

    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        edited_at = payload.data.get("edited_timestamp")
        if edited_at:  # without it Discord only resolved an embed: nobody edited anything
            self.herald.channels.after(payload.channel_id, self.herald.edited(payload.message, str(edited_at)))


class DiscordAdapter(PlatformAdapter):
    name = "discord"
    capabilities = Capabilities(max_message_length=MAX_CHARS, dialect=DIALECT, buttons=True, edits=True,
                                threads=True, typing=True, min_edit_interval=1.0)
    prompt_hint = ("You are talking on Discord. Your Markdown is shown formatted (bold, italic, headings, lists, "
                   "quotes, code blocks, links); tables are not, so prefer lists. Long answers arrive as several "
                   "messages.")

    def __init__(self, ctx: AdapterContext) -> None:
        super().__init__(ctx)
        self.cfg: DiscordConfig = ctx.config
        self.client: discord.Client | None = None
        self.interactions = Interactions()
        self.inbound = DiscordInbound(self.name, self.cfg, self.gateway, ctx.media_dir, lambda: self.client)
        self.outbound = DiscordOutbound(lambda: self.client, self.interactions)
        self.files = DiscordFiles(lambda: self.client, render, ALLOWED_MENTIONS)
        self.channels = ChannelLog(self.name, ctx.cursors, self.cfg.backfill_max_age, self._process,
                                   lambda: self.client)
        self._runner: asyncio.Task[None] | None = None
        self._files_http: aiohttp.ClientSession | None = None  # attachments (no credential goes with them)

    # ---- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        token = secret(self.cfg.token_env)
        if not token:
            raise RuntimeError(f"platforms.discord is enabled but the bot token is not set: put it in the "
                               f"environment variable {self.cfg.token_env} (or $HERALD_HOME/.env)")
        point_at(self.cfg.api_base_url, self.cfg.gateway_url)
        self.channels = ChannelLog(self.name, self.ctx.cursors, self.cfg.backfill_max_age, self._process,
                                   lambda: self.client)
        await self.channels.start()
        client = _Client(self, **client_options())
        self.client = client
        try:
            await client.login(token)  # GET /users/@me
        except discord.LoginFailure as exc:
            raise InvalidToken(f"Discord refused the bot token in {self.cfg.token_env}") from exc
        assert client.user is not None
        self.inbound.bot_id = client.user.id
        await self._sync_commands(client)
        self._runner = runner = asyncio.create_task(client.connect(reconnect=True), name="discord:gateway")
        ready = asyncio.create_task(client.wait_until_ready())
        done, _ = await asyncio.wait({runner, ready}, timeout=START_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
        if ready not in done:
            ready.cancel()
            if runner.done():
                exc = runner.exception()
                raise exc if exc is not None else ConnectionError("the Discord gateway closed the connection")
            raise TimeoutError(f"the Discord gateway did not get ready within {START_TIMEOUT:.0f}s")
        log.info("discord_connected", bot=str(client.user), guilds=len(client.guilds),
                 channels_tracked=len(self.channels.cursors))

    async def stop(self) -> None:
        self.outbound.stop()
        await self.interactions.stop()
        client, self.client = self.client, None
        if client is not None:
            try:
                await client.close()
            except Exception as exc:
                log.debug("discord_close_failed", error=str(exc))
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
        await self.channels.stop()  # after the client: no new messages; cursors saved last
        files_http, self._files_http = self._files_http, None
        if files_http is not None:
            await files_http.close()

    @classmethod
    def credentials_of(cls, config: Any) -> list[tuple[str, str]]:
        token = secret(config.token_env)
        return [("discord", token)] if token else []

    @classmethod
    async def check_credentials(cls, config: Any, timeout: float) -> str | None:
        """GET users/@me with the bot token: 401 for a token Discord does not accept."""
        token = secret(config.token_env)
        if not token:
            return None
        import aiohttp

        base = (config.api_base_url or "https://discord.com/api/v10").rstrip("/")
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as http, \
                http.get(f"{base}/users/@me", headers={"Authorization": f"Bot {token}"}) as resp:
            body = await resp.json(content_type=None)
        if resp.status == 200 and isinstance(body, dict):
            return f"bot {body.get('username')} (id {body.get('id')})"
        said = body.get("message") if isinstance(body, dict) else None
        if resp.status in (401, 403):
            raise CredentialRejected(f"Discord refused the token: {said or 'Unauthorized'} (HTTP {resp.status})")
        raise ConnectionError(f"Discord answered HTTP {resp.status}: {said}")

    async def wait_closed(self) -> None:
        """discord.py reconnects by itself; its loop ends only on what it cannot fix (a revoked token, a missing
        privileged intent): then the supervisor restarts the adapter with backoff."""
        assert self._runner is not None
        await asyncio.shield(self._runner)
        raise ConnectionError("the Discord gateway connection closed")

    def connected(self) -> None:
        if self.client is not None and self.state != "connected":
            self.state, self.last_error = "connected", None
            log.info("discord_gateway_up")

    def disconnected(self) -> None:
        if self.client is not None and not self.client.is_closed() and self.state == "connected":
            self.state = "retrying"
            self.last_error = "ConnectionError: the gateway connection dropped; discord.py is reconnecting"
            log.warning("discord_gateway_down")

    async def _sync_commands(self, client: discord.Client) -> None:
        """The command registry as application commands: in ``guild_ids`` (shown at once) or globally."""
        menu = self.gateway.command_menu(self.name)
        self.inbound.command_names = frozenset(name for name, _ in menu)
        option = {"type": 3, "name": "args", "description": "what follows the command", "required": False}
        payload = [{"name": name, "description": (desc or name)[:100], "type": 1, "options": [option],
                    "contexts": [0, 1], "integration_types": [0]}
                   for name, desc in menu if _COMMAND_NAME.fullmatch(name)][:100]
        app = client.application_id
        try:
            assert app is not None
            if self.cfg.guild_ids:
                for guild in self.cfg.guild_ids:
                    await client.http.bulk_upsert_guild_commands(app, int(guild), payload)
                await client.http.bulk_upsert_global_commands(app, [])  # not listed twice
            else:
                await client.http.bulk_upsert_global_commands(app, payload)
        except Exception as exc:  # a menu is a nicety: never a reason not to connect
            log.warning("discord_commands_failed", error=f"{type(exc).__name__}: {exc}")

    # ---- inbound ---------------------------------------------------------------------------------

    async def _process(self, message: discord.Message) -> Outcome:
        if message.author.id == self.inbound.bot_id:
            return "own"
        try:
            msg = await self.inbound.normalise(message)
        except Exception as exc:
            # A bug in normalising one message must not wedge its channel.
            log.error("discord_message_failed", message_id=message.id, error=f"{type(exc).__name__}: {exc}")
            return "left"
        if msg is None:
            return "left"
        try:
            return "taken" if await self.accept(msg) else "left"
        except (ShuttingDown, Unavailable):
            return "failed"  # read back from the channel's history shortly (its sender told by accept)
        except Exception as exc:
            log.error("discord_accept_failed", message_id=message.id, error=f"{type(exc).__name__}: {exc}")
            return "failed"

    async def edited(self, message: discord.Message, edited_at: str) -> None:
        """An edit, after what came before it in its channel (its message's MESSAGE_CREATE first)."""
        if message.author.id == self.inbound.bot_id:
            return
        try:
            msg = await self.inbound.edit(message, edited_at)
            if msg is not None:
                await self.accept(msg)
        except Exception as exc:  # Discord never sends it again: logged, the channel goes on
            log.warning("discord_edit_failed", message_id=message.id, error=f"{type(exc).__name__}: {exc}")

    async def interaction(self, interaction: discord.Interaction) -> None:
        try:
            if interaction.type is discord.InteractionType.component:
                await self._pressed(interaction)
            elif interaction.type is discord.InteractionType.application_command:
                await self._command(interaction)
        except Exception:
            log.exception("discord_interaction_failed", interaction_id=interaction.id)

    async def _pressed(self, interaction: discord.Interaction) -> None:
        handle = self.interactions.handle(interaction)
        custom_id = str((interaction.data or {}).get("custom_id", ""))
        button_id = self.outbound.buttons.decode(custom_id) if custom_id else None
        if button_id is None:  # a digest from before a restart
            self.interactions.refuse(interaction, "This button is no longer active.")
            return
        # Acknowledged at once (the button stops spinning); the notice follows as an ephemeral message.
        self.interactions.defer(interaction, thinking=False, ephemeral=True)
        press = await self.inbound.press(interaction, handle)
        self.press(ButtonPress(press.source, button_id, press.message_id, handle))

    async def _command(self, interaction: discord.Interaction) -> None:
        handle = self.interactions.handle(interaction)
        # Deferred first: building the message may wait for Discord (a channel not in discord.py's cache).
        self.interactions.defer(interaction, thinking=True, ephemeral=True)
        msg = await self.inbound.command(interaction, handle)
        if not self.gateway.may_talk(msg.source):
            await self._say(msg, NOT_ALLOWED)  # replaces "thinking…", seen only by whoever sent it
            await self._accept_refused(msg)
            return
        try:
            await self.accept(msg)
        except ShuttingDown:
            await self._say(msg, RESTARTING)
        except Unavailable:
            pass  # told by accept, in place of "thinking…" (unavailable_notice)
        except Exception as exc:
            log.error("discord_accept_failed", interaction_id=interaction.id, error=f"{type(exc).__name__}: {exc}")
            await self._say(msg, f"That did not work ({type(exc).__name__}); please try again.")

    def unavailable_notice(self, msg: InboundMessage, reason: str) -> str | None:
        if msg.reply_handle is not None or self.cfg.backfill_max_age <= 0:  # nothing brings it back
            return f"Herald cannot take this right now ({reason}); please send it again in a moment."
        # A message is read back from its channel's history once the store takes it (backfill.py), as far back
        # as backfill_max_age.
        return (f"⚠️ Herald cannot take messages right now ({reason}). I'll read your message back and answer it "
                f"once this is fixed, if that is within {_duration(self.cfg.backfill_max_age)}; after that, please "
                "send it again.")

    async def _accept_refused(self, msg: InboundMessage) -> None:
        """Recorded as denied like any stranger's message (and a DM gets its pairing code)."""
        try:
            await self.accept(msg)
        except Exception as exc:
            log.info("discord_accept_failed", error=f"{type(exc).__name__}: {exc}")

    async def _say(self, msg: InboundMessage, text: str) -> None:
        out = OutboundMessage(text, thread_id=msg.source.thread_id, reply_handle=msg.reply_handle, ephemeral=True)
        try:
            await self.outbound.send(msg.source.chat_id, text, out)
        except Exception as exc:
            log.info("discord_notice_failed", error=str(exc))

    async def answer_press(self, press: ButtonPress, notice: str | None) -> bool:
        """The notice as an ephemeral follow-up only the presser sees; False (the gateway posts it into the chat)
        when the interaction is not known here or its acknowledgement failed."""
        live = self.interactions.get(press.reply_handle)
        if live is None or not await live.wait_acknowledged():
            return False
        if not notice:
            return True
        try:
            await live.interaction.followup.send(notice[:MAX_CHARS], ephemeral=True)
        except Exception as exc:
            log.info("discord_press_answer_failed", error=f"{type(exc).__name__}: {exc}")
            return False
        return True

    async def send_file(self, chat_id: str, attachment: Attachment, message: OutboundMessage,
                        idempotency_key: str | None = None) -> list[str]:
        return await self.files.send(chat_id, attachment, message, idempotency_key)

    async def file_limit(self, chat_id: str) -> int:
        return await self.files.limit(chat_id)

    async def download(self, msg: InboundMessage, ref: dict[str, Any], index: int) -> str:
        """An attachment from Discord's CDN, capped while it streams (the declared size may be wrong)."""
        cap_mb = self.cfg.max_media_mb
        cap = int(cap_mb * 1024 * 1024)
        if int(ref.get("size") or 0) > cap:
            raise TooBig(cap_mb)
        url = ref.get("url")
        if not url:
            raise FileUnavailable("Discord gave no link to download it from")
        if self._files_http is None or self._files_http.closed:
            self._files_http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT))
        # The attachment's id (or its index) keeps two files of one message apart when they share a name.
        target = self.media_path("dc", msg.source.thread_id or msg.source.chat_id, msg.platform_message_id,
                                 str(ref.get("id") or index), str(ref.get("name") or "file"))
        async with self._files_http.get(url) as resp:
            if resp.status != 200:
                raise FileUnavailable(f"Discord answered HTTP {resp.status}")
            await save_stream(resp.content.iter_chunked(65536), target, cap, cap_mb)
        return str(target)
