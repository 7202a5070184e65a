"""What a streamed reply shows besides the reply: one compact line per tool call ("running `ls -la`…",
"reading `README.md`") and, with ``/verbose all``, the model's text between tool calls.

Lines are built in the worker thread from the call's arguments (each tool declares its line, see
``tools.registry.Tool.progress``) and are shown in the chat: configured secrets' values and known token
shapes are masked the way approval reasons are.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Literal

import structlog

from gateway.kernel.chunking import to_plain
from gateway.kernel.shown import shown_reason
from tools.registry import code, short

log = structlog.get_logger("herald.streaming")

Verbose = Literal["off", "tools", "all"]
VERBOSE_CHOICES: tuple[Verbose, ...] = ("off", "tools", "all")
# A turn with many steps shows its newest lines, not a wall of them.
MAX_LINES = 8
TEXT_LINE_CHARS = 200

# ("tool", markdown line) or ("text", the model's words between tool calls, markdown)
Line = tuple[Literal["tool", "text"], str]


def tool_line(name: str, arguments: Any, progress: Callable[[dict[str, Any]], str] | None,
              secret_values: Iterable[str]) -> str:
    """The progress line of one call (``arguments`` as the model sent them: JSON text or a dict)."""
    args = arguments
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            args = {}
    line = None
    if progress is not None and isinstance(args, dict):
        try:
            line = progress(args)
        except Exception as exc:  # a tool's describer must not cost the turn anything
            log.debug("progress_line_failed", tool=name, error=f"{type(exc).__name__}: {exc}")
    return shown_reason(line or f"using {code(name, 40)}", secret_values)


def compose(lines: list[Line], text: str, verbose: str) -> str:
    """The markdown a streamed message shows: the progress lines ``verbose`` asks for, then the text being
    written."""
    shown = [(kind, body) for kind, body in lines if verbose == "all" or (verbose == "tools" and kind == "tool")]
    parts: list[str] = []
    if shown:
        items = [f"- … {len(shown) - MAX_LINES} earlier step(s)"] if len(shown) > MAX_LINES else []
        for kind, body in shown[-MAX_LINES:]:
            items.append(f"- {body}" if kind == "tool" else f"- 💬 {short(to_plain(body), TEXT_LINE_CHARS)}")
        parts.append("\n".join(items))
    if text.strip():
        parts.append(text)
    return "\n\n".join(parts)


class ShowsTheTurn:
    """A reply that shows a turn as it is written (``LiveReply``, ``DirectReply``): it listens to the agent's text
    pieces and to its steps once they are stored. Subclasses give ``text``, ``restart`` and ``step``."""

    def text(self, piece: str) -> None:
        raise NotImplementedError

    def restart(self) -> None:
        raise NotImplementedError

    def step(self, messages: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def callbacks(self, callbacks: Any) -> Any:
        """The agent's ``TurnCallbacks`` with this reply listening: text pieces, and steps once stored."""
        store_step = callbacks.on_step

        def on_step(messages: list[dict[str, Any]]) -> None:
            store_step(messages)  # stored first: a refused step (the turn was stopped) shows nothing
            try:
                self.step(messages)
            except Exception:  # the display must never cost the turn
                structlog.get_logger("herald.streaming").exception("stream_step_failed")

        callbacks.on_step = on_step
        callbacks.on_text = self.text
        callbacks.on_text_restart = self.restart
        return callbacks

