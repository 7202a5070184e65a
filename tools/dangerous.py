"""Which shell commands are dangerous: the public face of the classifier in ``tools/shell/``.

- **hardline**: never runs, whatever the approval settings (wiping /, system directories or the home
  directory; mkfs; dd onto a disk; fork bombs; shutdown/reboot/halt; ``kill -1``; ``chmod -R 777 /``).
- **dangerous**: runs only after a person approves it in the chat.

The command is parsed with a real shell parser (tree-sitter-bash) and every simple command in it is
classified: through pipelines, lists, substitutions, subshells, function bodies, here-documents and
here-strings, brace and alias expansion, wrappers (sudo, env, nohup, timeout, xargs, find -exec...),
absolute paths and GNU option abbreviations. Code handed to an interpreter (``bash -c``, a pipe or
here-string into a shell, ``python -c``, ``perl -e``, awk ``system()``, a git ``!`` alias, base64 piped
into ``sh``) is classified recursively when it is a literal and needs approval when it is not; script
files named on the line are read when they can be (see ``tools/shell/check.py`` for that boundary). What
cannot be parsed needs approval, and hardline stays hardline through every wrapper.

Writes that stay inside the workspace (``classify(..., workspace=...)``) do not ask; recursive deletes,
writes outside it and the rest of the dangerous list do. Every finding carries a short human reason.
This module imports nothing from the gateway.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from tools.shell.check import check
from tools.shell.parse import clean, parse

Level = Literal["safe", "dangerous", "hardline"]


@dataclass(frozen=True)
class Verdict:
    level: Level
    reason: str | None
    command: str  # the normalised command text

    @property
    def needs_approval(self) -> bool:
        return self.level == "dangerous"

    @property
    def forbidden(self) -> bool:
        return self.level == "hardline"


@dataclass(frozen=True)
class Decision:
    """What the approval hook answers; ``message`` is the plain statement the model gets."""

    outcome: Literal["approved", "denied", "expired", "forbidden"]
    message: str

    @property
    def approved(self) -> bool:
        return self.outcome == "approved"

    @classmethod
    def forbidden(cls, reason: str) -> Decision:
        return cls("forbidden", f"Not run: forbidden — {reason}. This command is never allowed, with or "
                                "without approval; do not try to work around it.")


# ---------------------------------------------------------------------------------------- normalise

_HSPACE = re.compile(r"[^\S\n]+")


def normalize(command: str) -> str:
    """ANSI escapes out, NFKC (full-width letters become ASCII), invisible characters out, whitespace
    collapsed (newlines kept: they separate commands), line continuations joined."""
    text = clean(command).replace("\\\n", "")
    text = _HSPACE.sub(" ", text)
    lines = [line.strip() for line in text.split("\n")]
    return "\n".join(line for line in lines if line)


_OPERATOR_CHARS = frozenset(";&|<>()`$\n")


def has_shell_operators(command: str) -> bool:
    """Pipes, lists, redirects, substitutions, subshells, newlines: anything that makes more than one
    plain command out of the text (or computes one). Such commands never match ``approvals.allow``."""
    return any(ch in _OPERATOR_CHARS for ch in normalize(command))


def _plain_command(command: str) -> bool:
    """One simple command whose words are all fixed by the text: no lists, pipes, redirects,
    substitutions, expansions, assignments or here-documents."""
    script = parse(clean(command))
    if script.broken or len(script.commands) != 1 or script.redirects:
        return False
    cmd = script.commands[0]
    return bool(cmd.words) and not (cmd.redirects or cmd.assigns or cmd.feed or cmd.declaration) and not any(
        w.dynamic for w in cmd.words)


def matches_allowlist(command: str, patterns: Iterable[str]) -> bool:
    """``approvals.allow``: exact commands or globs, only for one plain command (see ``_plain_command``)."""
    text = normalize(command)
    if has_shell_operators(text) or not _plain_command(text):
        return False
    for pattern in patterns:
        pattern = normalize(pattern)
        if pattern and (text == pattern or fnmatch.fnmatchcase(text, pattern)):
            return True
    return False


def classify(command: str, *, workspace: str | None = None, cwd: str | None = None) -> Verdict:
    """The verdict for one command line: safe, dangerous (needs approval) or hardline (never runs).

    ``workspace``: the directory the agent may write in without asking (None: every write rule asks).
    ``cwd``: where the command runs (defaults to ``workspace``); script files named on the line are read
    from there, and relative write targets resolve against it.
    """
    level, reason = check(command, workspace, cwd)
    return Verdict(level, reason, normalize(command))
