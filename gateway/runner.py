"""GatewayRunner: the composition root. It builds the parts, wires them through their constructors, starts
and stops them. It holds no message logic of its own:

- ``inbound`` / ``dispatcher``: accept (guard 1) and button presses; commands inline, else the lane (guard 2;
  the guards are defined in gateway/inbound/accept.py)
- ``lanes`` / ``turns``: session FIFOs; one turn at a time per session, in the thread pool, journaled
- ``supervisor`` / ``recovery``: adapters kept up under their credential locks; unfinished work resumed
- ``approvals``, ``pairing``, ``cron``: features, each given what it needs
- ``commands``: every chat command, each module's set bound to the dependencies it declares

The parts are built in steps (``_build_*``), from the ground up: a step uses only what the steps before it
built, and no part is changed after it is built. A part that needs one built later (the compressor, the
lanes) or only at start (/cron and the tools, the scheduler) gets a callable that looks it up when called.

Adapters see it only through the contract's ``Gateway`` port; features through ``gateway.ports``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import Any

import structlog

from cron.commands import CRON_COMMANDS, CronDeps
from gateway.approvals.broker import BUTTON_PREFIX, ApprovalBroker
from gateway.approvals.commands import APPROVAL_COMMANDS
from gateway.approvals.store import ApprovalStore
from gateway.cluster.bus import make_bus
from gateway.cluster.instance import Instance
from gateway.cluster.locks import CredentialLocks
from gateway.commands.builtin import BUILTIN_COMMANDS, BuiltinDeps
from gateway.commands.conversation import CONVERSATION_COMMANDS, ConversationDeps
from gateway.commands.model import MODEL_COMMANDS, ModelDeps
from gateway.commands.registry import CommandRegistry
from gateway.config import Config, Paths
from gateway.inbound.accept import Inbound
from gateway.inbound.access import AccessControl
from gateway.inbound.dispatch import Dispatcher
from gateway.inbound.edits import Edits
from gateway.inbound.pairing import PAIRING_COMMANDS, PairingService
from gateway.inbound.recovery import Recovery
from gateway.inbound.routing import SessionRouter
from gateway.inbound.supervisor import Supervisor
from gateway.kernel.faults import Faults
from gateway.kernel.health import private_status, public_status
from gateway.kernel.metrics import Counters, Metrics
from gateway.mcp.commands import MCP_COMMANDS
from gateway.mcp.service import McpService
from gateway.mcp.service import warnings as mcp_warnings
from gateway.media.hub import Media
from gateway.media.voice import VOICE_COMMANDS, VoiceDeps
from gateway.ops.systemd import SystemdNotifier
from gateway.outbound.delivery import Delivery, Notices
from gateway.outbound.streaming import Streams
from gateway.outbound.streaming.verbose import VERBOSE_COMMANDS, VerboseDeps
from gateway.platforms import PLATFORMS, adapter_class, declare_to_logs
from gateway.platforms.base import (
    Accepted,
    AdapterContext,
    ButtonPress,
    Capabilities,
    InboundMessage,
    PlatformAdapter,
    Source,
)
from gateway.session.chats import Chats
from gateway.session.history import History
from gateway.session.manager import SessionManager
from gateway.storage.store import Store
from gateway.talk.audit import ToolAudit
from gateway.talk.clarify import BUTTON_PREFIX as CLARIFY_PREFIX
from gateway.talk.clarify import ClarifyBroker
from gateway.talk.help import about
from gateway.talk.outgoing import Messenger
from gateway.turns import sandboxing
from gateway.turns.agents import AgentFactory
from gateway.turns.attempts import Attempts
from gateway.turns.compression import COMPRESS_COMMANDS, Compressor
from gateway.turns.executor import TurnExecutor
from gateway.turns.lanes import Lanes
from gateway.turns.memory import MEMORY_COMMANDS, MemoryBook
from gateway.turns.usage import USAGE_COMMANDS, UsageDeps, UsageLedger
from tools.registry import ToolRegistry
from tools.registry import registry as builtin_tools

log = structlog.get_logger("herald.runner")

# systemd's READY=1 waits this long at most for every adapter's first connection attempt (the unit's
# TimeoutStartSec= is longer).
READY_WAIT = 60.0

AdapterFactory = Callable[[AdapterContext], PlatformAdapter]


class GatewayRunner:
    def __init__(self, cfg: Config, paths: Paths, extra_adapters: list[AdapterFactory] | None = None) -> None:
        """``extra_adapters``: factories of adapters beyond the configured platforms (test channels)."""
        declare_to_logs()  # the platforms' bot tokens are masked in whatever this process logs or stores
        self.cfg = cfg
        self.paths = paths
        self._extra_adapters = list(extra_adapters or [])
        self._stopping = False
        self.stop_event = asyncio.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.started_at = time.time()
        self.loop_lag: deque[float] = deque(maxlen=1200)  # the last minute of 50 ms probes
        self.counters = Counters()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.adapters: dict[str, PlatformAdapter] = {}  # built at start, once the store is open
        self.cron: Any = None  # cron.scheduler.CronScheduler once started (cron.enabled)
        self._http: Any = None
        self.systemd = SystemdNotifier()  # a no-op unless systemd started us with Type=notify
        self.metrics = Metrics(self)  # a registry of its own: several runners may share a process (tests)
        self.faults = Faults(self.metrics)  # counted, logged, and /readyz's reasons (gateway/kernel/faults.py)
        self._build_storage()
        self._build_outbound()
        self._build_access()
        self._build_agent()
        self._build_approvals()
        self._build_talk()
        self._build_turns()
        self._build_commands()
        self._build_inbound()

    def _build_storage(self) -> None:
        """The database, this instance among the others on it, the bus between them, the credential locks."""
        # The store reports a database that is down (or a full disk) to the ledger as a lasting condition.
        self.store = Store(self.cfg.database.url or f"sqlite+aiosqlite:///{self.paths.db_file}", self.faults)
        self.instance = Instance(self.store, self.paths.profile)
        # Several instances on one PostgreSQL database: each session's turns run in its lease owner.
        self.bus = make_bus(self.store.url, self.instance.id)
        self.locks = CredentialLocks(self.store.url, self.paths.profile)

    def _build_outbound(self) -> None:
        self.delivery = Delivery(self.store, self.metrics, owner=self.instance.id, faults=self.faults)
        self.notices = Notices(self.delivery, self.adapters)

    def _build_access(self) -> None:
        """Who may talk: the configured lists, and the strangers the owner paired."""
        self.access = AccessControl(self.cfg)
        self.pairing = PairingService(self.store, self.access, self.adapters, self.delivery, self.notices, self,
                                      self.cfg.access.unknown_dm)

    def _build_agent(self) -> None:
        """The agent, what its tools run under and reach, and the sessions it talks in."""
        cfg = self.cfg
        # The warnings: /readyz repeats them. The egress proxy (tools/egress.py) runs until shutdown.
        sandbox, self.warnings, self.egress = sandboxing.setup(cfg, self.paths)
        self.memory = MemoryBook(self.store, self, cfg.agent.memory_max_chars, cfg.sessions.per_user_in_groups)
        # This daemon's tools: the built-in ones, and its MCP servers' while they are up (gateway/mcp/).
        tools = self.tools = ToolRegistry(base=builtin_tools)
        self.mcp = McpService(cfg, self.paths, tools, self.faults, lambda: self.agents.sandbox)
        self.warnings += mcp_warnings(cfg.mcp)
        self.agents = AgentFactory(cfg, self.paths, self._prompt_hint, self.metrics.llm_call, self.faults.model,
                                   sandbox=sandbox, tool_extras=self._tool_extras, registry=tools,
                                   extra_tools=self.mcp.tool_names)
        self.sessions = SessionManager(self.store, cfg.sessions, self.agents.system_prompt,
                                       carry=self.agents.settings.carry, prompt_addendum=self.memory.snapshot)
        self.usage = UsageLedger(self.store, cfg.model.prices, cfg.gateway.daily_token_budget)

    def _build_approvals(self) -> None:
        remote = None
        if self.bus.enabled:
            from gateway.approvals.remote import RemoteApprovals

            remote = partial(RemoteApprovals, bus=self.bus, instance=self.instance, life=self)
        self.approvals = ApprovalBroker(self.cfg.approvals, ApprovalStore(self.store), self.delivery, self.notices,
                                        self.adapters, self.access, self, self.instance, self.agents.secret_values,
                                        metrics=self.metrics, remote=remote)

    def _build_talk(self) -> None:
        """The agent in the conversation: the questions it asks (clarify), its messages to other chats."""
        remote = None
        if self.bus.enabled:
            from gateway.talk.remote import RemoteClarify

            remote = partial(RemoteClarify, bus=self.bus, instance=self.instance, life=self, adapters=self.adapters)
        self.clarify = ClarifyBroker(self.cfg, self.store, self.delivery, self.notices, self.adapters, self.access,
                                     self, self.instance, remote=remote)
        self.messenger = Messenger(self.cfg, self.store, self.delivery, self.adapters, self.access, self,
                                   self.instance)
        self.tool_audit = ToolAudit(self.store, self)  # the pages the agent read, its searches

    def _asking(self, key: str) -> bool:
        """A person is being asked for this session's turn: an approval prompt or the agent's question is up."""
        return self.approvals.asking(key) or self.clarify.asking(key)

    def _build_turns(self) -> None:
        """A turn's parts, the executor that runs it, and the session lanes that feed the executor."""
        cfg = self.cfg
        # /compress refuses while a turn of the session computes: the lanes know, and they are built last here.
        self.compression = Compressor(cfg, self.store, self.sessions, lambda: self.agents.agent, self.usage,
                                      lambda key: self.lanes.busy(key) is not None)
        self.streams = Streams(cfg.display, self.delivery, self.sessions.peek, self.agents.secret_values,
                               self.tools.get, self.approvals.asking)
        self.attempts = Attempts(self.store, self.notices, cfg.gateway.max_attempts, self.counters)
        self.media = Media(cfg, self._inbound_media_dir(), self.paths.media_dir, self.faults)
        self.turns = TurnExecutor(cfg, self.store, self.sessions, self.delivery, self.notices, self.agents,
                                  self.approvals, self.adapters, self.counters, metrics=self.metrics,
                                  compression=self.compression, usage=self.usage, streams=self.streams,
                                  attempts=self.attempts, media=self.media)
        self.lanes = Lanes(cfg.gateway, self.store, self.notices, self, self.instance, self.counters, self.turns.run,
                           routed=self.bus.enabled, media=self.media.inbound, echo=cfg.transcription.echo)

    def _build_commands(self) -> None:
        """Every chat command, in the order /help lists them."""
        commands = self.commands = CommandRegistry()
        store, sessions, lanes, approvals = self.store, self.sessions, self.lanes, self.approvals
        commands.include(BUILTIN_COMMANDS, BuiltinDeps(lanes, sessions, store, approvals, self._help,
                                                       self.cfg.model.name))
        commands.include(CONVERSATION_COMMANDS, ConversationDeps(lanes, lanes, sessions, store, History(store),
                                                                 approvals, self.instance))
        commands.include(MODEL_COMMANDS, ModelDeps(lanes, sessions, store, approvals, self.agents.settings))
        commands.include(APPROVAL_COMMANDS, approvals)
        commands.include(COMPRESS_COMMANDS, self.compression)
        commands.include(MEMORY_COMMANDS, self.memory)
        commands.include(USAGE_COMMANDS, UsageDeps(self.usage, sessions, store))
        commands.include(VERBOSE_COMMANDS, VerboseDeps(sessions, store, self.streams))
        commands.include(VOICE_COMMANDS, VoiceDeps(sessions, store, self.media.speaker.enabled))
        commands.include(PAIRING_COMMANDS, self.pairing)
        commands.include(CRON_COMMANDS, CronDeps(store, lambda: self.cron))
        commands.include(MCP_COMMANDS, self.mcp)

    def _build_inbound(self) -> None:
        """The way in: accept (guard 1), dispatch (guard 2), sessions routed to their owner among instances,
        recovery of what was left unfinished, and the supervisor that keeps adapters connected."""
        self.edits = Edits(self.cfg.gateway, self.store, self.lanes, self)
        self.dispatcher = Dispatcher(self.store, self.access, self.commands, self.lanes, self.delivery, self,
                                     answers=self.clarify.take, edits=self.edits.take)
        dispatch = self.dispatcher.dispatch
        self.router = SessionRouter(self.store, self.instance, self.bus, self.lanes, dispatch, self.adapters,
                                    self.commands, self.notices, self, self.sessions.forget, self.counters,
                                    attempts=self.attempts)
        routed = self.router.enabled
        self.recovery = Recovery(self.store, self.instance, self.lanes, self.commands, self.notices,
                                 take_over=self.router.take_over if routed else None, attempts=self.attempts)
        self.inbound = Inbound(self.cfg, self.store, self.access, self.commands, dispatch, self.notices,
                               self.instance, self, self.counters, self.faults,
                               route=self.router.accept if routed else None, on_denied=self.pairing.denied,
                               buttons={BUTTON_PREFIX: self.approvals.handle_button,
                                        CLARIFY_PREFIX: self.clarify.handle_button})
        self.supervisor = Supervisor(self.adapters, self.locks, self.recovery, self.instance, self)
        if routed:
            self.bus.on("session-reset", self._reset_elsewhere)

    # ---- the Gateway port (what adapters see) and the Lifecycle port (what features see) ---------------

    @property
    def stopping(self) -> bool:
        return self._stopping

    async def accept(self, adapter: PlatformAdapter, msg: InboundMessage) -> Accepted | None:
        return await self.inbound.accept(adapter, msg)

    def press(self, adapter: PlatformAdapter, press: ButtonPress) -> None:
        self.inbound.press(adapter, press)

    def may_talk(self, source: Source, trusted: bool = False) -> bool:
        return self.access.allowed(source, trusted)

    def command_menu(self, platform: str) -> list[tuple[str, str]]:
        return self.commands.menu(platform)

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def key_for(self, source: Source) -> str:
        return self.inbound.key_for(source)

    # ---- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        if self.cfg.database.url is None:
            self.paths.home.mkdir(parents=True, exist_ok=True)
        await self.store.init()
        await self.instance.register()
        await self.instance.renew()
        await self.bus.start()
        await self.pairing.start()
        self.agents.build()
        self._build_adapters()
        await self.approvals.start()  # approvals left pending by a gone instance: denied; users told
        await self.clarify.start()  # so are the agent's questions: withdrawn, the person told
        # Before anything can bring a turn (a few ms; gateway/turns/pool.py says why up front and off the loop).
        await asyncio.to_thread(self.turns.pool.start_threads)
        from gateway.ops.dashboard import Dashboard
        from gateway.ops.http import HttpServer

        dashboard = Dashboard(self.readiness, self.adapters, self.lanes, self.sessions, self.approvals,
                              self.store.run_read, self.notices, lambda: self._stopping, self.bus,
                              faults=self.faults, prices=self.cfg.model.prices)
        self._http = HttpServer(self, dashboard.routes())
        await self._http.start()
        # Each adapter connects under its credential locks, then recovers what its platform left unfinished.
        self.supervisor.start()
        self.spawn(self.lanes.watchdog(), name="watchdog")
        self.spawn(self.messenger.run(), name="outgoing")  # `herald send`'s queue, and sends cut by a restart
        if self.router.enabled:
            self.spawn(self.router.run(), name="routing")
        self.spawn(self._measure_loop_lag(), name="loop-lag")
        if self.cfg.sessions.retention_days:
            from gateway.storage.retention import Retention

            media = (self.media.inbound_dir, self.paths.media_dir)
            self.spawn(Retention(self.store, self.cfg.sessions.retention_days, media=media).run(), name="retention")
        if self.cfg.cron.enabled:
            from cron.scheduler import CronScheduler

            self.cron = CronScheduler(self.cron_host())
            await self.cron.start()
        self.spawn(self._announce_ready(), name="sd-ready")
        # In the background: a server that is slow, hangs or fails to start delays nothing (gateway/mcp/).
        self.spawn(self.mcp.start(), name="mcp")
        log.info("gateway_started", adapters=list(self.adapters), http=f"{self.cfg.http.host}:{self.http_port}",
                 model=self.cfg.model.name or None, instance=self.instance.id)

    async def _announce_ready(self) -> None:
        """systemd's READY=1: the store is open (start() got this far) and every enabled adapter has made its
        first connection attempt, connected or not; a platform that hangs gets READY_WAIT seconds."""
        still = await self.supervisor.first_attempts(READY_WAIT)
        if still:
            log.warning("ready_without", adapters=still, waited=READY_WAIT)
        if self._stopping:
            return
        self.systemd.ready(self.service_status())
        log.info("gateway_ready", adapters={name: a.state for name, a in self.adapters.items()})
        # WATCHDOG=1 from this loop from now on (a wedged loop stops the pings), and STATUS= when it changes.
        self.spawn(self.systemd.watchdog(self.service_status if self.systemd.enabled else None), name="sd-watchdog")

    def service_status(self) -> str:
        """One line for ``systemctl status``: each adapter's state (with its error class when down) and the
        turns running and waiting."""
        parts = []
        for name, adapter in self.adapters.items():
            kind = f" ({adapter.error_kind})" if adapter.state != "connected" and adapter.error_kind else ""
            parts.append(f"{name} {adapter.state}{kind}")
        where = "stopping" if self._stopping else "running"
        return (f"{where}: {', '.join(parts) or 'no adapters'}; turns {self.lanes.running()} running, "
                f"{self.lanes.waiting()} queued")

    def cron_host(self) -> Any:
        from cron.host import CronHost

        return CronHost(self.cfg, self.store, self.turns, self.delivery, self.adapters, self, self._is_admin,
                        lambda: self.agents.sandbox, self.metrics, self.bus, self.faults)

    def _inbound_media_dir(self) -> Path:
        # Files people send are for the agent: they go where its tools can read them (the sandbox hides the
        # profile's home, media folder included).
        sandbox = self.agents.sandbox
        return Path(sandbox.workspace) / "attachments" if sandbox is not None else self.paths.media_dir

    def _build_adapters(self) -> None:
        media = self._inbound_media_dir()
        chats = Chats(self.store, self.key_for, self.lanes, self.sessions, self.bus)

        def context(config: Any) -> AdapterContext:
            return AdapterContext(gateway=self, config=config, home=self.paths.home, media_dir=media,
                                  chat_log=self.store.chat_log, platforms=dict(self.cfg.platforms),
                                  cursors=self.store.cursors, broadcast=self.bus, faults=self.faults,
                                  receipts=self.store.outbox, chats=chats)

        for name in PLATFORMS:
            platform_cfg = getattr(self.cfg.platforms, name, None)
            if platform_cfg is not None and platform_cfg.enabled:
                self.adapters[name] = adapter_class(name)(context(platform_cfg))
        if self.cfg.api.enabled:  # the OpenAI-compatible API: an adapter of its own beside the platforms
            from gateway.api.adapter import ApiAdapter
            from gateway.api.conversations import Conversations
            from gateway.storage.api_keys import ApiKeyStore

            conversations = Conversations(self.store, self.sessions, self.agents.settings, self.key_for,
                                          self.cfg.api.model_name)
            self.adapters[ApiAdapter.name] = ApiAdapter(context(self.cfg.api), ApiKeyStore(self.store), conversations,
                                                        out_dir=self.media.out_dir)
        for factory in self._extra_adapters:
            adapter = factory(context(None))
            self.adapters[adapter.name] = adapter
        for name in self.adapters:
            self.metrics.add_platform(name)

    def _reset_elsewhere(self, key: str) -> None:
        """Another instance reset ``key`` (the dashboard): a turn of it running here stops, what waits for
        approval in it is denied, and what this instance cached about it is dropped."""
        self.lanes.stop_turn(key)
        self.spawn(self.approvals.deny_session(key, "new"), name="reset:approvals")
        self.sessions.forget(key)

    def _tool_extras(self) -> dict[str, Any]:
        """What every turn's tools reach besides the chat: the memory book, and the scheduler while cron runs."""
        extras: dict[str, Any] = {"memory_api": self.memory, "clarify": self.clarify.asker,
                                  "messenger": self.messenger, "audit": self.tool_audit}
        if self.cron is not None:
            extras["cron_api"] = self.cron.tool_api
        return extras

    def _help(self, platform: str, prefix: str) -> str:
        """/help: the commands, then the agent's tools for the conversation and what busy and edited messages do."""
        adapter = self.adapters.get(platform)
        caps = adapter.capabilities if adapter is not None else Capabilities(command_prefix=prefix)
        return self.commands.help_text(platform, prefix) + "\n" + about(self.cfg, self.agents.tool_names, caps)

    def _prompt_hint(self, platform: str) -> str | None:
        adapter = self.adapters.get(platform)
        return adapter.prompt_hint if adapter else None

    def _is_admin(self, source: Source) -> bool:
        adapter = self.adapters.get(source.platform)
        return self.access.admin(source, adapter.trusted if adapter else False)

    @property
    def sandbox(self) -> Any:
        """The tools' sandbox policy (tools.sandbox.SandboxPolicy), once started."""
        return self.agents.sandbox

    @property
    def http_port(self) -> int:
        return self._http.port if self._http else self.cfg.http.port

    async def shutdown(self) -> None:
        """Stop taking messages, let running turns finish (up to drain_seconds), tell whoever was cut."""
        if self._stopping:
            return
        self._stopping = True
        self.systemd.stopping(f"draining {self.lanes.running()} running turn(s) for up to "
                              f"{self.cfg.gateway.drain_seconds:g} s")
        if self.cron is not None:
            await self.cron.stop()
        log.info("gateway_draining", running=self.lanes.running())
        await self.lanes.drain(self.cfg.gateway.drain_seconds)
        self.store.waiting = False  # a database still down no longer holds the exit: what is left stays for the next
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.supervisor.stop()
        if self._http:
            await self._http.stop()
        self.turns.pool.shutdown(wait=False, cancel_futures=True)
        await self.mcp.stop()  # after the turns, which may still be calling them
        if self.egress is not None:  # after the turns: a command still running keeps its network until here
            await asyncio.to_thread(self.egress.stop)
        try:
            # What this process leaves unfinished is free for the next one at once, here or elsewhere.
            await self.router.stop()
            await self.store.inbox.renew(self.instance.id, 0.0)
            await self.instance.unregister()
        except Exception as exc:
            log.warning("instance_release_failed", error=str(exc))
        await self.bus.stop()
        await self.store.close()
        self.systemd.close()
        log.info("gateway_stopped")

    async def _measure_loop_lag(self, period: float = 0.05) -> None:
        """How late the loop wakes a timer: the number that says whether anything blocks it."""
        while True:
            start = time.perf_counter()
            await asyncio.sleep(period)
            lag = max(0.0, time.perf_counter() - start - period)
            self.loop_lag.append(lag)
            self.metrics.loop_lag.observe(lag)

    def loop_lag_quantiles(self) -> tuple[float, float, float]:
        samples = sorted(self.loop_lag)
        if not samples:
            return 0.0, 0.0, 0.0
        pick = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))]  # noqa: E731
        return pick(0.5), pick(0.99), samples[-1]

    def task_count(self) -> int:
        """The event loop's live tasks (scraped on the loop; 0 before it runs)."""
        return len(asyncio.all_tasks(self.loop)) if self.loop is not None else 0

    def readiness(self, detail: bool = False) -> tuple[bool, dict[str, Any]]:
        """Per adapter: state, error class and hint; ``detail`` (authenticated callers only) adds the
        redacted ``last_error``. Unauthenticated endpoints never get exception text (gateway/kernel/health.py)."""
        status = private_status if detail else public_status
        states = {name: status(a) for name, a in self.adapters.items()}
        ready = (not self._stopping and all(a.state == "connected" for a in self.adapters.values())
                 and not self.faults.blocking())
        return ready, states
