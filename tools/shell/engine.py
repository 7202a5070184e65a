"""What the per-command rules (rules.py, files.py, known.py, git.py, runners.py) see of the engine that walks
a command line (check.py): the shared state of one line (``Context``) and the ``Engine`` port they report
through. Kept apart so the rules depend on this, not on the walk that uses them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, Protocol

from tools.shell.effects import Effect
from tools.shell.options import Opts, Spec
from tools.shell.parse import Feed
from tools.shell.words import Word

Level = Literal["safe", "dangerous", "hardline"]

# Standard input whose content nobody can know from the text (a program that writes into a pipe it opened).
UNKNOWN_INPUT = Feed("unknown")


class Inherit(enum.Enum):
    """Nested code sees the same standard input / positional parameters as the command handing it on."""

    SAME = 0


SAME = Inherit.SAME


class Finding(NamedTuple):
    level: Level
    reason: str
    # The simple command (wrappers peeled, words canonically quoted) whose own rule found this, for
    # ``approvals.allow``; None when it comes from code handed on, a redirect or anything not a command's own.
    subject: str | None


@dataclass
class _Write:
    word: Word
    what: str
    prefix: str
    append: bool
    glob_ok: bool
    own_link: bool = False  # made by a command that may itself create links (cp -r): it counts only others
    subject: str | None = None
    quiet: bool = False  # named in code read from a file: the reason does not show the path
    links_before: int = 0  # links that commands before this write may have made


@dataclass
class Context:
    """State shared by every nested check of one command line."""

    workspace: str | None
    cwd: str | None
    read_root: str | None = None  # script files are read only from inside this directory
    findings: list[Finding] = field(default_factory=list)
    writes: list[_Write] = field(default_factory=list)
    cds: list[Word | None] = field(default_factory=list)  # None: a change we cannot follow
    reads: list[tuple[str, str, str]] = field(default_factory=list)  # (real path, shown name, prefix)
    links: int = 0  # commands that may create symlinks, through which a write inside could land outside
    # Loops, background jobs, pipelines, functions or traps: a write may run after a link made later in the text.
    unordered: bool = False
    # Who may write files we cannot name (interpreter code, extractors): -1 for the line itself, else the
    # index in ``reads`` of the script whose own code it is (a script may rewrite others, not what ran).
    opaque: set[int] = field(default_factory=set)
    aliases: dict[str, str] = field(default_factory=dict)
    git_aliases: dict[str, str] = field(default_factory=dict)
    # Possible values of each variable the line assigns; None: only known at run time.
    vars: dict[str, list[str] | None] = field(default_factory=dict)
    functions: dict[str, str] = field(default_factory=dict)  # name -> body text
    fds: dict[str, Feed] = field(default_factory=dict)  # what ``exec N<file`` left open
    modules: set[str] = field(default_factory=set)  # python modules already read from the workspace
    git_seen: bool = False  # a git command ran (its repository's configuration and hooks were read)
    unpacked: bool = False  # an archive or a patch is unpacked: files nobody named may change
    deleted: int = 0  # files the line's commands delete by name (optcheck.MAX_DELETES)


class Engine(Protocol):
    """The walk, as the rules report to it: findings, write targets, and code handed on to be checked."""

    ctx: Context
    depth: int
    owner: int
    positional: list[Word] | None

    def add(self, level: Level, reason: str, *, own: bool = True) -> None: ...

    def write(self, word: Word, what: str, *, append: bool = False, glob_ok: bool = False,
              own_link: bool = False, own: bool = True) -> None: ...

    def run_text(self, text: str, how: str, *, feed: Feed | Inherit | None = SAME,
                 positional: list[Word] | Inherit | None = SAME, quiet: bool = False) -> None: ...

    def run_word(self, word: Word, how: str, *, positional: list[Word] | Inherit | None = SAME) -> None: ...

    def run_argv(self, words: list[Word], how: str, *, feed: Feed | Inherit | None = SAME) -> None: ...

    def run_file(self, word: Word, lang: str | None, how: str, *, feed: Feed | Inherit | None = SAME,
                 args: list[Word] | None = None) -> None: ...

    def run_code(self, lang: str, text: str, how: str, owner: int | None = None, *,
                 feed: Feed | Inherit | None = SAME, quiet: str | None = None, base: str | None = None,
                 positional: list[Word] | Inherit | None = SAME) -> None: ...

    def run_sql(self, text: str, how: str) -> None: ...

    def read_file(self, word: Word) -> tuple[bytes | None, str]: ...

    def stdin_data(self, feed: Feed | None) -> bytes | None: ...

    def code_effects(self, lang: str, text: str, owner: int | None = None) -> list[Effect]: ...

    def apply_effects(self, effects: list[Effect], how: str, *, base: str | None = None) -> None: ...

    def assignment(self, key: str, value: Word) -> None: ...

    def values(self, word: Word) -> list[str] | None: ...

    def here(self) -> list[str | None]: ...

    def stdin_code(self, name: str, lang: str, feed: Feed | None) -> None: ...

    def run_program(self, word: Word, how: str) -> None: ...

    def home_rc(self, name: str, rc: str) -> None: ...

    def compressor(self, name: str, args: list[Word]) -> None: ...

    def project(self, name: str, args: list[Word]) -> bool: ...

    def critical_here(self, target: Word) -> str | None: ...

    def static_output(self, text: str) -> bytes | None: ...

    def check_options(self, label: str, args: list[Word], spec: Spec) -> Opts: ...

    def loose_words(self, label: str, words: list[Word]) -> None: ...

    def deletes(self, targets: list[Word], how: str, *, own_link: bool = False, verb: str = "deletes") -> None: ...

    def sub_options(self, name: str, args: list[Word]) -> tuple[str | None, Opts]: ...

    def apply_patch(self, sources: list[Word], how: str, base: Word, strip: int | None) -> bool: ...

    cur_feed: Feed | None
    env_assigns: list[tuple[str, Word]]
