"""What the per-command rules (rules.py, runners.py) see of the engine that walks a command line (check.py):
the shared state of one line (``Context``) and the ``Engine`` port they report through. Kept apart so the
rules depend on this, not on the walk that uses them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from tools.shell.code import Effect
from tools.shell.parse import Word

Level = Literal["safe", "dangerous", "hardline"]


@dataclass
class _Write:
    word: Word
    what: str
    prefix: str
    append: bool
    glob_ok: bool
    own_link: bool = False  # made by a command that may itself create links (cp -r): it counts only others


@dataclass
class Context:
    """State shared by every nested check of one command line."""

    workspace: str | None
    cwd: str | None
    findings: list[tuple[Level, str]] = field(default_factory=list)
    writes: list[_Write] = field(default_factory=list)
    cds: list[Word | None] = field(default_factory=list)  # None: a change we cannot follow
    reads: list[tuple[str, str, str]] = field(default_factory=list)  # (real path, shown name, prefix)
    links: int = 0  # commands that may create symlinks, through which a write inside could land outside
    # Who may write files we cannot name (interpreter code, extractors): -1 for the line itself, else the
    # index in ``reads`` of the script whose own code it is (a script may rewrite others, not what ran).
    opaque: set[int] = field(default_factory=set)
    aliases: dict[str, str] = field(default_factory=dict)
    git_aliases: dict[str, str] = field(default_factory=dict)
    vars: dict[str, str | None] = field(default_factory=dict)  # None: more than one value, or unknown


class Engine(Protocol):
    """The walk, as the rules report to it: findings, write targets, and code handed on to be checked."""

    ctx: Context
    depth: int
    owner: int

    def add(self, level: Level, reason: str) -> None: ...

    def write(self, word: Word, what: str, *, append: bool = False, glob_ok: bool = False,
              own_link: bool = False) -> None: ...

    def run_text(self, text: str, how: str) -> None: ...

    def run_word(self, word: Word, how: str) -> None: ...

    def run_argv(self, words: list[Word], how: str) -> None: ...

    def run_file(self, word: Word, lang: str | None, how: str) -> None: ...

    def run_code(self, lang: str, text: str, how: str, owner: int | None = None) -> None: ...

    def run_sql(self, text: str, how: str) -> None: ...

    def read_file(self, word: Word) -> tuple[bytes | None, str]: ...

    def code_effects(self, lang: str, text: str, owner: int | None = None) -> list[Effect]: ...

    def apply_effects(self, effects: list[Effect], how: str) -> None: ...

    def assignment(self, key: str, value: Word) -> None: ...
