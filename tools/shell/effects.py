"""What code handed to an interpreter does, as the walk (``tools/shell/check.py``) needs to know it.

Each analysis (``pycode``, ``code``, ``textcode``) returns *effects*: a shell script or an argv the code
runs (classified like any command), a path it deletes or writes, SQL it executes, a local module it
imports, or a plain reason to ask. Literal arguments are read exactly; anything computed at run time needs
approval, because then nobody can know from the text what runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tools.shell.words import Word


@dataclass
class Effect:
    kind: str  # shell | argv | delete | write | sql | import | links | ask | hardline
    text: str = ""
    argv: list[Word] = field(default_factory=list)
    recursive: bool = False  # for delete
    piped: bool = False  # shell/argv: the code may write to the command's standard input


def ask(reason: str) -> Effect:
    return Effect("ask", reason)


FORK_BOMB = "a fork bomb (a loop that keeps starting processes)"
