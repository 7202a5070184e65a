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
        def activity(what: str) -> None:
            try:
                callbacks.on_activity(what)
            except Exception:
                # A broken progress/heartbeat sink must not fail the user's turn.
                log.exception("on_activity callback failed")

        ctx.extras["on_activity"] = activity
        on_text, on_restart = _guarded(callbacks.on_text), _guarded(callbacks.on_text_restart)
        names = self.tool_names if self.tool_names is not None else self.registry.names(ctx.config)
        allowed = frozenset(names)
        tools = self.registry.schemas(names) or None
        messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}, *history]
        new: list[dict[str, Any]] = []
        iterations = 0

        def interrupted() -> TurnResult:
            text = LLMError("interrupted").user_message()
            return TurnResult("interrupted", text, new, "interrupted", iterations)

        def step(*msgs: dict[str, Any]) -> None:
            callbacks.on_step(list(msgs))

        if user_content is not None:
            messages.append({"role": "user", "content": user_content})
        else:
            # Resumed: calls whose results were never stored get a result that says so, not a second run.
            missing = unanswered_calls(messages)
            for call_id in missing:
                self._append_tool(messages, new, call_id, _UNKNOWN_RESULT)
            if missing:
                try:
                    step(*new)
                except StepRefused:
                    return interrupted()

        overflow_retried = False
        while True:
            if interrupt.is_set():
                return interrupted()
            if callbacks.compact is not None:
                try:
                    shorter = callbacks.compact(messages, tools, None)
                except StepRefused:
                    return interrupted()
                if shorter is not None:
                    messages[:] = shorter
            grace = iterations >= self.max_iterations
            if grace:
                # Budget spent and the model still wants tools: one last call, no tools, asking for an
                # answer. The note is sent but not persisted; it is an instruction, not conversation.
                request = [*messages, {"role": "user", "content": GRACE_NOTE}]
                activity("model call (final, no tools)")
            else:
                request = messages
                activity(f"model call {iterations + 1}")
            try:
                if on_text is None:
                    reply = self.llm.complete(request, None if grace else tools, interrupt)
                else:
                    reply = self.llm.complete(request, None if grace else tools, interrupt, on_text=on_text,
                                              on_restart=on_restart)
            except LLMError as exc:
                if exc.kind == "interrupted":
                    return interrupted()
                if exc.kind == "context_overflow" and callbacks.compact is not None and not overflow_retried:
                    # Never fail for context length without compressing once and retrying the call.
                    overflow_retried = True
                    try:
                        shorter = callbacks.compact(messages, tools, exc)
                    except StepRefused:
                        return interrupted()
                    if shorter is not None:
                        messages[:] = shorter
                        continue
                log.warning(
                    "turn failed",
                    extra={"session_key": ctx.session_key, "kind": exc.kind, "status": exc.status},
                )
                return TurnResult("error", exc.user_message(), new, exc.kind, iterations)
            if callbacks.usage is not None:
                callbacks.usage.add(reply.get("model"), reply.get("usage"), request, reply)
            iterations += 1
            activity("model answered")

            tool_calls = reply.get("tool_calls") or []
            if grace or not tool_calls:
                text = reply.get("content") or ""
                if not text.strip():
                    text = EMPTY_REPLY
                # Tool calls the model makes in the grace call are dropped: they would never get results.
                final = {"role": "assistant", "content": text}
                new.append(final)
                return TurnResult("ok", text, new, None, iterations)

            parsed, cut = self._normalise_calls(tool_calls)
            assistant = {"role": "assistant", "content": reply.get("content"), "tool_calls": tool_calls}
            messages.append(assistant)
            new.append(assistant)
            try:
                step(assistant)  # stored before any of its calls runs
            except StepRefused:
                for call, _ in parsed:
                    self._append_tool(messages, new, call["id"], _INTERRUPTED_RESULT)
                return interrupted()
            batch = [(call["function"]["name"], args) for call, args in parsed
                     if call["function"]["name"] in allowed and call["id"] not in cut]
            if len(parsed) > 1:
                # Calls of one batch are independent: let tools start their slow parts (a person's
                # approval) together, so several prompts can be answered in any order.
                self.registry.prepare_batch(batch, ctx)
            try:
                for n, (call, args) in enumerate(parsed):
                    if interrupt.is_set():
                        # Every tool_call_id needs a result or the history is invalid for the next request.
                        for rest, _ in parsed[n:]:
                            self._append_tool(messages, new, rest["id"], _INTERRUPTED_RESULT)
                        return interrupted()
                    name = call["function"]["name"]
                    activity(f"tool {name}")
                    if name not in allowed:
                        result = json.dumps({"error": f"unknown tool: {name}", "available": sorted(allowed)})
                    elif call["id"] in cut:
                        result = _CUT_RESULT
                    else:
                        result = self.registry.dispatch(name, args, ctx)
                    activity(f"tool {name} done")
                    self._append_tool(messages, new, call["id"], result)
                    try:
                        step(new[-1])
                    except StepRefused:
                        for rest, _ in parsed[n + 1:]:
                            self._append_tool(messages, new, rest["id"], _INTERRUPTED_RESULT)
                        return interrupted()
            finally:
                if len(parsed) > 1:
                    self.registry.finish_batch([name for name, _ in batch], ctx)

    @staticmethod
    def _append_tool(messages: list[dict[str, Any]], new: list[dict[str, Any]], call_id: str, content: str) -> None:
        msg = {"role": "tool", "tool_call_id": call_id, "content": content}
        messages.append(msg)
        new.append(msg)

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
