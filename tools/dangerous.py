"""Which shell commands are dangerous: the public face of the classifier in ``tools/shell/``.

- **hardline**: never runs, whatever the approval settings (wiping /, system directories or the home
  directory, also by moving them away; mkfs; dd onto a disk; fork bombs; shutdown/reboot/halt; ``kill -1``;
  ``chmod -R 777 /``).
- **dangerous**: runs only after a person approves it in the chat.
- **safe**: everything else - which is only what the classifier *knows* to be harmless.

The command is parsed with a real shell parser (tree-sitter-bash) and every simple command in it is
classified: through pipelines, lists, substitutions, subshells, functions (with the arguments of each
call), loops (with their values), here-documents and here-strings, brace and alias expansion, wrappers
(sudo, env, nohup, timeout, xargs, find -exec...), absolute paths, GNU option abbreviations, and the
standard input each command really reads (``exec <file``, ``<&3``, pipes). Code handed to an interpreter
(``bash -c``, a pipe or here-string into a shell, ``python -c``, ``perl -e``, awk ``system()``, a git
``!`` alias or hook, base64 piped into ``sh``) is classified recursively when it is a literal and needs
approval when it is not. Values the line itself fixes are filled in (``a=r; ${a}m -rf /``).

The policy is an allowlist: a simple command is safe only when its program is known here and its
options and arguments are known to be harmless - read-only tools, and writes that provably stay inside
the workspace (redirects, cp/mv/tee/``sed -i``/``rm -f`` of files there, mkdir, touch...). A program
the classifier does not know, an option that runs code or names a program, code it cannot resolve to
names, a command word that is not a literal: all need approval. The allowlist is of options too: every
known program has a table of its options (``tools/shell/tables*.py``) and an option not in it asks;
deleting more than three named files in one line, a glob or a directory asks like ``rm -r``. Build and
test runners (make, pytest, npm, cargo...) run project code that cannot be parsed, so they ask unless
``approvals.allow`` lists them
(see ``tools/shell/check.py`` and docs/ARCHITECTURE.md). Script files are read only from inside the
workspace, and no reason ever quotes a file's contents. Every finding carries a short human reason.
This module imports nothing from the gateway, and the classifier itself (its parser and option tables, ~6 MB
resident) only when the first command is classified: a daemon whose agent runs no command never loads it.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from tools.shell.engine import Finding

Level = Literal["safe", "dangerous", "hardline"]


@dataclass(frozen=True)
class Verdict:
    level: Level
    reason: str | None
    command: str  # the normalised command text
    findings: tuple[Finding, ...] = field(default=(), compare=False, repr=False)

    @property
    def needs_approval(self) -> bool:
        return self.level == "dangerous"

    @property
    def forbidden(self) -> bool:
        return self.level == "hardline"

    def covered_by(self, patterns: Iterable[str]) -> bool:
        """Whether ``approvals.allow`` covers every reason this command asks: each finding must be a simple
        command's own (wrappers peeled: ``env rm -rf x`` is ``rm -rf x``), matched by a glob. Code a command
        hands on (a ``bash -c`` script, a git alias, interpreter code) is judged as its own commands, and
        what cannot be attributed to a fixed command (a redirect, code only known at run time) is never
        covered. Hardline is never covered."""
        globs = [p for p in (normalize(x) for x in patterns) if p]
        if self.level != "dangerous" or not globs:
            return False
        for f in self.findings:
            if f.level == "hardline":
                return False
            if f.level == "dangerous" and (f.subject is None or not any(
                    f.subject == g or fnmatch.fnmatchcase(f.subject, g) for g in globs)):
                return False
        return True


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
    from tools.shell.words import clean

    text = clean(command).replace("\\\n", "")
    text = _HSPACE.sub(" ", text)
    lines = [line.strip() for line in text.split("\n")]
    return "\n".join(line for line in lines if line)


_OPERATOR_CHARS = frozenset(";&|<>()`$\n")


def has_shell_operators(command: str) -> bool:
    """Pipes, lists, redirects, substitutions, subshells, newlines: anything that makes more than one
    plain command out of the text (or computes one)."""
    return any(ch in _OPERATOR_CHARS for ch in normalize(command))


def matches_allowlist(command: str, patterns: Iterable[str], *, workspace: str | None = None,
                      cwd: str | None = None) -> bool:
    """``approvals.allow``: whether the globs cover every reason ``command`` asks (``Verdict.covered_by``)."""
    return classify(command, workspace=workspace, cwd=cwd).covered_by(patterns)


def classify(command: str, *, workspace: str | None = None, cwd: str | None = None) -> Verdict:
    """The verdict for one command line: safe, dangerous (needs approval) or hardline (never runs).

    ``workspace``: the directory the agent may write in without asking (None: every write rule asks).
    ``cwd``: where the command runs (defaults to ``workspace``); script files named on the line are read
    from there, and relative write targets resolve against it.
    """
    from tools.shell.check import check

    level, reason, findings = check(command, workspace, cwd)
    return Verdict(level, reason, normalize(command), tuple(findings))
