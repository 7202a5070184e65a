"""The walk: every simple command of a script, through wrappers, interpreters, aliases and script files.

Boundaries (on purpose): a script file named on the command line (``bash x.sh``, ``./x.sh``, ``. x.sh``,
``python x.py``) is read and classified when it is a small readable regular file under the working
directory; otherwise running it needs approval. Build and test runners (``make``, ``pytest``,
``npm test``, ``cargo``) run project code without being read here: they run inside the sandbox, which is
the boundary for code that is not on the command line.

Writes are collected and decided at the end (``finish``), when every ``cd`` of the line is known: a
target resolving inside the workspace does not ask; one outside, or only known at run time, does.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex

from tree_sitter import Node

from tools.shell import code as code_mod
from tools.shell import sql as sql_mod
from tools.shell.code import Effect
from tools.shell.engine import Context, Level, _Write
from tools.shell.parse import Command, Redirect, Script, Word, clean, expand_braces, parse
from tools.shell.paths import BLOCK_DEVICE, HARMLESS_SINKS, critical, inside, plainly_outside
from tools.shell.rules import Rules, sh_quote
from tools.shell.runners import _WRAPPERS, Runners, _script_lang
from tools.shell.static import output

RANK = {"safe": 0, "dangerous": 1, "hardline": 2}
MAX_DEPTH = 8
SCRIPT_LIMIT = 256 * 1024

_STD_BIN = frozenset({"/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"})
_PROGRAM_VARS = frozenset({"PAGER", "GIT_PAGER", "MANPAGER", "SYSTEMD_PAGER", "EDITOR", "VISUAL", "GIT_EDITOR",
                           "GIT_SEQUENCE_EDITOR", "GIT_SSH_COMMAND", "GIT_SSH", "GIT_ASKPASS", "SSH_ASKPASS",
                           "SUDO_ASKPASS", "GIT_EXTERNAL_DIFF", "PROMPT_COMMAND", "GIT_PROXY_COMMAND",
                           "RSYNC_RSH", "BROWSER", "LESSOPEN", "LESSCLOSE", "PS1", "PS2", "PS4"})
_OPAQUE_VARS = frozenset({"LD_PRELOAD", "LD_AUDIT", "PERL5OPT", "PERL5DB", "RUBYOPT", "NODE_OPTIONS",
                          "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
                          "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR", "SHELLOPTS", "BASHOPTS", "PYTHONSTARTUP",
                          "PYTHONINSPECT"})
_FORK_BOMB = re.compile(r"([\w:.]+)\s*\(\s*\)\s*\{[^}]*\1\s*\|\s*\1\s*&")
_FORK_BOMB_FN = re.compile(r"\bfunction\s+([\w:.]+)\s*(?:\(\s*\))?\s*\{[^}]*\1\s*\|\s*\1\s*&")


def _movers(script: Script) -> list[Command]:
    """Commands that may change the working directory for the others (a sourced file or eval may cd)."""
    found = []
    for c in script.commands:
        name = posixpath.basename(c.words[0].text) if c.words else ""
        chdir_opt = name in ("env", "sudo") and any(w.text.startswith(("-C", "--chdir", "-D")) for w in c.words[1:])
        if chdir_opt or name in ("cd", "pushd", "popd", "eval", "source", ".", "alias") or any(
                k == "CDPATH" for k, _ in c.assigns):
            found.append(c)
    return found


class Checker(Rules, Runners):
    def __init__(self, ctx: Context, depth: int = 0, prefix: str = "") -> None:
        self.ctx = ctx
        self.depth = depth
        self.prefix = prefix
        self.movers: list[Command] = []
        self.current: Command | None = None
        self.owner = -1  # which read script's code this checker is looking at (-1: the line itself)

    # ---- reporting ---------------------------------------------------------------------------------

    def add(self, level: Level, reason: str) -> None:
        self.ctx.findings.append((level, self.prefix + reason))

    def write(self, word: Word, what: str, *, append: bool = False, glob_ok: bool = False,
              own_link: bool = False) -> None:
        if word.text in HARMLESS_SINKS or word.text.startswith("/dev/fd/"):
            return
        if BLOCK_DEVICE.match(word.text):
            self.add("hardline", f"writes straight onto the disk device {word.text}")
            return
        self.ctx.writes.append(_Write(word, what, self.prefix, append, glob_ok, own_link))

    def nested(self, how: str) -> Checker | None:
        if self.depth >= MAX_DEPTH:
            self.add("dangerous", f"{how} nests commands too deeply to check")
            return None
        child = Checker(self.ctx, self.depth + 1, f"{self.prefix}{how}: ")
        child.owner = self.owner
        return child

    # ---- handing code on ---------------------------------------------------------------------------

    def run_text(self, text: str, how: str) -> None:
        child = self.nested(how)
        if child is not None:
            child.script(text)

    def run_word(self, word: Word, how: str) -> None:
        if word.dynamic:
            self.add("dangerous", f"{how} runs a command that is only known at run time")
            resolved = self.resolve(word)
            if resolved is not None:
                self.run_text(resolved, how)
        else:
            self.run_text(word.text, how)

    def resolve(self, word: Word) -> str | None:
        """A dynamic word's value when the line itself fixes it: ``$X`` after ``X=rm``, or ``$(echo ... |
        base64 -d)``. Only ever used to find worse verdicts; the dynamic reading still stands."""
        m = re.fullmatch(r"\$(\w+)|\$\{(\w+)(?:\[[@*0]\])?\}", word.text)
        if m:
            return self.ctx.vars.get(m.group(1) or m.group(2))
        if len(word.subs) == 1 and word.subs[0].type == "command_substitution":
            inner = self.source_text(word.subs[0])
            if word.text != inner:
                return None
            body = inner[2:-1] if inner.startswith("$(") else inner[1:-1]
            data = self.static_output(body)
            return data.decode("utf-8", "replace").rstrip("\n") if data is not None else None
        return None

    def run_argv(self, words: list[Word], how: str) -> None:
        child = self.nested(how)
        if child is not None and words:
            child.argv(words, None)

    def code_effects(self, lang: str, text: str, owner: int | None = None) -> list[Effect]:
        if lang == "sed":
            return code_mod.sed(text)
        if lang in ("python", "perl", "ruby", "node", "php", "lua") and re.search(r"\b(sym)?link", text):
            self.ctx.links += 1
        if lang != "awk":
            self.ctx.opaque.add(self.owner if owner is None else owner)
        return code_mod.script(lang, text)

    def run_code(self, lang: str, text: str, how: str, owner: int | None = None) -> None:
        if lang == "shell":
            child = self.nested(how)
            if child is not None:
                child.owner = self.owner if owner is None else owner
                child.script(text)
        else:
            self.apply_effects(self.code_effects(lang, text, owner), how)

    def apply_effects(self, effects: list[Effect], how: str) -> None:
        for e in effects:
            if e.kind == "shell":
                self.run_text(e.text, how)
            elif e.kind == "argv":
                self.run_argv(e.argv, how)
            elif e.kind == "delete":
                argv = [Word("rm"), Word("-rf" if e.recursive else "-f"), Word("--"), Word(e.text)]
                self.run_argv(argv, how)
            elif e.kind == "write":
                self.write(Word(e.text), f"{how} writes")
            elif e.kind == "sql":
                self.run_sql(e.text, how)
            elif e.kind == "hardline":
                self.add("hardline", e.text)
            else:
                self.add("dangerous", e.text)

    def run_sql(self, text: str, how: str) -> None:
        for reason in sql_mod.problems(text):
            self.add("dangerous", f"{how}: {reason}")
        for cmd in sql_mod.shell_escapes(text):
            self.run_text(cmd, f"{how} shell escape")

    # ---- files -------------------------------------------------------------------------------------

    def read_file(self, word: Word) -> tuple[bytes | None, str]:
        """The bytes of a script or input file named on the line, or None and why not."""
        proc = word.procsub
        if proc is not None:
            data = self.static_output(self.source_text(proc)[2:-1])
            return (data, "") if data is not None else (None, f"{word.text[:40]} is only known at run time")
        if word.dynamic or word.glob:
            return None, f"{word.text} is only known at run time"
        text = word.text
        if text.startswith("~"):
            text = os.path.expanduser(text)
        if not posixpath.isabs(text):
            if self.ctx.cwd is None:
                return None, f"{word.text} cannot be read here"
            if any(m is not self.current for m in self.movers):
                return None, f"{word.text} is run from a directory this command changes"
            text = posixpath.join(self.ctx.cwd, text)
        try:
            real = os.path.realpath(text)
            st = os.stat(real)
            if not os.path.isfile(real) or st.st_size > SCRIPT_LIMIT:
                return None, f"{word.text} is not a small regular file"
            with open(real, "rb") as f:
                data = f.read(SCRIPT_LIMIT + 1)
        except OSError:
            return None, f"{word.text} cannot be read"
        self.ctx.reads.append((real, word.text, self.prefix))
        return data, ""

    def run_file(self, word: Word, lang: str | None, how: str) -> None:
        data, why = self.read_file(word)
        if data is None:
            self.add("dangerous", f"{how}: runs a script that cannot be checked ({why})")
            return
        if b"\0" in data[:4096]:
            self.add("dangerous", f"{how}: runs a program that is not a script")
            return
        text = data.decode("utf-8", "replace")
        if lang is None:
            lang = _script_lang(text, word.text)
            if lang is None:
                self.add("dangerous", f"{how}: runs a script whose interpreter is not known here")
                return
        self.run_code(lang, text, how, owner=len(self.ctx.reads) - 1)

    @staticmethod
    def source_text(node: Node) -> str:
        return node.text.decode("utf-8", "replace") if node.text is not None else ""

    def static_output(self, text: str) -> bytes | None:
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
        compact = re.sub(r"\s+", " ", text)
        if _FORK_BOMB.search(compact) or _FORK_BOMB_FN.search(compact):
            self.add("hardline", "a fork bomb")
        parsed = parse(text)
        self.movers = _movers(parsed)
        if parsed.broken:
            self.add("dangerous", "the command could not be parsed")
            self.fallback(text)
        for cmd in parsed.commands:
            self.current = cmd
            self.command(cmd)
        self.current = None
        for r in parsed.redirects:
            self.redirect(r)

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
            self.write(r.target, "> overwrites")
        elif r.op in (">>", "&>>"):
            self.write(r.target, ">> appends to", append=True)

    def command(self, cmd: Command) -> None:
        for r in cmd.redirects:
            self.redirect(r)
        for key, value in cmd.assigns:
            self.assignment(key, value)
            if not cmd.words or cmd.declaration:
                known = value.text if not value.dynamic else self.resolve(value)
                if key in self.ctx.vars and self.ctx.vars[key] != known:
                    known = None
                self.ctx.vars[key] = known
        if cmd.declaration:
            return
        words = cmd.words
        if not words:
            return
        if any(w.dynamic for w in words) and self.depth < MAX_DEPTH:
            values = [self.resolve(w) if w.dynamic else sh_quote(w.text) for w in words]
            if any(v is not None for v in values) and values[0] is not None:
                text = " ".join(v if v is not None else w.text for v, w in zip(values, words, strict=True))
                child = self.nested("with its values filled in")
                if child is not None:
                    child.prefix = self.prefix
                    child.script(text)
        head = words[0]
        if not head.dynamic and head.text in self.ctx.aliases and self.depth < MAX_DEPTH:
            rest = "".join(" " + (sh_quote(w.text) if not w.dynamic else w.text) for w in words[1:])
            self.run_text(self.ctx.aliases[head.text] + rest, f"alias {head.text}")
            return
        self.argv(words, cmd)

    def assignment(self, key: str, value: Word) -> None:
        if key in _PROGRAM_VARS:
            self.run_word(value, key)
        elif key in ("BASH_ENV", "ENV"):
            self.run_file(value, "shell", key)
        elif key in _OPAQUE_VARS:
            self.add("dangerous", f"{key} makes programs load or run other code")
        elif key == "CDPATH":
            self.ctx.cds.append(None)
        elif key == "PATH" and any(p in ("", ".") or not p.startswith(("/", "$")) for p in value.text.split(":")):
            self.add("dangerous", "PATH with a relative directory runs commands from here")

    def argv(self, words: list[Word], cmd: Command | None) -> None:
        """One simple command, given its words: wrappers peeled, then the rules by name."""
        while words:
            head = words[0]
            if head.dynamic:
                self.add("dangerous", "the command to run is only known at run time")
                return
            if head.glob:
                self.add("dangerous", "the command name is a glob pattern")
                return
            name = posixpath.basename(head.text)
            if "/" in head.text and posixpath.dirname(posixpath.normpath(head.text)) not in _STD_BIN:
                self.run_file(head, None, f"runs {head.text}")
            if name not in _WRAPPERS:
                break
            inner = self.unwrap(name, words[1:])
            if inner is None:
                return
            words, cmd = inner, None
        if not words:
            return
        name = posixpath.basename(words[0].text)
        args = words[1:]
        rule = getattr(self, "cmd_" + re.sub(r"\W", "_", name), None)
        if rule is not None:
            rule(args)
        self.by_kind(name, args, cmd)

    def finish(self) -> None:
        ctx = self.ctx
        base = ctx.cwd or ctx.workspace
        ws = ctx.workspace
        mode = "exact"
        cwds = [base] if base else []
        for cd in ctx.cds:
            if cd is None or base is None or cd.text.startswith(("~", "-")) or cd.glob:
                mode = "unknown"
                break
            target = posixpath.normpath(posixpath.join(base, cd.text))
            if ws is None or not posixpath.isabs(target) or not inside(cd, base, ws) or (
                    not cd.text.startswith("/") and posixpath.normpath(cd.text).startswith("..")):
                mode = "unknown"
                break
            mode = "inside"
            cwds.append(target)
        for w in ctx.writes:
            text = w.word.text
            relative = not w.word.dynamic and not plainly_outside(text)
            links_elsewhere = ctx.links - (1 if w.own_link else 0) > 0
            if ws is not None and base is not None and not links_elsewhere and not w.word.dynamic:
                if text.startswith("/") or mode == "exact":
                    if inside(w.word, base, ws, glob_ok=w.glob_ok):
                        continue
                elif mode == "inside" and relative and all(inside(w.word, c, ws, glob_ok=w.glob_ok) for c in cwds):
                    continue
            if w.append and relative and mode != "unknown":
                continue
            where = "" if not w.word.dynamic else " (a path only known at run time)"
            ctx.findings.append(("dangerous", f"{w.prefix}{w.what} {text or 'a file'}{where}"))
        self.recheck_reads()

    def recheck_reads(self) -> None:
        """A script read here must not be one this very line writes first (``echo ... > x.sh; bash x.sh``)."""
        ctx = self.ctx
        if not ctx.reads:
            return
        written: list[str] = []
        unknown = bool(ctx.cds)
        for w in ctx.writes:
            if w.word.dynamic or w.word.glob:
                unknown = True
            elif w.word.text.startswith("/"):
                written.append(os.path.realpath(w.word.text))
            elif ctx.cwd is not None:
                written.append(os.path.realpath(posixpath.join(ctx.cwd, w.word.text)))
        for i, (real, shown, prefix) in enumerate(ctx.reads):
            if unknown or ctx.opaque - {i} or any(real == p or real.startswith(p.rstrip("/") + "/") for p in written):
                ctx.findings.append(("dangerous", f"{prefix}runs {shown}, which this command may change first"))


def check(command: str, workspace: str | None, cwd: str | None) -> tuple[Level, str | None]:
    """The worst finding for a command line, and its reason."""
    ws = os.path.realpath(workspace) if workspace else None
    if ws is not None and (critical(ws) is not None or ws == os.path.realpath(os.path.expanduser("~"))):
        ws = None  # a workspace that is the system or the home directory exempts nothing
    ctx = Context(ws, cwd if cwd is None or posixpath.isabs(cwd) else None)
    if ctx.cwd is None and ws is not None:
        ctx.cwd = ws
    checker = Checker(ctx)
    try:
        checker.script(command)
        checker.finish()
    except Exception as exc:
        # Fail closed, and keep what was found so far: an error must not turn hardline into approvable.
        why = "nests too deeply" if isinstance(exc, RecursionError) else f"hit {type(exc).__name__}"
        ctx.findings.append(("dangerous", f"the command could not be checked (it {why})"))
        try:
            Checker(ctx, MAX_DEPTH - 1).fallback(clean(command))
        except Exception:
            ctx.findings.append(("dangerous", "the command could not be checked"))
    worst: tuple[Level, str] | None = None
    for f in ctx.findings:
        if worst is None or RANK[f[0]] > RANK[worst[0]]:
            worst = f
    return worst if worst is not None else ("safe", None)
