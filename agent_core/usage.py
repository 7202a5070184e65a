"""Token usage of a turn's model calls, as the API reported it, per model.

The LLM client puts each response's ``usage`` (and the model it asked for) on the reply; the agent loop
hands it to the turn's :class:`UsageMeter`, and so does anything else that calls the model for the turn
(compression's summaries). A response without usage fields is counted from an estimate and marked so.
The gateway stores what the meter holds when the turn ends (gateway/turns/usage.py).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from agent_core.tokens import estimate_messages


@dataclass
class ModelUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, served from the provider's prompt cache
    calls: int = 0
    estimated: bool = False  # some call reported no usage: its figures are estimates


class UsageMeter:
    """Thread-safe sum of one turn's model calls, per model."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_model: dict[str, ModelUsage] = {}

    def add(self, model: str | None, usage: dict[str, Any] | None, request: list[dict[str, Any]] | None = None,
            reply: dict[str, Any] | None = None) -> None:
        """One model call: ``usage`` as the API gave it (None: estimated from ``request`` and ``reply``)."""
        if usage:
            prompt = _int(usage.get("prompt_tokens"))
            completion = _int(usage.get("completion_tokens"))
            details = usage.get("prompt_tokens_details") or {}
            cached = _int(details.get("cached_tokens") if isinstance(details, dict) else None)
            estimated = False
        else:
            prompt = estimate_messages(request or [])
            completion = estimate_messages([reply]) if reply else 0
            cached, estimated = 0, True
        with self._lock:
            row = self._by_model.setdefault(model or "unknown", ModelUsage())
            row.prompt_tokens += prompt
            row.completion_tokens += completion
            row.cached_tokens += cached
            row.calls += 1
            row.estimated = row.estimated or estimated

    def snapshot(self) -> dict[str, ModelUsage]:
        with self._lock:
            return {m: ModelUsage(u.prompt_tokens, u.completion_tokens, u.cached_tokens, u.calls, u.estimated)
                    for m, u in self._by_model.items()}

    def total(self) -> int:
        with self._lock:
            return sum(u.prompt_tokens + u.completion_tokens for u in self._by_model.values())


def _int(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0

