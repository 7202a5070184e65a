"""Commands that run other commands or code: wrappers, shells, interpreters, database clients.

A wrapper (sudo, env, nohup, timeout, xargs...) is peeled and what it runs is checked as if it stood
alone, with the same standard input (xargs: the items it reads are the arguments); ``sudo`` and friends
also ask. A shell or an interpreter runs code from ``-c``/``-e``, from a script file (with its
arguments as positional parameters), or from standard input: literal code is checked recursively, code
only known at run time needs approval, and so do options that load code from elsewhere (``ruby -r``,
``lua -l``, ``perl -I``, ``php -d``, ``node -r``). Database clients get their SQL checked (``sql.py``).
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tools.shell.engine import UNKNOWN_INPUT
from tools.shell.options import Opts, parse_opts
from tools.shell.parse import Feed, Word
from tools.shell.projects import Projects
from tools.shell.reading import LANGS, SHELLS, python_user_site
from tools.shell.rules import sh_quote
from tools.shell.tables_run import WRAPPER_TABLES

if TYPE_CHECKING:
    from tools.shell.engine import Engine

    class _Base(Engine, Projects):  # what the mixins of the walk provide each other
        pass
else:
    _Base = Projects

_DB_CLIENTS = frozenset({"psql", "mysql", "mariadb", "sqlite3", "sqlite", "sqlcmd", "duckdb", "clickhouse-client",
                         "clickhouse", "cockroach", "pgcli", "mycli", "litecli", "usql"})
# name -> what follows its options (their arity is in the option tables, ``tables_run.WRAPPER_TABLES``)
WRAPPERS: dict[str, str] = {
    "sudo": "root", "doas": "root", "run0": "root", "pkexec": "root", "env": "env", "nice": "", "nohup": "",
    "timeout": "skip1", "stdbuf": "", "ionice": "", "setsid": "", "time": "", "exec": "", "command": "command",
    "builtin": "", "chrt": "skip1", "taskset": "skip1", "busybox": "", "toybox": "", "chroot": "skip1",
    "xargs": "xargs", "parallel": "xargs", "strace": "", "ltrace": "", "flock": "flock", "systemd-run": "outside",
    "unshare": "", "nsenter": "outside", "watch": "watch", "unbuffer": "", "caffeinate": "", "catchsegv": "",
    "fakeroot": "", "dbus-run-session": "", "xvfb-run": "", "firejail": "", "valgrind": "", "coproc": "",
    "then": "", "do": "", "else": "", "!": "", "{": "", "}": "",
}
# ``python -m`` modules that only read and print.
_PY_MODULES = frozenset({"json.tool", "this", "platform", "sysconfig", "site", "tokenize", "ast", "dis",
                         "calendar", "uuid", "base64", "quopri", "py_compile", "tabnanny", "pyclbr", "timeit",
                         "locale", "mimetypes", "sqlite3"})


@dataclass(frozen=True)
class _Interpreter:
    """How an interpreter's short options read: each string is a set of option letters."""

    code: str  # the value is code to run (``python -c CODE``)
    code_ends_options: bool = False  # what follows the code is the program's own argv
    arg: str = ""  # takes a value that is neither code nor a file to run (``python -W default``)
    loads_settings: str = ""  # of ``arg``: the value loads code or settings from elsewhere (``ruby -r``)
    chdir: str = ""  # of ``arg``: the value is the directory it runs in (``ruby -C DIR``)
    attached: str = ""  # the rest of the word is the option's own value (``perl -MPOSIX``)
    files: str = ""  # the value is a script to run (``awk -f FILE``)
    module: str = ""  # the value is a module to run (``python -m``)
    loads: str = ""  # the value is code loaded from elsewhere (``awk -i FILE``)
    in_place: str = ""  # edits its operands in place (``perl -i``)
    check: str = ""  # only checks the syntax (``ruby -c``; ``perl -c`` still runs BEGIN blocks)
    check_long: bool = False  # ``--check``, ``--syntax-check``, ``--version``, ``--help`` run nothing
    runs_project: tuple[str, ...] = ()  # options that run project code that is not on the command line
    program_operand: bool = False  # without code or a file, the first operand is the program


