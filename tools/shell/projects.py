"""Build and test runners and package managers: they run project code that is not on the command line.

make runs a Makefile's recipes, pytest imports conftest.py and the tests, npm/yarn/pnpm run package
scripts and install hooks, cargo runs build.rs, go/mvn/gradle/tox/nox run build logic, pip installs run
setup.py. None of that can be parsed here the way ``bash x.sh`` can, so these ask - like a script that
cannot be read - unless the operator lists them in ``approvals.allow`` (the finding is the runner's own,
so a glob such as ``pytest *`` covers it). What they are told to run on the line itself is checked as a
command as well, and is never covered by such a glob: ``npm exec -- CMD``, ``npx -c CMD``, ``uv run
CMD``, ``poetry run CMD``, ``bundle exec CMD``, ``make --eval`` and a Makefile read from standard input.
Asking for a version or for help runs nothing.
"""

from __future__ import annotations

import os
import posixpath
import re
from typing import TYPE_CHECKING

from tools.shell.parse import Word
from tools.shell.reading import STDIN_NAMES, within
from tools.shell.tables_projects import PROJECT_FILES, READS, REWRITES, VERSION_ONLY

if TYPE_CHECKING:
    from tools.shell.engine import Engine as _Base
else:
    _Base = object

RUNNERS = frozenset({
    "make", "gmake", "bmake", "cmake", "ninja", "meson", "pytest", "py.test", "tox", "nox", "npm", "pnpm", "yarn",
    "npx", "pnpx", "bunx", "uv", "uvx", "poetry", "pipenv", "pdm", "hatch", "rye", "pip", "pip3", "pipx",
    "cargo", "go", "mvn", "gradle", "gradlew", "ant", "sbt", "rake", "bundle", "gem", "composer", "dotnet",
    "swift", "jest", "vitest", "mocha", "tsc", "eslint", "mypy", "pylint", "nose2", "behave", "just", "task",
    "invoke", "scons", "bazel", "buck", "pre-commit", "conda", "mamba", "R", "Rscript", "julia", "node-gyp",
})
# runner -> verbs after which the rest of the line is an argv it runs
_EXEC_VERBS = {"npm": ("exec", "x"), "pnpm": ("exec", "dlx"), "yarn": ("exec", "dlx"), "uv": ("run",),
               "poetry": ("run",), "pipenv": ("run",), "pdm": ("run",), "hatch": ("run",), "rye": ("run",),
               "bundle": ("exec",), "conda": ("run",), "mamba": ("run",), "pipx": ("run",)}
_RUNNER_OPTS = re.compile(r"^-(-[\w-]+(=.*)?|[A-Za-z])$")


