"""GatewayRunner: owns the adapters, sessions, the turn executor, delivery and the http app.

The event loop only routes: SDK callbacks normalise and enqueue, agent turns run in a bounded thread pool,
and threads reach the loop only through thread-safe calls. Each session key has a lane: a FIFO of accepted
messages and at most one running turn.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import random
import re
import threading
import time
import uuid
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import structlog

from cron.commands import register_cron_commands  # also defines the cron tables before Store.init
from gateway import access, sandboxing
from gateway.approvals import ApprovalBroker  # also defines its tables before Store.init
from gateway.builtin_commands import register_builtin_commands
from gateway.commands import CommandContext, CommandRegistry, ParsedCommand, parse_command
from gateway.config import Config, Paths, secret, secret_env_names
from gateway.db import Store
from gateway.delivery import Delivery
from gateway.locks import CredentialLocked, CredentialLocks
from gateway.pairing import PairingService  # also defines its tables before Store.init
from gateway.platforms import PLATFORMS, adapter_class
from gateway.platforms.base import ButtonPress, InboundMessage, OutboundMessage, PlatformAdapter, Source
from gateway.session.keys import session_key
from gateway.session.manager import SessionManager

log = structlog.get_logger("herald.runner")

_SECRET_NAME = re.compile(r"(TOKEN|API_KEY|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.I)

NO_MODEL_TEXT = (
    "No model is configured yet: set model.base_url, model.name and model.api_key_env in "
    "config.yaml (any OpenAI-compatible endpoint), then restart Herald."
)


@dataclass(slots=True)
class Accepted:
    """A message that passed the inbox: persisted, not a duplicate."""

    inbox_id: int
    msg: InboundMessage
    key: str
    command: ParsedCommand | None = None
    resume_reply: str | None = None  # recovered after a restart: the answer exists, only delivery is left
    queued_ms: float | None = None  # receipt -> turn start, for the turn's one info-level log line


@dataclass(eq=False)
class Turn:
    id: str
    key: str
    item: Accepted
    interrupt: threading.Event
    abandoned: asyncio.Future[str]
    started: float
    last_activity: float
    last_step: str = "starting"

    def abandon(self, reason: str) -> bool:
        self.interrupt.set()
        if self.abandoned.done():
            return False
        self.abandoned.set_result(reason)
        return True


@dataclass(eq=False)
class Lane:
    key: str
    queue: deque[Accepted] = field(default_factory=deque)
    turn: Turn | None = None
    task: asyncio.Task[None] | None = None


class ShuttingDown(Exception):
    """New messages are refused while the daemon drains."""


class GatewayRunner:
    lock_retry_seconds = 3.0  # most time between retries while another process holds a credential

    def __init__(self, cfg: Config, paths: Paths, extra_adapters: list[Any] | None = None) -> None:
        """``extra_adapters``: factories of adapters beyond the configured platforms (test channels)."""
        self.cfg = cfg
        self._extra_adapters = list(extra_adapters or [])
        self.paths = paths
        self.store = Store(cfg.database.url or f"sqlite+aiosqlite:///{paths.db_file}")
        self.delivery = Delivery(self.store)
        self.commands = CommandRegistry()
        register_builtin_commands(self.commands)
        self.adapters: dict[str, PlatformAdapter] = {}
        self.lanes: dict[str, Lane] = {}
        self.pool = ThreadPoolExecutor(max_workers=cfg.gateway.max_concurrent_turns, thread_name_prefix="turn")
        self.sessions = SessionManager(self.store, cfg.sessions, self._system_prompt)
        self.started_at = time.time()
        self.stopping = False
        self.stop_event = asyncio.Event()
        self.loop_lag: deque[float] = deque(maxlen=1200)  # the last minute of 50 ms probes
        self.counters: dict[str, int] = {
            "messages_accepted": 0, "messages_duplicate": 0, "messages_denied": 0, "turns_started": 0,
            "turns_ok": 0, "turns_failed": 0, "turns_interrupted": 0, "turns_timed_out": 0, "queue_rejected": 0,
        }
        self._tasks: set[asyncio.Task[Any]] = set()
        # Button id prefix -> handler; features that send buttons (approvals, ...) register here.
        self.button_handlers: dict[str, Any] = {}
        self.approvals = ApprovalBroker(self)  # registers the "ap" buttons and /approve, /deny
        self.access = access.AccessControl(cfg)
        self.pairing = PairingService(self)  # registers /pair
        self.locks = CredentialLocks(self.store.url, paths.profile)
        register_cron_commands(self.commands)
        self.cron: Any = None  # cron.scheduler.CronScheduler once started (cron.enabled)
        # Extra ToolContext.extras for every turn, filled by features the tools reach (cron: "cron_api").
        # Not "cron": that key marks a cron turn, whose dangerous commands follow approvals.cron_mode.
        self.tool_extras: dict[str, Any] = {}
        self._model_agents: dict[str, Any] = {}
        self._http: Any = None
        self._agent: Any = None
        self._tool_names: list[str] = []
        self._secret_env_names: list[str] = []
        self.sandbox: Any = None  # tools.sandbox.SandboxPolicy, set in start()
        self.warnings: list[str] = []  # start-up warnings /readyz repeats (sandbox: none, no bubblewrap)
        self._prompt_cache: dict[str, str] = {}
        self.loop: asyncio.AbstractEventLoop | None = None

    # ---- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.sandbox, self.warnings = sandboxing.setup(self.cfg, self.paths)
        if self.cfg.database.url is None:
            self.paths.home.mkdir(parents=True, exist_ok=True)
        await self.store.init()
        await self.pairing.start()
        self._agent = self._build_agent()
        for name in PLATFORMS:
            platform_cfg = getattr(self.cfg.platforms, name, None)
            if platform_cfg is not None and platform_cfg.enabled:
                self.adapters[name] = adapter_class(name)(self)
        for factory in self._extra_adapters:
            adapter = factory(self)
            self.adapters[adapter.name] = adapter
        await self.approvals.start()  # approvals left pending by the last run: denied; users told once connected
        # Read what the last run left unfinished before anything can accept a new message: a message taken
        # after this snapshot must not be picked up a second time by the recovery below.
        unfinished = await self.store.inbox_unfinished()
        from gateway.http import HttpServer

        self._http = HttpServer(self)
        await self._http.start()
        for adapter in self.adapters.values():
            self._spawn(self._supervise(adapter), name=f"adapter:{adapter.name}")
        self._spawn(self._watchdog(), name="watchdog")
        self._spawn(self._measure_loop_lag(), name="loop-lag")
        await self._recover(unfinished)
        if self.cfg.cron.enabled:
            from cron.scheduler import CronScheduler

            self.cron = CronScheduler(self)
            await self.cron.start()
        log.info("gateway_started", adapters=list(self.adapters), http=f"{self.cfg.http.host}:{self.http_port}",
                 model=self.cfg.model.name or None)

    @property
    def http_port(self) -> int:
        return self._http.port if self._http else self.cfg.http.port

    async def shutdown(self) -> None:
        """Stop taking messages, let running turns finish (up to drain_seconds), tell whoever was cut."""
        if self.stopping:
            return
        self.stopping = True
        if self.cron is not None:
            await self.cron.stop()
        log.info("gateway_draining", running=sum(1 for lane in self.lanes.values() if lane.turn))
        drains = [lane.task for lane in self.lanes.values() if lane.task]
        if drains:
            _, pending = await asyncio.wait(drains, timeout=self.cfg.gateway.drain_seconds)
            for lane in self.lanes.values():
                if lane.turn is not None:
                    lane.turn.abandon("shutdown")
            if pending:
                await asyncio.wait(pending, timeout=10)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for adapter in self.adapters.values():
            try:
                await asyncio.wait_for(adapter.stop(), timeout=10)
            except Exception as exc:
                log.warning("adapter_stop_failed", platform=adapter.name, error=str(exc))
            await self.locks.release(adapter.name)
        if self._http:
            await self._http.stop()
        self.pool.shutdown(wait=False, cancel_futures=True)
        await self.store.close()
        log.info("gateway_stopped")

    def _spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _supervise(self, adapter: PlatformAdapter) -> None:
        """Keep one adapter up: restart it with backoff while the others keep running."""
        delay = 1.0
        while not self.stopping:
            adapter.state = "starting"
            try:
                # Its credentials' locks first: a second process driving the same bot would steal its updates.
                await self.locks.acquire(adapter.name, adapter.credentials())
                await adapter.start()
                adapter.state, adapter.last_error, delay = "connected", None, 1.0
                log.info("adapter_connected", platform=adapter.name)
                await self.locks.watch(adapter.name, adapter.wait_closed())
                raise ConnectionError("connection closed")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self.stopping:
                    return
                locked = isinstance(exc, CredentialLocked)
                adapter.state = "retrying"
                adapter.last_error = str(exc) if locked else f"{type(exc).__name__}: {exc}"
                if locked:
                    # Retry soon: the holder may stop any moment, and this adapter should take over then.
                    delay = min(delay, self.lock_retry_seconds)
                log.warning("adapter_down", platform=adapter.name, error=adapter.last_error, retry_in=round(delay, 1))
                try:
                    await asyncio.wait_for(adapter.stop(), timeout=10)
                except Exception:
                    pass
                await self.locks.release(adapter.name)
                await asyncio.sleep(delay * (0.8 + random.random() * 0.4))
                delay = min(delay * 2, self.lock_retry_seconds if locked else 300.0)

    # ---- agent -----------------------------------------------------------------------------------

    def _build_agent(self) -> Any:
        if not self.cfg.model.configured:
            log.warning("model_not_configured", hint="set model.base_url and model.name in config.yaml")
            return None
        from agent_core.agent import Agent
        from agent_core.llm import Endpoint, LLMClient
        from tools.registry import load_builtin_tools, registry

        load_builtin_tools()
        m = self.cfg.model
        endpoints = [Endpoint(base_url=m.base_url or "", model=m.name or "", api_key=secret(m.api_key_env))]
        endpoints += [Endpoint(base_url=f.base_url, model=f.name, api_key=secret(f.api_key_env)) for f in m.fallbacks]
        llm = LLMClient(endpoints, timeout=m.timeout_seconds, max_retries=m.max_retries,
                        temperature=m.temperature, max_tokens=m.max_tokens)
        self._tool_names = registry.names(self.cfg.tools)
        # Secret values approval prompts mask (commands get an allowlisted environment: tools/sandbox.py).
        named = set(secret_env_names(self.cfg))
        self._secret_env_names = sorted(named | {n for n in os.environ if _SECRET_NAME.search(n)})
        return Agent(llm, registry, self._tool_names, max_iterations=m.max_iterations)

    def _system_prompt(self, platform: str) -> str:
        prompt = self._prompt_cache.get(platform)
        if prompt is None:
            from agent_core.prompt import build_system_prompt

            adapter = self.adapters.get(platform)
            prompt = build_system_prompt(self.cfg.agent.identity, adapter.prompt_hint if adapter else None)
            self._prompt_cache[platform] = prompt
        return prompt

    # ---- inbound ---------------------------------------------------------------------------------

    def key_for(self, source: Source) -> str:
        return session_key(source, self.cfg.sessions.per_user_in_groups)

    async def ingest(self, adapter: PlatformAdapter, msg: InboundMessage) -> Accepted | None:
        """Persist + de-duplicate; ``None`` for a duplicate or a sender who may not talk to the agent."""
        if self.stopping:
            raise ShuttingDown()
        if not msg.received_at:
            msg.received_at = time.time()
        key = self.key_for(msg.source)
        inbox_id = await self.store.inbox_add(adapter.name, msg.platform_message_id, key, msg.to_dict())
        if inbox_id is None:
            self.counters["messages_duplicate"] += 1
            log.info("duplicate_dropped", platform=adapter.name, platform_message_id=msg.platform_message_id)
            return None
        if not self.access.allowed(msg.source, getattr(adapter, "trusted", False)):
            self.counters["messages_denied"] += 1
            await self.store.inbox_set(inbox_id, "denied")
            log.info("sender_denied", platform=adapter.name, user_id=msg.source.user_id)
            self.pairing.denied(adapter, msg.source)
            return None
        self.counters["messages_accepted"] += 1
        parsed = parse_command(msg.text)
        if parsed is not None and self.commands.lookup(parsed.name) is None:
            parsed = ParsedCommand("__unknown__", parsed.name)
        return Accepted(inbox_id, msg, key, parsed)

    async def submit(self, adapter: PlatformAdapter, item: Accepted, notify: bool = True) -> None:
        lane = self.lanes.get(item.key)
        if lane is None:
            lane = self.lanes[item.key] = Lane(item.key)
        busy = lane.turn is not None or bool(lane.queue) or lane.task is not None
        if busy and len(lane.queue) >= self.cfg.gateway.max_queue:
            self.counters["queue_rejected"] += 1
            await self.store.inbox_set(item.inbox_id, "rejected", error="queue full")
            await self.notify(adapter, item.msg.source,
                              f"⚠️ {len(lane.queue)} messages are already waiting, so I did not take this one. "
                              "Send it again once I have caught up (/queue shows the waiting ones).")
            return
        lane.queue.append(item)
        if busy and notify:
            if self.cfg.gateway.busy_mode == "interrupt" and lane.turn is not None:
                if lane.turn.abandon("superseded"):
                    await self.notify(adapter, item.msg.source,
                                      "⏹ Stopped the previous turn to answer your new message.")
            elif lane.turn is not None:
                await self.notify(adapter, item.msg.source,
                                  f"⏳ Queued ({len(lane.queue)} waiting) — I'll answer after the current reply.")
        if lane.task is None:
            lane.task = asyncio.create_task(self._drain(lane), name=f"lane:{lane.key}")

    async def run_command(self, adapter: PlatformAdapter, item: Accepted) -> None:
        assert item.command is not None
        source = item.msg.source
        structlog.contextvars.bind_contextvars(session_key=item.key, platform=adapter.name)
        try:
            if item.command.name == "__unknown__":
                reply: str | None = f"Unknown command /{item.command.args}. /help lists the commands."
            else:
                command = self.commands.lookup(item.command.name)
                assert command is not None
                if not command.available_on(adapter.name):
                    reply = f"/{command.name} is not available here."
                elif command.admin_only and not self.access.admin(source, getattr(adapter, "trusted", False)):
                    reply = f"/{command.name} is for admins only."
                else:
                    ctx = CommandContext(self, adapter, item.msg, item.key, item.command.args)
                    reply = await command.handler(ctx)
            await self.store.inbox_set(item.inbox_id, "done")
            if reply:
                await self.notify(adapter, source, reply)
        except Exception as exc:
            log.exception("command_failed", command=item.command.name)
            await self.store.inbox_set(item.inbox_id, "failed", error=str(exc))
            await self.notify(adapter, source,
                              f"/{item.command.name} failed: {type(exc).__name__}. Details are in the log.")
        finally:
            structlog.contextvars.unbind_contextvars("session_key", "platform")

    async def button_pressed(self, adapter: PlatformAdapter, press: ButtonPress) -> str | None:
        if not self.access.allowed(press.source, getattr(adapter, "trusted", False)):
            log.info("button_denied", platform=adapter.name, user_id=press.source.user_id)
            return "You are not allowed to use this bot."
        handler = self.button_handlers.get(press.button_id.split(":", 1)[0])
        if handler is None:
            return "This button is no longer active."
        return await handler(adapter, press)

    async def notify(self, adapter: PlatformAdapter, source: Source, text: str) -> None:
        """A short gateway notice into a chat (not a model reply); failures are logged, never raised."""
        try:
            await self.delivery.deliver(adapter, source.chat_id, OutboundMessage(text, thread_id=source.thread_id))
        except Exception as exc:
            log.warning("notice_failed", platform=adapter.name, chat_id=source.chat_id, error=str(exc))

    # ---- turns -----------------------------------------------------------------------------------

    async def _drain(self, lane: Lane) -> None:
        try:
            while lane.queue and not self.stopping:
                item = lane.queue.popleft()
                try:
                    await self._run_turn(lane, item)
                except Exception:
                    log.exception("turn_crashed", session_key=lane.key)
                    await self.store.inbox_set(item.inbox_id, "failed", error="internal error")
        finally:
            lane.task = None
            if not lane.queue and lane.turn is None and self.lanes.get(lane.key) is lane:
                del self.lanes[lane.key]

    async def _run_turn(self, lane: Lane, item: Accepted) -> None:
        msg = item.msg
        source = msg.source
        adapter = self.adapters.get(source.platform)
        if adapter is None:
            await self.store.inbox_set(item.inbox_id, "failed", error=f"platform {source.platform} is not enabled")
            return
        turn_id = uuid.uuid4().hex[:12]
        structlog.contextvars.bind_contextvars(session_key=lane.key, platform=source.platform, turn_id=turn_id)
        try:
            if item.resume_reply is not None:
                await self._deliver_reply(adapter, item, item.resume_reply)
                return
            if self._agent is None:
                await self.store.inbox_set(item.inbox_id, "replied", reply=NO_MODEL_TEXT)
                await self._deliver_reply(adapter, item, NO_MODEL_TEXT)
                return
            # The turn exists (and /stop can reach it) before the first await.
            now = time.monotonic()
            loop = asyncio.get_running_loop()
            turn = Turn(turn_id, lane.key, item, threading.Event(), loop.create_future(), now, now)
            lane.turn = turn
            try:
                session = await self.sessions.get(lane.key, source.platform)
                history = await self.store.session_history(session["id"], self.cfg.agent.max_history_messages)
            except BaseException:
                lane.turn = None
                raise
            user_msg = {"role": "user", "content": self._user_content(msg)}
            if turn.abandoned.done():
                lane.turn = None
                await self._turn_abandoned(adapter, item, session, user_msg, turn.abandoned.result())
                return
            self.counters["turns_started"] += 1
            item.queued_ms = round((time.time() - msg.received_at) * 1000, 2)
            log.debug("turn_started", queued_ms=item.queued_ms)
            typing = None
            if adapter.capabilities.typing:
                typing = asyncio.create_task(self._keep_typing(adapter, source, turn))
            ctx = contextvars.copy_context()
            future = loop.run_in_executor(self.pool, ctx.run, self._call_agent, session, history, user_msg, turn)
            try:
                await asyncio.wait({future, turn.abandoned}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if typing:
                    typing.cancel()
                lane.turn = None
            if turn.abandoned.done() and not future.done():
                future.add_done_callback(_swallow)
                await self._turn_abandoned(adapter, item, session, user_msg, turn.abandoned.result())
                return
            turn.abandon("finished")
            try:
                result = future.result()
            except Exception as exc:
                log.exception("agent_crashed")
                self.counters["turns_failed"] += 1
                await self.store.append_messages(session["id"], [user_msg], item.inbox_id, "failed")
                await self.notify(adapter, source, f"⚠️ Something went wrong on my side ({type(exc).__name__}). "
                                                   "Details are in the log; please try again.")
                return
            await self._finish_turn(adapter, item, session, user_msg, result)
        finally:
            structlog.contextvars.unbind_contextvars("session_key", "platform", "turn_id")

    def _call_agent(self, session: dict[str, Any], history: list[dict[str, Any]], user_msg: dict[str, Any],
                    turn: Turn) -> Any:
        """Runs in a worker thread: the synchronous agent loop, told to stop through ``turn.interrupt``."""
        from agent_core.agent import TurnCallbacks

        def on_activity(step: str) -> None:
            turn.last_activity = time.monotonic()
            turn.last_step = step

        source = turn.item.msg.source
        ctx = self._tool_context(turn.key, turn.interrupt, self.approvals.hook_for(turn.key, source, turn.id),
                                 source=source, **self.tool_extras)
        return self._agent.run(session["system_prompt"] or "", history, user_msg["content"], turn.interrupt,
                               TurnCallbacks(on_activity=on_activity), ctx)

    def _tool_context(self, key: str, interrupt: threading.Event, approve: Any, **extras: Any) -> Any:
        from tools.registry import ToolContext

        return ToolContext(session_key=key, cwd=str(self.sandbox.workspace), interrupt=interrupt,
                           config=self.cfg.tools, extras={"approve": approve, **extras}, sandbox=self.sandbox)

    def _agent_for(self, model: str | None) -> Any:
        """The agent, or one that calls ``model`` on the primary endpoint (a cron job's model override)."""
        if not model or model == self.cfg.model.name or self._agent is None:
            return self._agent
        agent = self._model_agents.get(model)
        if agent is None:
            from agent_core.agent import Agent
            from agent_core.llm import Endpoint, LLMClient

            m = self.cfg.model
            llm = LLMClient([Endpoint(base_url=m.base_url or "", model=model, api_key=secret(m.api_key_env))],
                            timeout=m.timeout_seconds, max_retries=m.max_retries, temperature=m.temperature,
                            max_tokens=m.max_tokens)
            agent = self._model_agents[model] = Agent(llm, self._agent.registry, self._tool_names,
                                                      max_iterations=m.max_iterations)
        return agent

    async def run_detached_turn(self, key: str, content: str, timeout: float, *, model: str | None = None,
                                extras: dict[str, Any] | None = None) -> Any:
        """One agent turn in a fresh session of its own (cron), in the turn pool, under a hard wall-clock limit.

        Dangerous commands follow ``approvals.cron_mode`` (nobody is asked). Raises ``TimeoutError`` when
        the limit passes: the thread is told to stop and its late result is dropped.
        """
        from agent_core.agent import TurnCallbacks

        agent = self._agent_for(model)
        if agent is None:
            raise RuntimeError("no model is configured (model.base_url and model.name in config.yaml)")
        session = await self.store.session_create(str(uuid.uuid4()), key, "cron", self._system_prompt("cron"))
        interrupt = threading.Event()
        ctx = self._tool_context(key, interrupt, self.approvals.hook_for(key, None),
                                 **{**self.tool_extras, **(extras or {}), "cron": True})
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self.pool, contextvars.copy_context().run, agent.run,
                                      session["system_prompt"] or "", [], content, interrupt, TurnCallbacks(), ctx)
        try:
            done, _ = await asyncio.wait({future}, timeout=timeout)
        except asyncio.CancelledError:  # the caller's own limit, or shutdown: the thread must stop too
            interrupt.set()
            future.add_done_callback(_swallow)
            raise
        if not done:
            interrupt.set()
            future.add_done_callback(_swallow)
            await self.store.append_messages(session["id"], [{"role": "user", "content": content}])
            raise TimeoutError(f"no answer within {_duration(timeout)}")
        result = future.result()
        to_store = [{"role": "user", "content": content}]
        if getattr(result, "status", "ok") == "ok":
            to_store += result.messages
        await self.store.append_messages(session["id"], to_store)
        return result

    async def _finish_turn(self, adapter: PlatformAdapter, item: Accepted, session: dict[str, Any],
                           user_msg: dict[str, Any], result: Any) -> None:
        status = getattr(result, "status", "ok")
        if status == "ok":
            self.counters["turns_ok"] += 1
            to_store = [user_msg, *result.messages]
        else:
            # A failed or interrupted turn keeps the question but not a half-finished tool exchange.
            self.counters["turns_failed" if status == "error" else "turns_interrupted"] += 1
            to_store = [user_msg]
            log.warning("turn_not_ok", status=status, error_kind=getattr(result, "error_kind", None))
        text = result.text or "(no answer)"
        await self.store.append_messages(session["id"], to_store, item.inbox_id, "replied", reply=text)
        self.sessions.touch(item.key)
        await self._deliver_reply(adapter, item, text)

    async def _deliver_reply(self, adapter: PlatformAdapter, item: Accepted, text: str) -> None:
        source = item.msg.source
        out = OutboundMessage(text=text, reply_to=item.msg.platform_message_id, thread_id=source.thread_id)
        report = await self.delivery.deliver(adapter, source.chat_id, out, item.inbox_id,
                                             resume=item.resume_reply is not None, finish_inbox=True)
        log.info("turn_delivered", chunks=len(report.message_ids), failed=report.failed, queued_ms=item.queued_ms,
                 total_ms=round((time.time() - item.msg.received_at) * 1000, 2))

    async def _turn_abandoned(self, adapter: PlatformAdapter, item: Accepted, session: dict[str, Any],
                              user_msg: dict[str, Any], reason: str) -> None:
        source = item.msg.source
        log.info("turn_abandoned", reason=reason)
        if reason == "shutdown":
            # The inbox row stays unfinished: the message is answered after the restart, not lost.
            await self.notify(adapter, source, "⚠️ Herald is restarting and had to cut this turn short; "
                                               "I'll answer your message when I'm back.")
            return
        await self.store.append_messages(session["id"], [user_msg], item.inbox_id, "cancelled")
        self.sessions.touch(item.key)
        if reason == "timeout":
            self.counters["turns_timed_out"] += 1
            await self.notify(adapter, source, f"⏱ I stopped this turn: nothing happened for "
                                               f"{_duration(self.cfg.gateway.turn_timeout_seconds)}. Please try again.")
        else:
            self.counters["turns_interrupted"] += 1

    async def _keep_typing(self, adapter: PlatformAdapter, source: Source, turn: Turn) -> None:
        while not turn.abandoned.done():
            try:
                await adapter.typing(source.chat_id, source.thread_id)
            except Exception as exc:
                log.debug("typing_failed", error=str(exc))
            await asyncio.sleep(4.0)

    async def _watchdog(self) -> None:
        """One timer for all turns: end any turn with no progress for turn_timeout_seconds."""
        limit = self.cfg.gateway.turn_timeout_seconds
        period = max(0.05, min(5.0, limit / 4))
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for lane in list(self.lanes.values()):
                turn = lane.turn
                if turn is not None and now - turn.last_activity > limit:
                    log.warning("turn_stuck", session_key=lane.key, last_step=turn.last_step)
                    turn.abandon("timeout")

    async def _measure_loop_lag(self, period: float = 0.05) -> None:
        """How late the loop wakes a timer: the number that says whether anything blocks it."""
        while True:
            start = time.perf_counter()
            await asyncio.sleep(period)
            self.loop_lag.append(max(0.0, time.perf_counter() - start - period))

    def loop_lag_quantiles(self) -> tuple[float, float, float]:
        samples = sorted(self.loop_lag)
        if not samples:
            return 0.0, 0.0, 0.0
        pick = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))]  # noqa: E731
        return pick(0.5), pick(0.99), samples[-1]

    def _user_content(self, msg: InboundMessage) -> str:
        if not msg.attachments:
            return msg.text
        files = "\n".join(f"- {path}" for path in msg.attachments)
        return f"{msg.text}\n\n[Attached files, saved on this machine:]\n{files}"

    # ---- session controls used by commands -----------------------------------------------------

    def stop_turn(self, key: str) -> bool:
        lane = self.lanes.get(key)
        return bool(lane and lane.turn and lane.turn.abandon("stopped"))

    def lane(self, key: str) -> Lane | None:
        return self.lanes.get(key)

    async def clear_queue(self, key: str) -> int:
        lane = self.lanes.get(key)
        if not lane:
            return 0
        dropped = list(lane.queue)
        lane.queue.clear()
        for item in dropped:
            await self.store.inbox_set(item.inbox_id, "cancelled", error="cleared by /queue clear")
        return len(dropped)

    # ---- recovery --------------------------------------------------------------------------------

    async def _recover(self, rows: list[dict[str, Any]]) -> None:
        """Answer what was accepted before the last stop but not finished; never answer anything twice."""
        resumed = 0
        for row in rows:
            adapter = self.adapters.get(row["platform"])
            if adapter is None:
                await self.store.inbox_set(row["id"], "failed", error=f"platform {row['platform']} is not enabled")
                continue
            msg = InboundMessage.from_dict(row["payload"])
            if row["status"] == "replied" and row["reply"] is not None:
                item = Accepted(row["id"], msg, row["session_key"], resume_reply=row["reply"])
            elif parse_command(msg.text) is not None:
                # A command is about the moment it was sent; replaying it after a restart would surprise.
                await self.store.inbox_set(row["id"], "cancelled", error="command interrupted by a restart")
                continue
            else:
                item = Accepted(row["id"], msg, row["session_key"])
            await self.submit(adapter, item, notify=False)
            resumed += 1
        if resumed:
            log.info("inbox_recovered", messages=resumed)

    # ---- status ----------------------------------------------------------------------------------

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        states = {
            name: {"state": a.state, **({"error": a.last_error} if a.last_error else {})}
            for name, a in self.adapters.items()
        }
        ready = not self.stopping and all(a.state == "connected" for a in self.adapters.values())
        return ready, states


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:g} seconds"
    return f"{seconds / 60:g} minutes"


def _swallow(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
