"""Per-session settings: the model (/model), the reasoning effort (/reasoning) and the personality
(/personality), stored as nullable columns of ``sessions`` (None: the config's default), so they survive a
restart.

They are the chat's preferences rather than part of one conversation: a session that follows another
(/new, /personality, an idle or daily reset) starts with its parent's settings, checked against the
config as it is now (a model no longer in ``model.choices``, an effort the model no longer takes or a
personality no longer configured falls back to the default). ``/model default``, ``/reasoning default``
and ``/personality default`` go back to the config's defaults. The title is the conversation's own and is
not carried over. A resumed session (/resume) comes back with the settings it had.
"""

from __future__ import annotations

from typing import Any

from gateway.config import Config

EFFORTS = ("low", "medium", "high")
SETTINGS = ("model", "reasoning_effort", "personality")


class SessionSettings:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg

    # ---- models -----------------------------------------------------------------------------------

    @property
    def default_model(self) -> str | None:
        return self.cfg.model.name

    def model_choices(self) -> list[str]:
        """The names /model accepts: model.name first, then model.choices."""
        names = [self.cfg.model.name] if self.cfg.model.name else []
        return names + [n for n in self.cfg.model.choices if n not in names]

    def model_of(self, session: dict[str, Any] | None) -> str | None:
        """The model a turn of ``session`` uses: its own while the config still allows it, else the default."""
        chosen = (session or {}).get("model")
        return chosen if chosen and chosen in self.model_choices() else self.default_model

    def takes_reasoning(self, model: str | None) -> bool:
        flag = self.cfg.model.reasoning
        if isinstance(flag, bool):
            return flag and bool(model)
        return model in flag

    def effort_of(self, session: dict[str, Any] | None) -> str | None:
        """The ``reasoning_effort`` a turn sends: the session's, only where its model takes one."""
        effort = (session or {}).get("reasoning_effort")
        return effort if effort in EFFORTS and self.takes_reasoning(self.model_of(session)) else None

    # ---- personalities ----------------------------------------------------------------------------

    def personalities(self) -> dict[str, str]:
        return self.cfg.agent.personalities

    def personality_of(self, session: dict[str, Any] | None) -> str | None:
        name = (session or {}).get("personality")
        return name if name in self.personalities() else None

    # ---- a new session ------------------------------------------------------------------------------

    def carry(self, parent: dict[str, Any] | None) -> dict[str, Any]:
        """The settings a session that follows ``parent`` starts with (only what the config still allows)."""
        if parent is None:
            return {}
        model = parent.get("model") if parent.get("model") in self.model_choices() else None
        effort = parent.get("reasoning_effort")
        effort = effort if effort in EFFORTS and self.takes_reasoning(model or self.default_model) else None
        return {"model": model, "reasoning_effort": effort, "personality": self.personality_of(parent),
                "voice": parent.get("voice")}
