"""The synchronous agent loop: model call -> tool calls -> model call ... -> final answer.

Runs in a worker thread. It knows nothing about platforms or asyncio; the gateway passes callbacks in
and persists what the turn adds. ``on_step`` gets each message of the turn as soon as it is final — the
assistant's tool calls before they run, each tool's result as it completes — so a turn cut short by a crash
can be resumed from its last step (``user_content=None``) without running a tool twice.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_core.errors import LLMError
from agent_core.jsonrepair import cut_off, repair_json
from agent_core.llm import LLMClient
from agent_core.usage import UsageMeter
from tools.registry import ToolContext, ToolRegistry

log = logging.getLogger(__name__)

EMPTY_REPLY = "(The model returned an empty reply.)"
GRACE_NOTE = (
    "[The tool-call budget for this turn is used up. Do not call any more tools. "
    "Give your final answer now, based on what you have so far.]"
)
_INTERRUPTED_RESULT = json.dumps({"error": "not run: the turn was interrupted"})
_CUT_RESULT = json.dumps({"error": "not run: the arguments of this call were cut off in the middle of a value (the "
                                   "reply hit its length limit?). Send the call again, whole; split a long "
                                   "content into several calls."})
_UNKNOWN_RESULT = json.dumps({"error": "the turn was cut off (Herald restarted) while this ran: it may or may not "
                                       "have completed, and it was not run again. Check before repeating it."})


def _noop(_what: str) -> None:
    return None


def _no_steps(_messages: list[dict[str, Any]]) -> None:
    return None


def _nothing() -> None:
    return None


class StepRefused(Exception):
    """Raised by ``on_step`` when the turn may not go on (it was stopped, or its steps can't be stored)."""


Compactor = Callable[[list[dict[str, Any]], list[dict[str, Any]] | None, LLMError | None],
                     list[dict[str, Any]] | None]


@dataclass
class TurnCallbacks:
    on_activity: Callable[[str], None] = field(default=_noop)
    # Messages of the turn as they become final (not the closing answer, which is in the result).
    on_step: Callable[[list[dict[str, Any]]], None] = field(default=_no_steps)
    # Every model call's token usage (agent_core/usage.py); None: not counted.
    usage: UsageMeter | None = None
    # Context compression: called before each model call with ``(messages, tools, None)`` and once more when
    # a call fails for context length with the error; returns the messages to go on with (system prompt
    # first, the older part summarised) or None to go on unchanged. May raise StepRefused.
    compact: Compactor | None = None
    # Set: the model's answers are streamed, and each piece of text is passed on as it arrives (a gateway
    # shows the reply as it is written). ``on_text_restart``: the current model call's text so far is void
    # (a retry or a fallback starts it over). A model call's text ends with its on_step (tool calls
    # follow) or with the turn (the answer). Neither changes the result.
    on_text: Callable[[str], None] | None = None
    on_text_restart: Callable[[], None] = field(default=_nothing)
    # Messages that arrived for the turn while it ran (a person adding to what they asked): called before
    # each model call, it returns user messages to add at that point, in order, already stored by the
    # callback (the agent does not pass them to on_step). May raise StepRefused.
    inject: Callable[[], list[dict[str, Any]]] | None = None


def _guarded(fn: Callable[..., None] | None) -> Callable[..., None] | None:
    """``fn``, with its failures logged: a broken display must not fail the user's turn."""
    if fn is None:
        return None

    def call(*args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("turn callback failed")

    return call


def unanswered_calls(messages: list[dict[str, Any]]) -> list[str]:
    """Ids of tool calls in the last assistant message with tool calls that have no result after it."""
    for n in range(len(messages) - 1, -1, -1):
        msg = messages[n]
        if msg.get("role") == "assistant" and msg.get("tool_calls"):
            answered = {m.get("tool_call_id") for m in messages[n + 1:] if m.get("role") == "tool"}
            return [c.get("id") for c in msg["tool_calls"] if c.get("id") not in answered]
        if msg.get("role") == "user":
            return []
    return []


@dataclass
class TurnResult:
    status: Literal["ok", "interrupted", "error"]
    text: str
    messages: list[dict[str, Any]]
    error_kind: str | None = None
    iterations: int = 0


class Agent:
    def __init__(
        self,
        llm: LLMClient,
        registry: ToolRegistry,
        tool_names: list[str] | None,
        max_iterations: int = 60,
    ) -> None:
        self.llm = llm
        self.registry = registry
        # None = every tool the config enables, resolved per turn (config decides, e.g. terminal.enabled).
        self.tool_names = list(tool_names) if tool_names is not None else None
        self.max_iterations = max_iterations

    def run(
        self,
        system_prompt: str,
        history: list[dict[str, Any]],
        user_content: str | list[Any] | None,
        interrupt: threading.Event,
        callbacks: TurnCallbacks,
        ctx: ToolContext,
    ) -> TurnResult:
        """One turn. ``user_content=None`` resumes the turn whose user message and steps end ``history``."""
        turn = _Turn(self, [{"role": "system", "content": system_prompt}, *history], interrupt, callbacks, ctx)
        try:
            return turn.run(user_content)
        except StepRefused:
            # Any step (storing a message, compressing) may refuse: the turn ends there, interrupted.
            return turn.interrupted()

    @staticmethod
    def _normalise_calls(tool_calls: list[dict[str, Any]]
                         ) -> tuple[list[tuple[dict[str, Any], dict[str, Any]]], set[str]]:
        """Give every call an id and parseable arguments (rewritten in place, so the persisted history
        carries the repaired JSON and servers never see the malformed text again). Also the ids of the calls
        whose arguments were cut off inside a value: those are not run."""
        out: list[tuple[dict[str, Any], dict[str, Any]]] = []
        cut: set[str] = set()
        for n, call in enumerate(tool_calls):
            if not call.get("id"):
                call["id"] = f"call_{n}"
            fn = call.setdefault("function", {})
            fn.setdefault("name", "")
            raw = fn.get("arguments")
            if isinstance(raw, dict):
                args: dict[str, Any] = raw
                fn["arguments"] = json.dumps(raw, ensure_ascii=False)
            else:
                args, repaired = repair_json(raw)
                if repaired:
                    log.info("repaired tool-call arguments", extra={"tool": fn["name"]})
                    if isinstance(raw, str) and cut_off(raw):
                        cut.add(call["id"])
                    fn["arguments"] = json.dumps(args, ensure_ascii=False)
                elif not raw:
                    fn["arguments"] = "{}"
            out.append((call, args))
        return out, cut


class _Turn:
    """One run of the loop: its state, and the steps it takes. A ``StepRefused`` from any of them ends the
    turn; ``Agent.run`` catches it, and ``interrupted`` answers the calls still open."""

    def __init__(self, agent: Agent, messages: list[dict[str, Any]], interrupt: threading.Event,
                 callbacks: TurnCallbacks, ctx: ToolContext) -> None:
        self.agent = agent
        self.messages = messages  # what the model is sent: system prompt, history, this turn
        self.new: list[dict[str, Any]] = []  # what this turn added
        self.interrupt = interrupt
        self.callbacks = callbacks
        self.ctx = ctx
        self.iterations = 0
        # Ids of the current batch's calls that have no result yet: every tool_call_id needs one, or the
        # history is invalid for the next request.
        self.open_calls: list[str] = []
        names = agent.tool_names if agent.tool_names is not None else agent.registry.names(ctx.config)
        # Offered for this turn only, after the agent's own (the list stays in one order while they are the same).
        names = [*names, *(n for n in getattr(ctx, "extra_tools", ()) if n not in names)]
        self.allowed = frozenset(names)
        self.tools = agent.registry.schemas(names) or None
        self.on_text, self.on_restart = _guarded(callbacks.on_text), _guarded(callbacks.on_text_restart)
        ctx.extras["on_activity"] = self.activity

    def activity(self, what: str) -> None:
        try:
            self.callbacks.on_activity(what)
        except Exception:
            # A broken progress/heartbeat sink must not fail the user's turn.
            log.exception("on_activity callback failed")

    def interrupted(self) -> TurnResult:
        for call_id in list(self.open_calls):
            self.answer_call(call_id, _INTERRUPTED_RESULT)
        text = LLMError("interrupted").user_message()
        return TurnResult("interrupted", text, self.new, "interrupted", self.iterations)

    def step(self, *msgs: dict[str, Any]) -> None:
        self.callbacks.on_step(list(msgs))

    def answer_call(self, call_id: str, content: str) -> None:
        msg = {"role": "tool", "tool_call_id": call_id, "content": content}
        self.messages.append(msg)
        self.new.append(msg)
        if call_id in self.open_calls:
            self.open_calls.remove(call_id)

    def run(self, user_content: str | list[Any] | None) -> TurnResult:
        self.start(user_content)
        overflow_retried = False
        while True:
            if self.interrupt.is_set():
                return self.interrupted()
            self.take_injected()
            self.compact(None)
            grace = self.iterations >= self.agent.max_iterations
            try:
                reply = self.call_model(grace)
            except LLMError as exc:
                if exc.kind == "interrupted":
                    return self.interrupted()
                if exc.kind == "context_overflow" and self.callbacks.compact is not None and not overflow_retried:
                    # Never fail for context length without compressing once and retrying the call.
                    overflow_retried = True
                    if self.compact(exc):
                        continue
                log.warning(
                    "turn failed",
                    extra={"session_key": self.ctx.session_key, "kind": exc.kind, "status": exc.status},
                )
                return TurnResult("error", exc.user_message(), self.new, exc.kind, self.iterations)
            tool_calls = reply.get("tool_calls") or []
            if grace or not tool_calls:
                return self.answer(reply)
            if (stopped := self.run_calls(reply, tool_calls)) is not None:
                return stopped

    def start(self, user_content: str | list[Any] | None) -> None:
        if user_content is not None:
            self.messages.append({"role": "user", "content": user_content})
            return
        # Resumed: calls whose results were never stored get a result that says so, not a second run.
        missing = unanswered_calls(self.messages)
        for call_id in missing:
            self.answer_call(call_id, _UNKNOWN_RESULT)
        if missing:
            self.step(*self.new)

    def take_injected(self) -> None:
        """What a person added while the turn ran, as user messages before the next call (after the tools)."""
        if self.callbacks.inject is None:
            return
        added = self.callbacks.inject()
        if added:
            self.messages.extend(added)
            self.new.extend(added)
            self.activity("took a message sent meanwhile")

    def compact(self, error: LLMError | None) -> bool:
        """Context compression, before a model call (``error`` None) or after one failed for length."""
        if self.callbacks.compact is None:
            return False
        shorter = self.callbacks.compact(self.messages, self.tools, error)
        if shorter is None:
            return False
        self.messages[:] = shorter
        return True

    def call_model(self, grace: bool) -> dict[str, Any]:
        if grace:
            # Budget spent and the model still wants tools: one last call, no tools, asking for an
            # answer. The note is sent but not persisted; it is an instruction, not conversation.
            request = [*self.messages, {"role": "user", "content": GRACE_NOTE}]
            self.activity("model call (final, no tools)")
        else:
            request = self.messages
            self.activity(f"model call {self.iterations + 1}")
        tools = None if grace else self.tools
        if self.on_text is None:
            reply = self.agent.llm.complete(request, tools, self.interrupt)
        else:
            reply = self.agent.llm.complete(request, tools, self.interrupt, on_text=self.on_text,
                                            on_restart=self.on_restart)
        if self.callbacks.usage is not None:
            self.callbacks.usage.add(reply.get("model"), reply.get("usage"), request, reply)
        self.iterations += 1
        self.activity("model answered")
        return reply

    def answer(self, reply: dict[str, Any]) -> TurnResult:
        text = reply.get("content") or ""
        if not text.strip():
            text = EMPTY_REPLY
        # Tool calls the model makes in the grace call are dropped: they would never get results.
        self.new.append({"role": "assistant", "content": text})
        return TurnResult("ok", text, self.new, None, self.iterations)

    def run_calls(self, reply: dict[str, Any], tool_calls: list[dict[str, Any]]) -> TurnResult | None:
        """The model's tool calls, each stored as it completes; a TurnResult if the turn was interrupted."""
        parsed, cut = self.agent._normalise_calls(tool_calls)
        assistant = {"role": "assistant", "content": reply.get("content"), "tool_calls": tool_calls}
        self.messages.append(assistant)
        self.new.append(assistant)
        self.open_calls = [call["id"] for call, _ in parsed]
        self.step(assistant)  # stored before any of its calls runs
        registry = self.agent.registry
        batch = [(call["function"]["name"], args) for call, args in parsed
                 if call["function"]["name"] in self.allowed and call["id"] not in cut]
        if len(parsed) > 1:
            # Calls of one batch are independent: let tools start their slow parts (a person's
            # approval) together, so several prompts can be answered in any order.
            registry.prepare_batch(batch, self.ctx)
        try:
            for call, args in parsed:
                if self.interrupt.is_set():
                    return self.interrupted()
                name = call["function"]["name"]
                self.activity(f"tool {name}")
                if name not in self.allowed:
                    result = json.dumps({"error": f"unknown tool: {name}", "available": sorted(self.allowed)})
                elif call["id"] in cut:
                    result = _CUT_RESULT
                else:
                    result = registry.dispatch(name, args, self.ctx)
                self.activity(f"tool {name} done")
                self.answer_call(call["id"], result)
                self.step(self.new[-1])
        finally:
            if len(parsed) > 1:
                registry.finish_batch([name for name, _ in batch], self.ctx)
        return None
