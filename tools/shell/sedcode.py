"""sed scripts: the ``e`` command and the ``s///e`` flag run commands, ``w``/``W`` and ``s///w`` write files."""

from __future__ import annotations

import re

from tools.shell.effects import Effect
from tools.shell.effects import ask as _ask


def _sed_part(s: str, i: int, delim: str) -> int:
    """Index just past the part that ``delim`` closes, starting at ``i``; -1 if it never closes."""
    while i < len(s):
        if s[i] == "\\":
            i += 2
            continue
        if s[i] == delim:
            return i + 1
        i += 1
    return -1


def sed(script_text: str) -> list[Effect]:
    """Effects of a sed script: ``e`` runs commands, ``w``/``W`` and ``s///w`` write files."""
    s = script_text
    effects: list[Effect] = []
    i, n = 0, len(s)

    def rest_of_line(j: int) -> tuple[str, int]:
        end = s.find("\n", j)
        end = n if end < 0 else end
        return s[j:end].strip(), end

    while i < n:
        ch = s[i]
        if ch in " \t\n;{}!":
            i += 1
            continue
        if ch.isdigit() or ch in "$,~+":
            i += 1
            continue
        if ch == "/" or ch == "\\":
            delim = "/" if ch == "/" else (s[i + 1] if i + 1 < n else "/")
            j = _sed_part(s, i + (1 if ch == "/" else 2), delim)
            if j < 0:
                return [_ask("the sed script could not be read")]
            i = j
            while i < n and s[i] in "IM":
                i += 1
            continue
        if ch == "#":
            _, i = rest_of_line(i)
            continue
        if ch in "sy":
            if i + 1 >= n:
                return [_ask("the sed script could not be read")]
            delim = s[i + 1]
            j = _sed_part(s, i + 2, delim)
            k = _sed_part(s, j, delim) if j >= 0 else -1
            if k < 0:
                return [_ask("the sed script could not be read")]
            i = k
            if ch == "s":
                m = re.match(r"[gpiIMme0-9]*", s[i:])
                flags = m.group() if m else ""
                i += len(flags)
                if "e" in flags:
                    effects.append(_ask("sed s///e runs the result as a command"))
                if i < n and s[i] == "w":
                    target, i = rest_of_line(i + 1)
                    effects.append(Effect("write", target))
            continue
        if ch in "wW":
            target, i = rest_of_line(i + 1)
            effects.append(Effect("write", target))
            continue
        if ch == "e":
            cmd, i = rest_of_line(i + 1)
            effects.append(Effect("shell", cmd, piped=True) if cmd else
                           _ask("sed e runs the pattern space as a command"))
            continue
        if ch in "aicrRbtT:vlLqQ":
            _, end = rest_of_line(i + 1)
            if ch in "btT:v":
                semi = s.find(";", i + 1)
                end = semi if 0 <= semi < end else end
            i = end
            continue
        if ch in "=dDgGhHnNpPxzF":
            i += 1
            continue
        return [_ask("the sed script could not be read")]
    return effects