class Projects(_Base):
    def project(self, name: str, args: list[Word]) -> bool:
        name = {"pip3": "pip", "gmake": "make", "bmake": "make", "py.test": "pytest"}.get(name, name)
        if name not in RUNNERS:
            return False
        texts = [a.text for a in args]
        verbs = [t for t in texts if not t.startswith("-")]
        if self.runner_reads(name, args):
            return True
        if name in ("make",):
            self.make(args)
        elif name in ("npx", "pnpx", "bunx", "uvx"):
            self.package_argv(name, args, verb=None)
        elif name in _EXEC_VERBS and verbs[:1] and verbs[0] in _EXEC_VERBS[name]:
            self.package_argv(name, args[texts.index(verbs[0]) + 1:], verb=verbs[0])
        elif name in ("npm", "pnpm", "yarn") and any(t in ("-c", "--call") or t.startswith("--call=") for t in texts):
            for i, t in enumerate(texts):
                if t in ("-c", "--call") and i + 1 < len(args):
                    self.run_word(args[i + 1], f"{name} exec -c")
                elif t.startswith("--call="):
                    self.run_word(Word(t[7:], args[i].dynamic), f"{name} exec --call")
        self.add("dangerous", f"{name} runs project code (build files, tests or package scripts) that is not on the "
                              "command line")
        return True

    def runner_reads(self, name: str, args: list[Word]) -> bool:
        """Whether the runner only prints its version or runs a subcommand that only reads (each with the
        options of its table, ``tables_projects``); then files of the project that make it run code ask."""
        if any(a.dynamic for a in args):
            return False
        texts = [a.text for a in args]
        if texts and all(t in VERSION_ONLY.get(name, ()) for t in texts):
            self.project_files(name)
            return True
        verbs = READS.get(name, {})
        first = next((i for i, t in enumerate(texts) if not t.startswith("-")), None)
        if first is None or texts[first] not in verbs or any(t not in VERSION_ONLY.get(name, ()) for t in
                                                              texts[:first]):
            return False
        verb = texts[first]
        table = verbs[verb]
        o = self.check_options(f"{name} {verb}", args[first + 1:], table)
        if table.subs is not None:
            sub = o.operands[0].text if o.operands else ""
            if sub and sub not in table.subs:
                self.add("dangerous", f"{name} {verb} {sub[:30]} is not known to be harmless")
        if verb in REWRITES.get(name, ()):
            for p in o.operands or [Word(".")]:
                self.write(p, f"{name} {verb} rewrites", glob_ok=True)
        self.project_files(name)
        return True

    def project_files(self, name: str) -> None:
        ws, cwd = self.ctx.workspace, self.ctx.cwd
        if ws is None or cwd is None or name not in PROJECT_FILES:
            return
        d = cwd
        while within(d, ws):
            for f in PROJECT_FILES[name]:
                if os.path.lexists(posixpath.join(d, f)):
                    self.add("dangerous", f"{name} reads {f}, which can make it run other programs")
                    return
            if d == ws:
                break
            d = posixpath.dirname(d)

    def package_argv(self, name: str, args: list[Word], verb: str | None) -> None:
        """``npm exec -- rm -rf /``, ``uv run CMD``, ``npx -c CMD``: the command it runs, checked as a command."""
        i = 0
        while i < len(args):
            t = args[i].text
            if t == "--":
                i += 1
                break
            if t in ("-c", "--call") and i + 1 < len(args):
                self.run_word(args[i + 1], f"{name} -c")
                return
            if t.startswith("--call="):
                self.run_word(Word(t[7:], args[i].dynamic), f"{name} --call")
                return
            if not _RUNNER_OPTS.match(t):
                break
            # options with a value: --package X, -p X, --with X, --from X
            if t in ("-p", "--package", "--with", "--from", "--python", "--directory", "--project", "-w",
                     "--workspace", "--env", "-e"):
                i += 1
            i += 1
        argv = args[i:]
        if argv:
            self.run_argv(argv, f"{name} {verb}" if verb else name)

    def make(self, args: list[Word]) -> None:
        i = 0
        while i < len(args):
            t = args[i].text
            name, eq, val = t.partition("=")
            if name in ("--eval", "-E") or (t.startswith("-E") and len(t) > 2):
                code = Word(val, args[i].dynamic) if eq else Word(t[2:]) if t.startswith("-E") and len(t) > 2 \
                    else args[i + 1] if i + 1 < len(args) else Word("")
                i += 0 if eq or len(t) > 2 else 1
                self.make_code(code, "make --eval")
            elif name in ("-f", "--file", "--makefile") or (t.startswith("-f") and len(t) > 2):
                f = Word(val, args[i].dynamic) if eq else Word(t[2:]) if len(t) > 2 and not t.startswith("--") \
                    else args[i + 1] if i + 1 < len(args) else Word("")
                i += 0 if eq or (len(t) > 2 and not t.startswith("--")) else 1
                if f.text in STDIN_NAMES or f.procsub is not None:
                    data = self.stdin_data(self.cur_feed) if f.procsub is None else self.read_file(f)[0]
                    self.make_code(Word(data.decode("utf-8", "replace")) if data is not None else
                                   Word("$INPUT", dynamic=True), "make -f")
            i += 1

    def make_code(self, code: Word, how: str) -> None:
        """Recipes in make text given on the line: each is a shell command make runs."""
        if code.dynamic:
            self.add("dangerous", f"{how} runs make code that is only known at run time", own=False)
            return
        for line in code.text.split("\n"):
            recipe = line[1:] if line.startswith("\t") else None
            m = re.match(r"^[^:=#\t][^:=#]*::?(?!=)[^;]*;(.*)$", line)
            if m:
                recipe = m.group(1)
            for shell in re.findall(r"\$[({]shell\s+([^)}]*)[)}]", line):
                self.run_text(shell, f"{how} $(shell)")
            if recipe is not None:
                self.run_text(recipe.lstrip("@+- ").replace("$$", "$"), f"{how} recipe")
