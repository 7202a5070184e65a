"""Every program the classifier knows, with the table of its options (``options.Spec``).

A program is known only with a table: ``dispatch`` (check.py) asks for any program that reaches a rule
without one, so a new rule cannot let a program run with options nobody listed. The tables themselves are
in ``tables_core`` (readers and bash builtins), ``tables_files`` (file tools), ``tables_run`` (wrappers,
shells, interpreters, database clients, system tools), ``tables_git`` and ``tables_projects`` (build and
test runners, which ``projects.py`` checks against their own lists).
"""

from __future__ import annotations

import dataclasses

from tools.shell.options import Spec
from tools.shell.options import spec as S
from tools.shell.projects import RUNNERS
from tools.shell.tables_core import CORE
from tools.shell.tables_files import FILES
from tools.shell.tables_git import GIT, GIT_GLOBAL
from tools.shell.tables_run import DATABASES, LANGS, OTHERS, RUFF, SHELL_RCS, SHELLS, WRAPPER_TABLES

__all__ = ["OPTIONS", "SHELL_RCS"]

# Runners: ``projects.py`` checks their words against ``tables_projects`` (version flags, read-only verbs).
_RUNNER = S(free=True)

OPTIONS: dict[str, Spec] = {
    **CORE, **FILES, **WRAPPER_TABLES, **SHELLS, **LANGS, **DATABASES, **OTHERS,
    "git": dataclasses.replace(GIT_GLOBAL, subs=GIT), "ruff": RUFF,
    **{name: _RUNNER for name in RUNNERS if name not in CORE},
}
