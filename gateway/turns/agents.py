"""Building the agent: the LLM client from ``model.*``, the tool list, the system prompt per platform, and
the ``ToolContext`` each turn's tools get."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from gateway.config import Config, Paths, secret_env_names
from gateway.kernel.configbase import secret
from gateway.session.settings import SessionSettings
from tools.sandbox import SandboxPolicy

log = structlog.get_logger("herald.agents")

_SECRET_NAME = re.compile(r"(TOKEN|API_KEY|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.I)


class AgentFactory:
    def __init__(self, cfg: Config, paths: Paths, prompt_hint: Callable[[str], str | None],
                 observe_llm: Callable[[float, str | None], None] | None = None,
                 on_model_fault: Callable[[str], None] | None = None, *, sandbox: SandboxPolicy | None = None,
                 tool_extras: Callable[[], Mapping[str, Any]] = dict, registry: Any = None,
                 extra_tools: Callable[[], tuple[str, ...]] = tuple) -> None:
        """``sandbox``: the policy every tool call runs under (gateway/turns/sandboxing.py); ``tool_extras``:
        the ToolContext extras of every turn, from the features the tools reach (memory, cron), read at each
        turn (cron's scheduler starts after the agent is built). ``registry``: this daemon's tools (the built-in
        ones and its MCP servers'; None: the built-in registry); ``extra_tools``: the tools a turn beginning now
        offers beyond the agent's own (the MCP servers' that are up)."""
        self.cfg = cfg
        self._observe_llm = observe_llm  # each model request's duration and error kind (gateway/kernel/metrics.py)
        self._on_model_fault = on_model_fault  # each fault a model endpoint served (gateway/kernel/faults.py)
        self.paths = paths
        self._prompt_hint = prompt_hint  # platform name -> its adapter's one-line hint
        self._prompt_cache: dict[str, str] = {}
        self._by_model: dict[str, Any] = {}
        self._by_setting: dict[tuple[str | None, str | None], Any] = {}  # (model, effort) -> agent
        self._lock = threading.Lock()
        self.settings = SessionSettings(cfg)
        self.tool_names: list[str] = []
        self.agent: Any = None
        # Never "cron" among them: that key marks a cron turn, whose dangerous commands follow approvals.cron_mode.
        self._tool_extras = tool_extras
        self._registry = registry
        self._extra_tools = extra_tools
        self.sandbox = sandbox
        # The environment variables holding secrets (named by the config, or named like a secret), whose
        # values approval prompts mask; commands get an allowlisted environment (tools/sandbox.py).
        self.secret_env_names = sorted(set(secret_env_names(cfg)) | {n for n in os.environ if _SECRET_NAME.search(n)})

    def secret_values(self) -> list[str]:
        return [v for v in (os.environ.get(n) for n in self.secret_env_names) if v]

    def build(self) -> Any:
        """The agent for ``model.*``, or None (and a warning) when no model is configured."""
        if not self.cfg.model.configured:
            log.warning("model_not_configured", hint="set model.base_url and model.name in config.yaml")
            return None
        from agent_core.agent import Agent
        from tools.registry import load_builtin_tools, registry

        load_builtin_tools()
        tools = self._registry if self._registry is not None else registry
        m = self.cfg.model
        llm = self._llm([(m.base_url or "", m.name or "", m.api_key_env)]
                        + [(f.base_url, f.name, f.api_key_env) for f in m.fallbacks])
        # The built-in tools only: a turn adds the MCP tools up when it begins (ToolContext.extra_tools).
        self.tool_names = [n for n in registry.names(self.cfg.tools)
                           if n != "memory" or self.cfg.agent.memory_max_chars]  # 0: no memory
        self.agent = Agent(llm, tools, self.tool_names, max_iterations=m.max_iterations)
        return self.agent

    def _llm(self, endpoints: list[tuple[str, str, str | None]], primary_extra: dict[str, Any] | None = None) -> Any:
        """``primary_extra``: request fields for the first endpoint only (a fallback may not take them)."""
        from agent_core.llm import Endpoint, LLMClient

        m = self.cfg.model
        return LLMClient([Endpoint(base_url=url, model=name, api_key=secret(env),
                                   extra=primary_extra if n == 0 else None, vision=m.sees_images(name))
                          for n, (url, name, env) in enumerate(endpoints)],
                         timeout=m.timeout_seconds, max_retries=m.max_retries, temperature=m.temperature,
                         max_tokens=m.max_tokens, observe=self._observe_llm, on_fault=self._on_model_fault)

    def for_session(self, session: dict[str, Any] | None) -> Any:
        """The agent for a chat turn: the session's model (/model) on the primary endpoint, with the same
        fallbacks, sending its reasoning effort (/reasoning) where that model takes one."""
        model = self.settings.model_of(session)
        effort = self.settings.effort_of(session)
        if self.agent is None or (model == self.cfg.model.name and effort is None):
            return self.agent
        with self._lock:  # turns pick their agent in worker threads
            agent = self._by_setting.get((model, effort))
            if agent is None:
                from agent_core.agent import Agent

                m = self.cfg.model
                llm = self._llm([(m.base_url or "", model or "", m.api_key_env)]
                                + [(f.base_url, f.name, f.api_key_env) for f in m.fallbacks],
                                {"reasoning_effort": effort} if effort else None)
                agent = self._by_setting[(model, effort)] = Agent(llm, self.agent.registry, self.tool_names,
                                                                  max_iterations=m.max_iterations)
            return agent

    def sees_images(self, session: dict[str, Any] | None) -> bool:
        """Whether the model a session's turns call takes images (``model.vision``)."""
        return self.cfg.model.sees_images(self.settings.model_of(session))

    def for_model(self, model: str | None) -> Any:
        """The agent, or one that calls ``model`` on the primary endpoint (a cron job's model override)."""
        if not model or model == self.cfg.model.name or self.agent is None:
            return self.agent
        agent = self._by_model.get(model)
        if agent is None:
            from agent_core.agent import Agent

            m = self.cfg.model
            agent = self._by_model[model] = Agent(self._llm([(m.base_url or "", model, m.api_key_env)]),
                                                  self.agent.registry, self.tool_names,
                                                  max_iterations=m.max_iterations)
        return agent

    def system_prompt(self, platform: str, personality: str | None = None) -> str:
        """Built once per platform (and personality) and byte-stable afterwards (the model provider's prompt
        cache). A personality's text (agent.personalities) follows the identity and the platform's hint."""
        text = self.cfg.agent.personalities.get(personality) if personality else None
        cache_key = f"{platform}\0{personality}" if text else platform
        prompt = self._prompt_cache.get(cache_key)
        if prompt is None:
            from agent_core.prompt import build_system_prompt

            prompt = build_system_prompt(self.cfg.agent.identity, self._prompt_hint(platform), [text] if text else None)
            self._prompt_cache[cache_key] = prompt
        return prompt

    def tool_context(self, key: str, interrupt: threading.Event, approve: Any, **extras: Any) -> Any:
        from tools.registry import ToolContext

        cwd = str(self.sandbox.workspace) if self.sandbox is not None else os.path.expanduser("~")
        return ToolContext(session_key=key, cwd=cwd, interrupt=interrupt, config=self.cfg.tools,
                           extras={"approve": approve, **self._tool_extras(), **extras}, sandbox=self.sandbox,
                           extra_tools=self._extra_tools())