_INTERPRETERS = {
    "python": _Interpreter(code="c", code_ends_options=True, module="m", arg="WX"),
    "perl": _Interpreter(code="eE", in_place="i", arg="I", loads_settings="I", attached="MmxlF0dCDV"),
    "ruby": _Interpreter(code="e", in_place="i", arg="rICEF", loads_settings="rI", chdir="C",
                         attached="iWTKx0l", check="c"),
    "node": _Interpreter(code="ep", arg="r", loads_settings="r", check_long=True,
                         runs_project=("--test", "--run", "--watch")),
    "php": _Interpreter(code="rBRE", code_ends_options=True, files="f", arg="dcz", loads_settings="dc", check="l",
                        check_long=True, runs_project=("-S",)),
    "lua": _Interpreter(code="e", arg="l", loads_settings="l"),
    "awk": _Interpreter(code="e", files="f", loads="il", arg="vFE", program_operand=True),
}


@dataclass
class _InterpreterRun:
    """What an interpreter's command line runs."""

    codes: list[Word] = field(default_factory=list)
    files: list[Word] = field(default_factory=list)
    module: Word | None = None
    in_place: bool = False
    check_only: bool = False
    operands: list[Word] = field(default_factory=list)


class Runners(_Base):
    def unwrap(self, name: str, args: list[Word]) -> list[Word] | None:
        """What a wrapper runs (None: nothing more, or it was handed on already). Keeps ``cur_feed`` right."""
        then = WRAPPERS[name]
        spec = WRAPPER_TABLES[name]
        if name == "command" and args and args[0].text in ("-v", "-V"):
            return None
        if name == "coproc" and len(args) > 1 and args[1].text in ("{", "(", "((", "if", "while", "until", "for",
                                                                   "case", "[[", "select"):
            args = args[1:]  # ``coproc NAME { ...; }``: the name is not the command
        if name == "}":
            return None
        o = parse_opts(args, spec=spec)
        rest = o.operands
        if then == "root":
            if not rest and not o.has("-e", "--edit", "-s", "-i", "--shell", "--login"):
                return None  # sudo -l, -v, -k: nothing runs
            self.add("dangerous", f"runs a command as root ({name})")
            if o.has("-e", "--edit") or name == "sudoedit":
                return None
            if o.has("-s", "-i", "--shell", "--login") and rest:
                self.run_text(" ".join(w.text if w.dynamic else sh_quote(w.text) for w in rest), f"{name} -s")
                return None
        if then == "outside":
            self.add("dangerous", f"{name} runs a command outside this session")
        for w in o.value("-o", "--output") if name in ("time", "strace", "ltrace") else []:
            self.write(w, f"{name} -o writes")
        for w in o.value("-C", "--chdir", "-D", "--working-directory"):
            self.ctx.cds.append(w if not w.dynamic else None)
        if then == "env":
            for w in o.value("-S", "--split-string"):
                self.run_word(Word(" ".join([w.text, *(x.text for x in rest)]), w.dynamic), "env -S")
                return None
            if rest and rest[0].text == "-":  # ``env -`` is ``env -i``
                rest = rest[1:]
            while rest and "=" in rest[0].text and not rest[0].text.startswith("="):
                key, _, val = rest[0].text.partition("=")
                value = Word(val, rest[0].dynamic)
                self.assignment(key, value)
                self.env_assigns.append((key, value))
                rest = rest[1:]
        if then == "skip1" and not o.has("-p", "--pid"):
            rest = rest[1:]
        if then == "flock":
            # flock FILE -c CMD: the option may follow the lock file.
            tail = parse_opts(rest[1:], spec=spec)
            for w in [*o.value("-c", "--command"), *tail.value("-c", "--command")]:
                self.run_word(w, "flock -c")
            if tail.value("-c", "--command"):
                return None
            rest = rest[1:]
        if then == "watch":
            if rest:
                self.run_word(Word(" ".join(w.text for w in rest), any(w.dynamic for w in rest)), "watch")
            return None
        if then == "xargs":
            return self.xargs(o, rest)
        return rest

    def xargs(self, o: Opts, rest: list[Word]) -> list[Word] | None:
        """xargs runs its command with the items it reads appended (or put in for ``-I``): when the line fixes
        that input (``echo / | xargs rm -rf``), those are the arguments; else they are only known at run time."""
        files = o.value("-a", "--arg-file")
        before = len(self.ctx.reads)
        data = (self.read_file(files[0])[0] if files else self.stdin_data(self.cur_feed))
        self.cur_feed = None  # the command gets /dev/null as standard input
        if data is not None and len(self.ctx.reads) > before:  # items read from a file: never quoted
            child = self.nested("xargs", feed=None, quiet=f"{self.prefix}xargs with items read from a file")
            if child is not None and rest:
                child.argv(rest + [Word(x) for x in _items(data, o)], None)
            return None
        if not rest:
            return None
        items = _items(data, o) if data is not None else None
        repl = o.value("-I", "--replace", "-i") or ([Word("{}")] if o.has("-i", "--replace") else [])
        if repl:
            marker = repl[0].text or "{}"
            if not items:
                return [Word(w.text, True) if marker in w.text else w for w in rest]
            for item in items[1:]:
                self.run_argv([Word(w.text.replace(marker, item)) for w in rest], "xargs", feed=None)
            return [Word(w.text.replace(marker, items[0])) for w in rest]
        if items is None:
            return [*rest, Word("$XARGS_INPUT", dynamic=True)]
        return [*rest, *(Word(x) for x in items)]

    # ---- commands that run other code ----------------------------------------------------------------

    def by_kind(self, name: str, args: list[Word]) -> bool:
        base = re.sub(r"[\d.]+$", "", name)
        if name.startswith("mkfs") or name in ("mke2fs", "mkswap", "wipefs", "mkdosfs", "mkntfs"):
            self.add("hardline", f"{name} formats a disk")
        elif name in SHELLS or base in SHELLS:
            self.shell(name, args)
        elif name in LANGS or base in LANGS:
            self.interpreter(name, LANGS.get(name) or LANGS[base], args)
        elif name in _DB_CLIENTS:
            self.database(name, args)
        elif name == "herald":
            self.add("dangerous", "the herald CLI changes Herald's own state")
        elif name in ("eval", "trap"):
            if name == "trap" and (not args or args[0].text in ("-l", "-p", "-", "")):
                return True
            code = args[:1] if name == "trap" else args
            if code:
                self.run_word(Word(" ".join(w.text for w in code), any(w.dynamic for w in code)), name)
        elif name in ("source", "."):
            if args:
                self.run_file(args[0], "shell", name, args=args[1:] if len(args) > 1 else None)
        elif name == "alias":
            self.alias(args)
        elif name in ("cd", "pushd", "popd"):
            self.ctx.cds.append(args[-1] if name == "cd" and args and not args[-1].dynamic
                                and args[-1].text != "-" else None)
        elif name in ("su", "runuser", "script", "ssh", "sg"):
            self.other_user(name, args)
        elif name in ("crontab", "at", "batch"):
            if not (name == "crontab" and any(a.text == "-l" for a in args)):
                self.add("dangerous", f"{name} schedules commands to run later")
        else:
            return self.project(name, args)
        return True

    def alias(self, args: list[Word]) -> None:
        for w in args:
            key, eq, value = w.text.partition("=")
            if not eq:
                continue
            if w.dynamic:
                self.add("dangerous", f"alias {key} is only known at run time")
                continue
            self.ctx.aliases[key] = value
            self.run_text(value, f"alias {key}")

    def other_user(self, name: str, args: list[Word]) -> None:
        if name == "ssh":
            o = parse_opts(args, short_args="BbcDEeFIiJLlmOopQRSWw", stop_at_operand=True)
            if o.value("-F"):
                self.add("dangerous", "ssh -F reads a configuration that can run commands")
            self.home_rc("ssh", ".ssh/config")
            for opt in o.value("-o"):
                key, _, val = opt.text.partition("=")
                if key.lower() in ("proxycommand", "localcommand", "knownhostscommand"):
                    self.run_word(Word(val, opt.dynamic), f"ssh {key}")
            if len(o.operands) > 1:
                rest = o.operands[1:]
                self.run_word(Word(" ".join(w.text for w in rest), any(w.dynamic for w in rest)), "ssh")
            return
        o = parse_opts(args, short_args="cCsguw" if name != "script" else "cEIOTBm",
                       long_args=("--command", "--session-command", "--shell", "--group", "--user"))
        for w in o.value("-c", "--command", "--session-command"):
            self.run_word(w, f"{name} -c")
        if name == "script":  # it logs the session into its operand
            self.write(o.operands[0] if o.operands else Word("typescript"), "script writes its log to")
        if name in ("su", "runuser", "sg"):
            self.add("dangerous", f"runs a command as another user ({name})")
            if name == "runuser" and o.operands and not o.value("-c", "--command"):
                self.run_argv(o.operands, name)

    def shell(self, name: str, args: list[Word]) -> None:
        command_mode = noexec = interactive = stdin_mode = login = False
        i = 0
        operand: Word | None = None
        while i < len(args):
            t = args[i].text
            i += 1
            if t in ("--", "-"):
                break
            if t in ("--rcfile", "--init-file") and i < len(args):
                self.run_file(args[i], "shell", f"{name} {t}")
                i += 1
                continue
            if t.startswith("--"):
                login |= t == "--login"
                command_mode |= t.startswith("--command")
                noexec |= t in ("--noexec", "--no-execute")
                if t.startswith("--command=") or t.startswith("--init-command"):
                    self.run_word(Word(t.partition("=")[2], args[i - 1].dynamic), f"{name} {t.split('=')[0]}")
                continue
            if t[:1] in "-+" and len(t) > 1:
                letters = t[1:]
                command_mode |= "c" in letters
                noexec |= "n" in letters and t[0] == "-"
                interactive |= "i" in letters
                login |= "l" in letters and t[0] == "-"
                stdin_mode |= "s" in letters
                if ("o" in letters or "O" in letters) and i < len(args):
                    i += 1
                continue
            i -= 1
            break
        if i < len(args):
            operand = args[i]
        if noexec and not interactive:
            return
        self.startup_files(name, login, interactive)
        if command_mode:
            if operand is not None:  # bash -c CODE NAME ARGS...: NAME is $0, then $1...
                self.run_word(operand, f"{name} -c", positional=args[i + 1:] or [Word(name)])
            return
        if operand is not None and not stdin_mode:
            self.run_file(operand, "shell", f"{name} {operand.text}", args=args[i + 1:])
            return
        self.stdin_code(name, "shell", self.cur_feed)

    def startup_files(self, name: str, login: bool, interactive: bool) -> None:
        """A login or interactive shell runs start-up files from its home, which is the workspace."""
        ws = self.ctx.workspace
        if ws is None or not (login or interactive):
            return
        names = (".bash_profile", ".bash_login", ".profile") if login else ()
        for f in (*names, *((".bashrc",) if interactive else ())):
            if os.path.lexists(posixpath.join(ws, f)):
                self.run_file(Word(posixpath.join(ws, f)), "shell", f"{name} start-up file {f}", feed=None)

    def interpreter(self, name: str, lang: str, args: list[Word]) -> None:
        spec = _INTERPRETERS[lang]
        run = self.interpreter_options(name, spec, args)
        if run is None:
            return
        operands = run.operands
        if run.check_only and not run.codes:
            return
        if lang == "python" and python_user_site(self.ctx.workspace):
            self.add("dangerous", "python runs code installed in the sandbox's home (~/.local: .pth files, packages)",
                     own=False)
        if run.module is not None:
            self.python_module(run.module, operands)
            return
        if spec.program_operand and not run.codes and not run.files and operands:
            run.codes.append(operands[0])
            operands = operands[1:]
        how = f"{name} code"
        for c in run.codes:
            if c.dynamic:
                self.add("dangerous", f"{name} runs code that is only known at run time", own=False)
            else:
                self.run_code(lang, c.text, how, base=self.ctx.cwd)
        for f in run.files:
            self.run_file(f, lang, f"{name} {f.text}")
        if not run.codes and not run.files:
            if operands and operands[0].text != "-":
                self.run_file(operands[0], lang, f"{name} {operands[0].text}")
                operands = operands[1:]
            else:
                self.stdin_code(name, lang, self.cur_feed)
        if run.in_place:
            for f in operands:
                self.write(f, f"{name} -i edits in place", glob_ok=True)

    def interpreter_options(self, name: str, spec: _Interpreter, args: list[Word]) -> _InterpreterRun | None:
        """What an interpreter's options make it run (None: nothing more to check, a finding is added)."""
        run = _InterpreterRun()
        i = 0
        stop = False
        while i < len(args) and not stop:
            w = args[i]
            t = w.text
            i += 1
            if t == "--":
                break
            if t in ("--eval", "--print") or t.startswith(("--eval=", "--print=")):
                val = t.partition("=")[2]
                run.codes.append(Word(val, w.dynamic) if "=" in t else args[i] if i < len(args) else Word(""))
                i += 0 if "=" in t else 1
                continue
            if spec.check_long and t in ("--check", "--syntax-check", "--version", "--help"):
                run.check_only = True
                continue
            if (t.split("=")[0] if t.startswith("--") else t) in spec.runs_project:
                self.add("dangerous", f"{name} {t} runs project code (tests, scripts or a server) that is not on "
                                      "the command line")
                return None
            if t in ("--require", "--import", "--loader", "--experimental-loader", "--source", "--include",
                     "--load", "--file", "--exec") and i < len(args):
                if t == "--source":
                    run.codes.append(args[i])
                elif t == "--file":
                    run.files.append(args[i])
                else:
                    self.add("dangerous", f"{name} {t} loads code that is not on the command line")
                i += 1
                continue
            if t.startswith("--") or not t.startswith("-") or t == "-":
                if t.startswith("--"):
                    continue
                i -= 1
                break
            i, stop = self.interpreter_letters(name, spec, args, i, run)
        run.operands = args[i:]
        return run

    def interpreter_letters(self, name: str, spec: _Interpreter, args: list[Word], i: int, run: _InterpreterRun,
                            ) -> tuple[int, bool]:
        """One word of short options, ``args[i - 1]``: the index of the next word, and whether the options end."""
        w = args[i - 1]
        t = w.text
        for j, ch in enumerate(t[1:], start=1):
            rest = t[j + 1:]
            # The option's value: the rest of this word, or else the next word.
            value = Word(rest, w.dynamic) if rest else args[i] if i < len(args) else Word("")
            then = i if rest or i >= len(args) else i + 1
            if ch in spec.code:
                run.codes.append(value)
                return then, spec.code_ends_options
            if ch in spec.in_place:
                run.in_place = True
                return i, False
            if ch in spec.module:
                run.module = value
                return then, True
            if ch in spec.files:
                run.files.append(value)
                return then, False
            if ch in spec.loads:
                self.add("dangerous", f"{name} -{ch} loads code that is not on the command line")
                return then, False
            if ch in spec.arg:
                if ch in spec.chdir:
                    self.ctx.cds.append(None)
                if ch in spec.loads_settings:
                    self.add("dangerous", f"{name} -{ch} loads code or settings that are not on the command line")
                return (i if rest else i + 1), False
            if ch in spec.attached:
                return i, False
            if ch in spec.check:
                run.check_only = True
        return i, False

    def python_module(self, module: Word, args: list[Word]) -> None:
        if module.dynamic:
            self.add("dangerous", "python runs a module only known at run time")
            return
        top = module.text.split(".")[0]
        if top in ("gateway", "herald"):
            self.add("dangerous", "the herald CLI changes Herald's own state")
            return
        if self.ctx.cwd is not None:
            rel = module.text.replace(".", "/")
            for candidate in (rel + ".py", rel + "/__main__.py"):
                if os.path.isfile(posixpath.join(self.ctx.cwd, candidate)):
                    self.run_file(Word(candidate), "python", f"python -m {module.text}")
                    return
        if module.text in _PY_MODULES:
            return
        if top in ("pip", "pip3") and self.runner_reads("pip", args):
            return
        if not self.project(top, args):
            self.add("dangerous", f"python -m {module.text} runs a module this classifier does not know")

    def stdin_code(self, name: str, lang: str, feed: Feed | None) -> None:
        """An interpreter reading its program from standard input."""
        if feed is None:
            return  # the terminal's stdin is /dev/null: nothing runs
        if feed is UNKNOWN_INPUT or feed.kind in ("unknown", "dup"):
            self.add("dangerous", f"{name} runs code from an input that is only known at run time", own=False)
            return
        if feed.kind == "file" and feed.file is not None:
            self.run_file(feed.file, lang, f"{name} < {feed.file.text}", feed=None)
            return
        reads_before = len(self.ctx.reads)
        data = self.stdin_data(feed)
        if data is not None:
            decoder = _decoder_in(feed)
            if decoder:
                self.add("dangerous", f"{name} runs code decoded by {decoder}", own=False)
            quiet = f"piped into {name}" if len(self.ctx.reads) > reads_before else None
            self.run_code(lang, data.decode("utf-8", "replace"), f"piped into {name}", feed=None,
                          quiet=None if quiet is None else self.prefix + quiet, base=self.ctx.cwd)
            return
        if feed.kind == "text" and feed.file is not None:  # bash <<< "$(echo ...)": values the line fixes
            for value in self.values(feed.file) or []:
                self.run_code(lang, value + "\n", f"piped into {name}", feed=None, base=self.ctx.cwd)
        src = feed.stage[0].words[0].text if feed.stage and feed.stage[0].words else ""
        if posixpath.basename(src) in ("curl", "wget", "fetch", "aria2c", "http", "https", "xh"):
            self.add("dangerous", f"pipes a download straight into {name}", own=False)
        elif feed.kind == "text":
            self.add("dangerous", f"{name} runs a here-document that is only known at run time", own=False)
        else:
            self.add("dangerous", f"{name} runs a script that comes down a pipe", own=False)

    def database(self, name: str, args: list[Word]) -> None:
        rc = {"psql": ".psqlrc", "sqlite3": ".sqliterc", "sqlite": ".sqliterc", "mysql": ".my.cnf",
              "mariadb": ".my.cnf"}.get(name)
        if rc is not None and not any(a.text in ("-X", "--no-psqlrc", "--no-defaults") for a in args):
            self.home_rc(name, rc)
        o = parse_opts(args, short_args="cdhpUvPoLTfeqQiF" if name not in ("sqlite3", "sqlite", "litecli") else "",
                       long_args=("--command", "--execute", "--query", "--file", "--dbname", "--host", "--port",
                                  "--username", "--user", "--set", "--variable", "--output", "--database"))
        texts: list[Word] = [*o.value("-c", "--command", "-e", "--execute", "-q", "-Q", "--query")]
        if name in ("sqlite3", "sqlite", "litecli", "duckdb"):
            words = list(args)
            ops: list[Word] = []
            while words:
                w = words.pop(0)
                if w.text in ("-cmd", "-init", "-separator", "-newline", "-nullvalue") and words:
                    value = words.pop(0)
                    if w.text == "-cmd":
                        texts.append(value)
                    elif w.text == "-init":
                        self.add("dangerous", f"{name} -init runs SQL from a file")
                elif not w.text.startswith("-"):
                    ops.append(w)
            texts.extend(ops[1:])
        for f in o.value("-f", "--file", "-i"):
            data, _ = self.read_file(f)
            texts.append(Word(data.decode("utf-8", "replace")) if data is not None else Word(f.text, True))
        for f in o.value("-o", "--output"):
            self.write(f, f"{name} -o overwrites")
        feed = self.cur_feed
        if feed is not None:
            data = self.stdin_data(feed)
            texts.append(Word(data.decode("utf-8", "replace")) if data is not None else Word("$STDIN", True))
        for t in texts:
            if t.dynamic:
                self.add("dangerous", f"{name} runs SQL that is only known at run time")
            else:
                self.run_sql(t.text, name)

    # ---- the end -------------------------------------------------------------------------------------


def _items(data: bytes, o: Opts) -> list[str] | None:
    """The items xargs reads from ``data``."""
    text = data.decode("utf-8", "replace")
    delim = o.value("-d", "--delimiter")
    if o.has("-0", "--null"):
        items = [x for x in text.split("\0") if x]
    elif delim:
        items = [x for x in text.split(delim[0].text or "\n") if x]
    else:
        try:
            items = shlex.split(text)
        except ValueError:
            return None
    return items[:64]


_DECODERS = frozenset({"base64", "base32", "xxd", "gunzip", "zcat", "gzip", "bzip2", "bunzip2", "bzcat", "xz",
                       "unxz", "xzcat", "lzcat", "unlzma", "tr", "rev"})


def _decoder_in(feed: Feed | None) -> str | None:
    """The first decoding stage (base64 -d, gunzip, tr...) in the pipeline feeding a command."""
    while feed is not None and feed.kind == "pipe" and feed.stage:
        cmd = feed.stage[0]
        name = posixpath.basename(cmd.words[0].text) if cmd.words else ""
        if name in _DECODERS:
            return name
        feed = cmd.feed
    return None
