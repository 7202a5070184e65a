"""System prompt assembly.

The gateway builds the prompt once per session and stores it; it must be byte-identical every time it
is rebuilt from the same inputs so that provider-side prompt caching keeps hitting. Hence: no clock,
no environment, no unordered containers — only the arguments, in the order given.
"""

from __future__ import annotations


def _clean(text: str) -> str:
    # Normalise line endings and trailing whitespace: the same text pasted twice must give the same bytes.
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).strip()


def build_system_prompt(identity: str, platform_hint: str | None = None, extra: list[str] | None = None) -> str:
    sections = [_clean(identity)]
    if platform_hint:
        sections.append(_clean(platform_hint))
    sections.extend(_clean(s) for s in extra or () if s and s.strip())
    return "\n\n".join(s for s in sections if s)
