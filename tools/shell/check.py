"""The walk: every simple command of a script, through wrappers, interpreters, aliases, functions and files.

The policy (the same words are in docs/ARCHITECTURE.md):

- A simple command is *safe* only when its program is known here (``known.py``, the rule modules) and its
  options and arguments are known to be harmless: read-only tools, and writes that provably stay inside
  the workspace. A program this classifier does not know asks - "what cannot be parsed needs approval" -
  and so does an option that runs code or names a program (``-c``, ``--eval``, ``-exec``, a pager, an
  editor's ``!``), code that cannot be resolved to names, and a command word that is not a literal.
- Code handed on is checked where it is written: ``bash -c``, ``eval``, aliases, functions (again with the
  arguments of each call), interpreter code, git aliases and hooks, and script files. A script file,
  a sourced file, a hook or a local module is read only from inside the workspace (``reading.py``);
  findings in read code say which file they are in and never quote it.
- Build and test runners (make, pytest, npm/yarn/pnpm, cargo, go, tox...) run project code that is not on
  the command line and cannot be parsed here (a Makefile, a test suite, package scripts), so they ask
  like an unreadable ``bash x.sh`` would, unless the operator lists them in ``approvals.allow``. What they
  are told to run on the line itself (``npm exec -- rm -rf /``, ``make --eval``) is checked as a command.
- Standard input is followed: a pipe, a here-string, ``< file``, ``exec <file`` and ``<&N``, and what a
  wrapper or ``bash -c`` passes on; what an interpreter feeds a command it starts is unknown.

Writes are collected and decided at the end (``writes.finish``), when every ``cd`` of the line is known.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex

from tools.shell import code as code_mod
from tools.shell import sql as sql_mod
from tools.shell.effects import Effect
from tools.shell.engine import SAME, UNKNOWN_INPUT, Context, Finding, Inherit, Level, _Write
from tools.shell.files import FileTools
from tools.shell.git import Git
from tools.shell.known import Known
from tools.shell.optcheck import OptionCheck
from tools.shell.parse import Command, Feed, Redirect, Script, Word, clean, expand_braces, parse
from tools.shell.paths import BLOCK_DEVICE, HARMLESS_SINKS, critical
from tools.shell.reading import NODE_CORE as _NODE_CORE
from tools.shell.reading import (
    STDIN_NAMES,
    node_module_files,
    open_inside,
    python_module_files,
    read_root,
    script_lang,
)
from tools.shell.rules import Rules
from tools.shell.runners import WRAPPERS, Runners
from tools.shell.static import feed_bytes, output
from tools.shell.values import Values, quote
from tools.shell.writes import finish

RANK = {"safe": 0, "dangerous": 1, "hardline": 2}
MAX_DEPTH = 8

_STD_BIN = frozenset({"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"})
_RULE_NAME = re.compile(r"[A-Za-z][\w.+-]*")


def _movers(script: Script) -> list[Command]:
    """Commands that may change the working directory for the others (a sourced file or eval may cd)."""
    found = []
    for c in script.commands:
        name = posixpath.basename(c.words[0].text) if c.words else ""
        chdir_opt = name in ("env", "sudo") and any(w.text.startswith(("-C", "--chdir", "-D")) for w in c.words[1:])
        if chdir_opt or name in ("cd", "pushd", "popd", "eval", "source", ".", "alias") or any(
                k == "CDPATH" for k, _ in c.assigns) or name in script_functions(script):
            found.append(c)
    return found


def script_functions(script: Script) -> set[str]:
    return {f.name for f in script.functions if "cd " in f.body or "pushd" in f.body}


def canonical(words: list[Word], assigns: list[tuple[str, Word]] | tuple = ()) -> str | None:
    """The command as ``approvals.allow`` globs see it; None when part of it is only known at run time."""
    if any(w.dynamic for w in words) or any(v.dynamic for _, v in assigns):
        return None
    return " ".join([*(f"{k}={quote(v.text)}" for k, v in assigns), *(quote(w.text) for w in words)])


class Checker(Values, OptionCheck, Rules, FileTools, Known, Git, Runners):
    def __init__(self, ctx: Context, depth: int = 0, prefix: str = "", *, feed: Feed | None = None,
                 positional: list[Word] | None = None, quiet: str | None = None) -> None:
        self.ctx = ctx
        self.depth = depth
        self.prefix = prefix
        self.feed = feed  # standard input of commands that have none of their own
        self.positional = positional  # $0 $1 ...; None: unknown
        self.quiet = quiet  # set for code read from a file: reasons name the file, never its contents
        self.cur_feed: Feed | None = feed
        self.subject: str | None = None
        self.env_assigns: list[tuple[str, Word]] = []  # ``env K=V`` of the command being peeled
        self.movers: list[Command] = []
        self.current: Command | None = None
        self.owner = -1  # which read script's code this checker is looking at (-1: the line itself)

    # ---- reporting ---------------------------------------------------------------------------------

    def add(self, level: Level, reason: str, *, own: bool = True) -> None:
        if self.quiet is not None:
            reason = f"{self.quiet}: " + ("a command in it is never allowed" if level == "hardline" else
                                          "something in it needs approval")
        else:
            reason = self.prefix + reason
        self.ctx.findings.append(Finding(level, reason, self.subject if own else None))

    def write(self, word: Word, what: str, *, append: bool = False, glob_ok: bool = False,
              own_link: bool = False, own: bool = True) -> None:
        if word.text in HARMLESS_SINKS or word.text.startswith("/dev/fd/"):
            return
        if BLOCK_DEVICE.match(word.text):
            self.add("hardline", f"writes straight onto the disk device {word.text}")
            return
        prefix = f"{self.quiet}: " if self.quiet is not None else self.prefix
        self.ctx.writes.append(_Write(word, what, prefix, append, glob_ok, own_link, self.subject if own else None,
                                      quiet=self.quiet is not None, links_before=self.ctx.links))

    def nested(self, how: str, *, feed: Feed | Inherit | None = SAME, positional: list[Word] | Inherit | None = SAME,
               quiet: str | None = None) -> Checker | None:
        if self.depth >= MAX_DEPTH:
            self.add("dangerous", f"{how} nests commands too deeply to check", own=False)
            return None
        child = Checker(self.ctx, self.depth + 1, f"{self.prefix}{how}: ",
                        feed=self.cur_feed if feed is SAME else feed,
                        positional=self.positional if positional is SAME else positional,
                        quiet=self.quiet or quiet)
        child.owner = self.owner
        return child

    # ---- handing code on ---------------------------------------------------------------------------

    def run_text(self, text: str, how: str, *, feed: Feed | Inherit | None = SAME,
                 positional: list[Word] | Inherit | None = SAME, quiet: bool = False) -> None:
        child = self.nested(how, feed=feed, positional=positional, quiet=self.prefix + how if quiet else None)
        if child is not None:
            child.script(text)

    def run_word(self, word: Word, how: str, *, positional: list[Word] | Inherit | None = SAME) -> None:
        if word.dynamic:
            self.add("dangerous", f"{how} runs a command that is only known at run time", own=False)
            before = len(self.ctx.reads)
            values = self.values(word) or []
            for value in values:  # a value read from a file is that file's code: never quoted
                self.run_text(value, how, positional=positional, quiet=len(self.ctx.reads) > before)
        else:
            self.run_text(word.text, how, positional=positional)

    def run_argv(self, words: list[Word], how: str, *, feed: Feed | Inherit | None = SAME) -> None:
        child = self.nested(how, feed=feed)
        if child is not None and words:
            child.argv(words, child.feed)

    def code_effects(self, lang: str, text: str, owner: int | None = None) -> list[Effect]:
        if lang == "sed":
            return code_mod.sed(text)
        if lang in ("python", "perl", "ruby", "node", "php", "lua") and re.search(r"\b(sym)?link", text):
            self.ctx.links += 1
        if lang != "awk":
            self.ctx.opaque.add(self.owner if owner is None else owner)
        return code_mod.script(lang, text)

    def run_code(self, lang: str, text: str, how: str, owner: int | None = None, *,
                 feed: Feed | Inherit | None = SAME, quiet: str | None = None, base: str | None = None,
                 positional: list[Word] | Inherit | None = SAME) -> None:
        if lang == "shell":
            child = self.nested(how, feed=feed, positional=positional, quiet=quiet)
            if child is not None:
                child.owner = self.owner if owner is None else owner
                child.script(text)
            return
        effects = self.code_effects(lang, text, owner)
        target: Checker = self
        if quiet is not None and self.quiet is None:
            target = Checker(self.ctx, self.depth, self.prefix, feed=self.cur_feed, positional=self.positional,
                             quiet=quiet)
            target.owner = self.owner if owner is None else owner
        target.apply_effects(effects, how, base=base, lang=lang)

    def apply_effects(self, effects: list[Effect], how: str, *, base: str | None = None,
                      lang: str | None = None) -> None:
        for e in effects:
            feed: Feed | Inherit | None = UNKNOWN_INPUT if e.piped else SAME
            if e.kind == "shell":
                self.run_text(e.text, how, feed=feed)
            elif e.kind == "argv":
                self.run_argv(e.argv, how, feed=feed)
            elif e.kind == "delete":
                self.run_argv([Word("rm"), Word("-rf" if e.recursive else "-f"), Word("--"), Word(e.text)], how)
            elif e.kind == "write":
                self.write(Word(e.text), f"{how} writes", own=False)
            elif e.kind == "links":
                self.ctx.links += 1
            elif e.kind == "sql":
                self.run_sql(e.text, how)
            elif e.kind == "import":
                self.load_module(e.text, lang or "python", base, how)
            elif e.kind == "hardline":
                self.add("hardline", e.text, own=False)
            else:
                self.add("dangerous", e.text, own=False)

    def load_module(self, spec: str, lang: str, base: str | None, how: str) -> None:
        """A module the code imports from the workspace is code it runs: read it too."""
        base = base or self.ctx.cwd
        if lang == "node":
            if spec.startswith("node:") or spec in _NODE_CORE:
                return
            if not spec.startswith(("./", "../", "/")):
                self.add("dangerous", f"{how} loads the package {spec}, whose code is not checked here", own=False)
                return
            files = node_module_files(spec, base) if base else []
        else:
            rel = len(spec) - len(spec.lstrip("."))
            bases = [base] if base else []
            if not rel:
                bases += [p for p in (self.ctx.vars.get("PYTHONPATH") or [""])[0].split(":") if p.startswith("/")]
            files = python_module_files(spec.lstrip("."), bases) if rel <= 1 else []
        for f in files:
            if f in self.ctx.modules or len(self.ctx.modules) > 32:
                continue
            self.ctx.modules.add(f)
            self.run_file(Word(f), lang, f"{how} imports {spec}")

    def run_sql(self, text: str, how: str) -> None:
        for reason in sql_mod.problems(text):
            self.add("dangerous", f"{how}: {reason}", own=False)
        for cmd in sql_mod.shell_escapes(text):
            self.run_text(cmd, f"{how} shell escape")

    # ---- files -------------------------------------------------------------------------------------

    def read_file(self, word: Word) -> tuple[bytes | None, str]:
        """The bytes of a script or input file named on the line, or None and why not."""
        proc = word.procsub
        if proc is not None:
            raw = proc.text.decode("utf-8", "replace") if proc.text is not None else ""
            data = self.static_output(raw[2:-1])
            return (data, "") if data is not None else (None, f"{word.text[:40]} is only known at run time")
        if word.dynamic or word.glob:
            return None, f"{word.text} is only known at run time"
        text = word.text
        if text.startswith("~"):
            return None, f"{word.text} is outside the workspace"
        if not posixpath.isabs(text):
            if self.ctx.cwd is None:
                return None, f"{word.text} cannot be read here"
            if any(m is not self.current for m in self.movers):
                return None, f"{word.text} is run from a directory this command changes"
            text = posixpath.join(self.ctx.cwd, text)
        data, real, why = open_inside(text, self.ctx.read_root)
        if data is None:
            return None, f"{word.text} {why}"
        self.ctx.reads.append((real, word.text, self.prefix))
        return data, ""

    def stdin_data(self, feed: Feed | None) -> bytes | None:
        return feed_bytes(feed, lambda w: self.read_file(w)[0])

    def run_file(self, word: Word, lang: str | None, how: str, *, feed: Feed | Inherit | None = SAME,
                 args: list[Word] | None = None) -> None:
        if word.text in STDIN_NAMES and not word.dynamic:
            self.stdin_code(how, lang or "shell", self.cur_feed if feed is SAME else feed)
            return
        before = len(self.ctx.reads)
        data, why = self.read_file(word)
        if data is None:
            self.add("dangerous", f"{how}: runs a script that cannot be checked ({why})", own=False)
            return
        if b"\0" in data[:4096]:
            self.add("dangerous", f"{how}: runs a program that is not a script", own=False)
            return
        text = data.decode("utf-8", "replace")
        if lang is None:
            lang = script_lang(text, word.text)
            if lang is None:
                self.add("dangerous", f"{how}: runs a script whose interpreter is not known here", own=False)
                return
        read = len(self.ctx.reads) > before
        base = posixpath.dirname(self.ctx.reads[-1][0]) if read else self.ctx.cwd
        positional: list[Word] | Inherit | None = [word, *args] if args is not None else SAME
        self.run_code(lang, text, how, owner=len(self.ctx.reads) - 1 if read else None, feed=feed,
                      quiet=self.prefix + how if read else None, base=base, positional=positional)

    def static_output(self, text: str) -> bytes | None:
        m = re.fullmatch(r"\s*<\s*(\S+)\s*", text)  # $(<file)
        if m:
            return self.read_file(Word(m.group(1)))[0]
        script = parse(clean(text))
        cmds = script.commands
        if script.broken or not cmds:
            return None
        last, chain = cmds[-1], 1
        feed = last.feed
        while feed is not None and feed.kind == "pipe" and feed.stage and len(feed.stage) == 1:
            chain += 1
            feed = feed.stage[0].feed
        if chain != len(cmds):
            return None
        return output(last, lambda w: self.read_file(w)[0])

    # ---- scripts and commands ----------------------------------------------------------------------

    def script(self, text: str) -> None:
        text = clean(text)
        parsed = parse(text)
        self.ctx.unordered |= parsed.unordered or bool(parsed.functions) or any(
            c.words and c.words[0].text == "trap" for c in parsed.commands)
        for fn in parsed.functions:
            self.ctx.functions[fn.name] = fn.body
            if fn.bomb:
                self.add("hardline", "a fork bomb (a function that runs itself in a pipe or in the background)",
                         own=False)
        self.movers = _movers(parsed)
        for c in parsed.commands:
            if [w.text for w in c.words] == ["exec"]:
                self.exec_redirects(c.redirects)
        if parsed.broken:
            self.add("dangerous", "the command could not be parsed", own=False)
            self.fallback(text)
        for cmd in parsed.commands:
            self.current = cmd
            self.command(cmd)
        self.current = None
        self.subject = None
        for r in parsed.redirects:
            self.redirect(r)

    def exec_redirects(self, redirects: list[Redirect]) -> None:
        """``exec <file``, ``exec 3<file``, ``exec 0<&3``: what later commands read on those descriptors."""
        for r in redirects:
            fd = r.fd or ("0" if r.op.startswith("<") else "1")
            if r.body is not None:
                self.ctx.fds[fd] = Feed("text", r.body, r.body_static)
            elif r.op in ("<", "<>") and r.target is not None:
                self.ctx.fds[fd] = Feed("file", file=r.target)
            elif r.op == "<&" and r.target is not None:
                self.ctx.fds[fd] = self.ctx.fds.get(r.target.text, UNKNOWN_INPUT)

    def effective_feed(self, feed: Feed | None) -> Feed | None:
        if feed is None:
            return self.ctx.fds.get("0", self.feed)
        if feed.kind == "dup" and feed.file is not None:
            fd = feed.file.text
            if fd == "-":
                return None
            if fd == "0":
                return self.ctx.fds.get("0", self.feed)
            return self.ctx.fds.get(fd, UNKNOWN_INPUT)
        return feed

    def fallback(self, text: str) -> None:
        """Best effort on text the parser rejects, so that hardline stays hardline (``{rm,-rf,/}``)."""
        try:
            lex = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
            lex.whitespace_split = True
            tokens = list(lex)
        except ValueError:
            tokens = text.split()
        segment: list[str] = []
        skip = False
        for tok in [*tokens, ";"]:
            if tok and set(tok) <= set(";&|()<>"):
                if segment:
                    words = [Word(t) for raw in segment for t in expand_braces(raw)]
                    self.argv(words, None)
                segment, skip = [], set(tok) <= set("<>")
                continue
            if skip:
                skip = False
                continue
            segment.append(tok)

    def redirect(self, r: Redirect) -> None:
        if r.target is None or r.body is not None:
            return
        t = r.target.text
        if r.op in (">&", "<&") and (t.isdigit() or t in ("-", "")) and not r.target.dynamic:
            return
        if r.op in (">", ">|", "&>", ">&", "<>"):
            self.write(r.target, "> overwrites", own=False)
        elif r.op in (">>", "&>>"):
            self.write(r.target, ">> appends to", append=True, own=False)

    def command(self, cmd: Command) -> None:
        feed = self.effective_feed(cmd.feed)
        self.cur_feed = feed
        self.subject = None
        for r in cmd.redirects:
            self.redirect(r)
        for key, value in cmd.assigns:
            self.assignment(key, value)
            self.subscript_code(value, f"the value of {key}")
            if not cmd.words or cmd.declaration:
                known = self.values(value)
                old = self.ctx.vars.get(key, [])
                self.ctx.vars[key] = None if known is None or (key in self.ctx.vars and old is None) else \
                    list(dict.fromkeys([*(old or []), *known]))
        words = cmd.words
        if cmd.declaration:
            if words and not words[0].dynamic:
                self.program_options(words[0].text, words[1:])
            self.declaration(words)
            return
        if not words:
            return
        self.prompt_expansions(words)
        if any(w.dynamic for w in words) and self.depth < MAX_DEPTH:
            before = len(self.ctx.reads)
            texts = self.fill(words)
            quiet = f"{self.prefix}with values read from a file" if len(self.ctx.reads) > before else None
            for text in texts:
                child = self.nested("with its values filled in", quiet=quiet)
                if child is not None:
                    child.prefix = self.prefix
                    child.script(text)
        head = words[0]
        if not head.dynamic and head.text in self.ctx.aliases and self.depth < MAX_DEPTH:
            rest = "".join(" " + (quote(w.text) if not w.dynamic else w.text) for w in words[1:])
            self.run_text(self.ctx.aliases[head.text] + rest, f"alias {head.text}")
            return
        if not head.dynamic and head.text in self.ctx.functions:
            if len(words) > 1:  # the body was checked where it stands; again with these arguments
                self.run_text(self.ctx.functions[head.text], f"function {head.text}", positional=list(words))
            return
        self.argv(words, feed, cmd.assigns)

    def argv(self, words: list[Word], feed: Feed | None, assigns: list[tuple[str, Word]] | tuple = ()) -> None:
        """One simple command, given its words: wrappers peeled, then the rules by name."""
        self.cur_feed = feed
        self.env_assigns = list(assigns)
        self.subject = canonical(words, assigns)
        path_head = False
        while words:
            head = words[0]
            if head.dynamic:
                self.dynamic_head(words)
                return
            if head.glob:
                self.add("dangerous", "the command name is a glob pattern")
                return
            name = posixpath.basename(head.text)
            if "/" in head.text and posixpath.dirname(posixpath.normpath(head.text)) not in _STD_BIN:
                self.run_file(head, None, f"runs {head.text}", args=words[1:])
                path_head = True
            if name not in WRAPPERS:
                break
            self.program_options(name, words[1:])
            inner = self.unwrap(name, words[1:])
            if inner is None:
                return
            words = inner
            self.subject = canonical(words, self.env_assigns)
            path_head = False
        if not words:
            return
        name = posixpath.basename(words[0].text)
        args = words[1:]
        if not self.dispatch(name, args) and not path_head:
            self.add("dangerous", f"{name} is not a program this classifier knows to be harmless")

    def dispatch(self, name: str, args: list[Word]) -> bool:
        """Runs the option check and the rules for ``name``; False when no rule knows the program. A program a
        rule knows but the option tables do not asks: its options would go unchecked."""
        tabled = self.program_options(name, args)
        rule = getattr(self, "cmd_" + re.sub(r"\W", "_", name), None) if _RULE_NAME.fullmatch(name) else None
        if rule is not None:
            rule(args)
            self.by_kind(name, args)
            known = True
        else:
            known = self.by_kind(name, args) or self.known(name, args)
        if known and not tabled:
            self.add("dangerous", f"{name}: the classifier has no table of its options")
        return known

    def dynamic_head(self, words: list[Word]) -> None:
        self.add("dangerous", "the command to run is only known at run time")
        flags = [w.text for w in words[1:] if w.text.startswith("-") and not w.dynamic]
        recursive = any(f == "--recursive" or (not f.startswith("--") and ("r" in f or "R" in f)) for f in flags)
        for w in words[1:]:
            why = None if w.text.startswith("-") else critical(w)
            if recursive and why is not None:
                self.add("hardline", f"a command only known at run time, with -r, on {why}")
                return

    def here(self) -> list[str | None]:
        """Directories a relative path may be resolved from at this point of the line (None: unknown)."""
        dirs: list[str | None] = [self.ctx.cwd]
        for cd in self.ctx.cds:
            if cd is None or cd.dynamic:
                dirs.append(None)
            elif cd.text.startswith("~") or posixpath.isabs(cd.text):
                dirs.append(posixpath.normpath(cd.text) if posixpath.isabs(cd.text) else cd.text)
            else:
                last = next((d for d in reversed(dirs) if d is not None), None)
                dirs.append(posixpath.normpath(posixpath.join(last, cd.text)) if last else None)
        return dirs

    def finish(self) -> None:
        finish(self.ctx)


def check(command: str, workspace: str | None, cwd: str | None) -> tuple[Level, str | None, list[Finding]]:
    """The worst finding for a command line, its reason, and every finding."""
    ws = os.path.realpath(workspace) if workspace else None
    if ws is not None and (critical(ws) is not None or ws == os.path.realpath(os.path.expanduser("~"))):
        ws = None  # a workspace that is the system or the home directory exempts nothing
    ctx = Context(ws, cwd if cwd is None or posixpath.isabs(cwd) else None)
    if ctx.cwd is None and ws is not None:
        ctx.cwd = ws
    ctx.read_root = read_root(ws, ctx.cwd)
    # The terminal runs ``bash -c``: $0 is bash and there are no other positional parameters.
    checker = Checker(ctx, positional=[Word("bash")])
    try:
        checker.script(command)
        checker.finish()
    except Exception as exc:
        # Fail closed, and keep what was found so far: an error must not turn hardline into approvable.
        why = "nests too deeply" if isinstance(exc, RecursionError) else f"hit {type(exc).__name__}"
        ctx.findings.append(Finding("dangerous", f"the command could not be checked (it {why})", None))
        try:
            Checker(ctx, MAX_DEPTH - 1).fallback(clean(command))
        except Exception:
            ctx.findings.append(Finding("dangerous", "the command could not be checked", None))
    worst: Finding | None = None
    for f in ctx.findings:
        if worst is None or RANK[f.level] > RANK[worst.level]:
            worst = f
    if worst is None:
        return "safe", None, []
    return worst.level, worst.reason, list(ctx.findings)
