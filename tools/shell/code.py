"""Commands hidden in code handed to an interpreter.

Each analysis returns *effects*: a shell script or an argv the code runs (classified like any command),
a path it deletes, a file it writes, SQL it executes, or a plain reason to ask. Literal arguments are
read exactly; anything computed at run time (a variable, an f-string, a concatenation with a name) needs
approval, because then nobody can know from the text what runs.

- python: the real ``ast``; calls are resolved through imports, aliases, ``__import__`` and ``getattr``.
- perl, ruby, node, php, lua: a tokenizer that knows strings and comments, and tables of the calls that
  run commands, delete files or evaluate more code.
- awk: ``system()``, ``"cmd" | getline``, ``print | "cmd"``, ``print > "file"``.
- sed: the ``e`` command, the ``s///e`` flag and ``w`` files.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from tools.shell.parse import Word

_PYVAR = "$PYTHON_VALUE"  # how a computed argument shows in an argv: dynamic, never a path


@dataclass
class Effect:
    kind: str  # shell | argv | delete | write | sql | ask | hardline
    text: str = ""
    argv: list[Word] = field(default_factory=list)
    recursive: bool = False  # for delete


def _ask(reason: str) -> Effect:
    return Effect("ask", reason)


# -------------------------------------------------------------------------------------------- python

_PY_SHELL = frozenset({"os.system", "os.popen", "subprocess.getoutput", "subprocess.getstatusoutput",
                       "commands.getoutput", "commands.getstatusoutput", "platform.popen",
                       "asyncio.create_subprocess_shell"})
_PY_RUN = frozenset({"subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
                     "subprocess.Popen", "pty.spawn"})
_PY_EXEC_PREFIX = ("os.exec", "os.spawn", "os.posix_spawn")
_PY_DELETE = {"os.remove": False, "os.unlink": False, "os.rmdir": False, "os.removedirs": True,
              "shutil.rmtree": True}
_PY_EVAL = frozenset({"exec", "eval", "compile", "builtins.exec", "builtins.eval"})
_PY_NATIVE = ("ctypes", "cffi", "_ctypes")
_PY_DB_METHODS = frozenset({"execute", "executemany", "executescript", "exec_driver_sql"})
_PY_DANGER_MODULES = ("os", "subprocess", "shutil", "pty", "commands", "posix", "asyncio", "ctypes", "pathlib",
                      "importlib", "builtins")


class _Py(ast.NodeVisitor):
    def __init__(self) -> None:
        self.alias: dict[str, str] = {}
        self.effects: list[Effect] = []

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.alias[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for a in node.names:
            if a.name == "*":
                if (node.module or "").split(".")[0] in _PY_DANGER_MODULES:
                    self.effects.append(_ask(f"python code imports everything from {node.module}"))
                continue
            self.alias[a.asname or a.name] = f"{node.module}.{a.name}"

    def name(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.alias.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.name(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call):
            fn = self.name(node.func)
            first = node.args[0] if node.args else None
            if fn in ("__import__", "importlib.import_module", "builtins.__import__"):
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    return first.value
                return "<dynamic import>"
            if fn in ("getattr", "builtins.getattr") and len(node.args) >= 2:
                second = node.args[1]
                base = self.name(node.args[0])
                if isinstance(second, ast.Constant) and isinstance(second.value, str):
                    return f"{base}.{second.value}" if base else None
                return f"{base}.<dynamic attribute>" if base else None
            if fn in ("pathlib.Path", "pathlib.PosixPath", "Path"):
                return "pathlib.Path()"
        return None

    @staticmethod
    def literal(node: ast.AST | None) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
            v = node.value
            return v.decode("utf-8", "replace") if isinstance(v, bytes) else v
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            a, b = _Py.literal(node.left), _Py.literal(node.right)
            return a + b if a is not None and b is not None else None
        return None

    def argv(self, node: ast.AST) -> list[Word] | None:
        if isinstance(node, ast.List | ast.Tuple):
            words = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    words.append(Word(_PYVAR, dynamic=True))
                    continue
                lit = self.literal(elt)
                words.append(Word(lit) if lit is not None else Word(_PYVAR, dynamic=True))
            return words
        lit = self.literal(node)
        return [Word(lit)] if lit is not None else None

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        fn = self.name(node.func)
        if fn is None:
            if isinstance(node.func, ast.Attribute) and node.func.attr in _PY_DB_METHODS:
                self.sql(node)
            return
        root = fn.split(".")[0]
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        first = node.args[0] if node.args else kw.get("args") or kw.get("cmd")
        if "<dynamic" in fn and root in (*_PY_DANGER_MODULES, "<dynamic import>"):
            self.effects.append(_ask("python code reaches a function whose name is only known at run time"))
        elif fn in _PY_SHELL:
            self.shell(first, fn)
        elif fn in _PY_RUN or fn.startswith("asyncio.create_subprocess_exec"):
            shell = kw.get("shell")
            if fn == "asyncio.create_subprocess_exec" or fn.startswith("asyncio.create_subprocess_exec"):
                self.run_argv(ast.List(elts=list(node.args)), fn)
            elif shell is not None and not (isinstance(shell, ast.Constant) and not shell.value):
                if isinstance(shell, ast.Constant) and shell.value:
                    self.shell(first, fn)
                else:
                    self.effects.append(_ask(f"python {fn} with a shell= flag only known at run time"))
            else:
                self.run_argv(first, fn)
            if "executable" in kw:
                self.effects.append(_ask(f"python {fn} picks its executable separately"))
        elif fn.startswith(_PY_EXEC_PREFIX):
            self.exec_family(fn, node)
        elif fn in _PY_DELETE or fn.startswith("pathlib.Path()."):
            self.delete(fn, node, first)
        elif fn in ("os.kill", "os.killpg"):
            target = node.args[0] if node.args else None
            if isinstance(target, ast.UnaryOp) and isinstance(target.op, ast.USub) and \
                    isinstance(target.operand, ast.Constant) and target.operand.value == 1:
                self.effects.append(Effect("hardline", "kill -1 signals every process"))
            else:
                self.effects.append(_ask("python code signals processes"))
        elif fn in _PY_EVAL:
            code = self.literal(first)
            if code is None:
                self.effects.append(_ask(f"python code runs code that is not a literal ({fn})"))
            else:
                self.effects.extend(python(code))
        elif root in _PY_NATIVE:
            self.effects.append(_ask("python code calls native code (ctypes/cffi)"))
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _PY_DB_METHODS:
            self.sql(node)

    def shell(self, arg: ast.AST | None, fn: str) -> None:
        text = self.literal(arg)
        if text is None:
            argv = self.argv(arg) if arg is not None else None
            if argv is not None and fn in _PY_RUN:
                self.effects.append(Effect("argv", argv=argv))
            else:
                self.effects.append(_ask(f"python code runs a command that is not a literal ({fn})"))
        else:
            self.effects.append(Effect("shell", text))

    def run_argv(self, arg: ast.AST | None, fn: str) -> None:
        argv = self.argv(arg) if arg is not None else None
        if not argv or argv[0].dynamic:
            self.effects.append(_ask(f"python code runs a command that is not a literal ({fn})"))
        else:
            self.effects.append(Effect("argv", argv=argv))

    def exec_family(self, fn: str, node: ast.Call) -> None:
        args = list(node.args)
        if fn.startswith("os.spawn"):
            args = args[1:]  # the mode
        if not args:
            return
        path = self.literal(args[0])
        rest = args[1:]
        if fn.endswith(("v", "ve", "vp", "vpe")) or fn.startswith("os.posix_spawn"):
            argv = self.argv(rest[0]) if rest else []
        else:
            argv = [Word(lit) if (lit := self.literal(a)) is not None else Word(_PYVAR, dynamic=True)
                    for a in (rest[:-1] if fn.endswith("e") else rest)]
        if path is None or argv is None:
            self.effects.append(_ask(f"python code runs a command that is not a literal ({fn})"))
            return
        self.effects.append(Effect("argv", argv=[Word(path), *argv[1:]]))

    def delete(self, fn: str, node: ast.Call, first: ast.AST | None) -> None:
        if fn.startswith("pathlib.Path()."):
            method = fn.rsplit(".", 1)[1]
            if method not in ("unlink", "rmdir"):
                return
            receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
            first = receiver.args[0] if isinstance(receiver, ast.Call) and receiver.args else None
            recursive = False
        else:
            recursive = _PY_DELETE[fn]
        path = self.literal(first)
        if path is None:
            self.effects.append(_ask(f"python code deletes a path that is not a literal ({fn})"))
        else:
            self.effects.append(Effect("delete", path, recursive=recursive or fn.endswith("rmdir")))

    def sql(self, node: ast.Call) -> None:
        text = self.literal(node.args[0]) if node.args else None
        if text is None:
            self.effects.append(_ask("python code runs SQL that is not a literal"))
        else:
            self.effects.append(Effect("sql", text))


def python(code: str) -> list[Effect]:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return [_ask("python code could not be parsed")]
    visitor = _Py()
    try:
        visitor.visit(tree)
    except RecursionError:
        return [_ask("python code nests too deeply to check")]
    return visitor.effects


# ----------------------------------------------------------------------- perl, ruby, node, php, lua

# name -> how its literal arguments are read: shell (one string of shell), run (one string = shell,
# several = argv), argv (program then a list), rm / rmr (paths deleted), kill, eval (more code).
_CALLS: dict[str, dict[str, str]] = {
    "perl": {"system": "run", "exec": "run", "unlink": "rm", "rmtree": "rmr", "remove_tree": "rmr",
             "rmdir": "rm", "kill": "kill", "eval": "eval", "open": "open", "readpipe": "shell",
             "syscall": "ask"},
    "ruby": {"system": "run", "exec": "run", "spawn": "run", "popen": "run", "capture2": "run",
             "capture2e": "run", "capture3": "run", "popen2": "run", "popen3": "run", "popen2e": "run",
             "pipeline": "run", "rm_rf": "rmr", "rm_r": "rmr", "remove_dir": "rmr", "remove_entry": "rmr",
             "rmtree": "rmr", "rm": "rm", "rm_f": "rm", "remove": "rm", "safe_unlink": "rm", "delete": "rm",
             "unlink": "rm", "rmdir": "rm", "kill": "kill", "eval": "eval", "instance_eval": "eval",
             "class_eval": "eval", "syscall": "ask"},
    "node": {"exec": "shell", "execSync": "shell", "execFile": "argv", "execFileSync": "argv",
             "spawn": "argv", "spawnSync": "argv", "fork": "ask", "rmSync": "rmopt", "rm": "rmopt",
             "rmdirSync": "rmopt", "rmdir": "rmopt", "unlinkSync": "rm", "unlink": "rm", "kill": "kill",
             "eval": "eval", "Function": "eval", "runInThisContext": "eval", "runInNewContext": "eval",
             "runInContext": "eval", "dlopen": "ask"},
    "php": {"system": "shell", "exec": "shell", "shell_exec": "shell", "passthru": "shell", "popen": "shell",
            "proc_open": "run", "pcntl_exec": "argv", "unlink": "rm", "rmdir": "rm", "posix_kill": "kill",
            "eval": "eval", "assert": "eval", "create_function": "ask", "dl": "ask", "FFI": "ask"},
    "lua": {"execute": "shell", "popen": "shell", "remove": "rm", "loadstring": "eval", "load": "eval",
            "dofile": "ask"},
}
# Names too common to mean "run a command" unless the code also mentions the module that makes them so.
_GATED = {"node": ("child_process", {"exec", "execSync", "execFile", "execFileSync", "spawn", "spawnSync",
                                     "fork"}),
          "lua": ("os", {"execute", "remove"}), "ruby": ("", set())}
_COMMENTS = {"perl": ("#",), "ruby": ("#",), "node": ("//", "/*"), "php": ("//", "#", "/*"), "lua": ("--",),
             "awk": ("#",)}
_CMD_QUOTES = {"perl": "`", "ruby": "`", "php": "`"}


@dataclass
class _Tok:
    kind: str  # id | str | cmd | p
    text: str
    dynamic: bool = False


_INTERP = {"perl": re.compile(r"[$@][\w{]"), "ruby": re.compile(r"#\{"), "php": re.compile(r"\$\w|\{\$"),
           "node": re.compile(r"\$\{"), "lua": re.compile(r"(?!)"), "awk": re.compile(r"(?!)")}
_QUOTE_OPS = re.compile(r"(qx|qq|q|%x|%q|%Q|%w|%W)([^\w\s])")
_PAIRS = {"(": ")", "[": "]", "{": "}", "<": ">"}


_PERL_REGEX_OPS = re.compile(r"(m|qr|s|tr|y)([^\w\s=,;)])")


def _regex_may_start(toks: list[_Tok]) -> bool:
    """A ``/`` starts a regex literal after an operator or a keyword, not after a value (division)."""
    if not toks:
        return True
    prev = toks[-1]
    if prev.kind in ("str", "cmd"):
        return False
    if prev.kind == "id":
        return prev.text in ("if", "unless", "and", "or", "not", "return", "split", "grep", "when", "while",
                             "until", "typeof")
    return prev.text not in (")", "]", "}")


def _unescape(body: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def _tokens(lang: str, code: str) -> list[_Tok]:
    toks: list[_Tok] = []
    interp = _INTERP[lang]
    comments = _COMMENTS[lang]
    i, n = 0, len(code)
    while i < n:
        ch = code[i]
        if ch.isspace():
            if ch == "\n":
                toks.append(_Tok("p", "\n"))
            i += 1
            continue
        com = next((c for c in comments if code.startswith(c, i)), None)
        if com is not None and not (com == "#" and lang == "perl" and i > 0 and code[i - 1] == "$"):
            end = code.find("*/", i + 2) + 2 if com == "/*" else code.find("\n", i)
            i = n if end <= 1 or end < 0 else end
            continue
        if ch == "/" and lang in ("perl", "ruby", "node") and _regex_may_start(toks):
            end = i + 1
            while end < n and code[end] not in "/\n":
                end += 2 if code[end] == "\\" else 1
            toks.append(_Tok("str", ""))  # a regex literal: never code, never a command
            i = end + 1
            continue
        m = _PERL_REGEX_OPS.match(code, i) if lang == "perl" else None
        if m and (i == 0 or not (code[i - 1].isalnum() or code[i - 1] in "_$@%")):
            delim = m.group(2)
            close = _PAIRS.get(delim, delim)
            parts = 2 if m.group(1) in ("s", "tr", "y") else 1
            end = m.end()
            for _ in range(parts):
                while end < n and code[end] != close:
                    end += 2 if code[end] == "\\" else 1
                end += 1
                if parts == 2 and close != delim:
                    end = code.find(delim, end) + 1 or n  # s{...}{...}
            toks.append(_Tok("str", ""))
            i = end
            continue
        m = _QUOTE_OPS.match(code, i) if lang in ("perl", "ruby") else None
        if m and (i == 0 or not (code[i - 1].isalnum() or code[i - 1] == "_")):
            op, open_ch = m.group(1), m.group(2)
            close = _PAIRS.get(open_ch, open_ch)
            end = code.find(close, m.end())
            end = n if end < 0 else end
            body = code[m.end():end]
            kind = "cmd" if op in ("qx", "%x") else "str"
            toks.append(_Tok(kind, _unescape(body), op != "q" and bool(interp.search(body))))
            i = end + 1
            continue
        if ch in "'\"`":
            end = i + 1
            while end < n and code[end] != ch:
                end += 2 if code[end] == "\\" else 1
            body = code[i + 1:end]
            kind = "cmd" if ch == "`" and _CMD_QUOTES.get(lang) == "`" else "str"
            dyn = ch != "'" and bool(interp.search(body))
            toks.append(_Tok(kind, body if ch == "'" else _unescape(body), dyn))
            i = end + 1
            continue
        if ch.isalnum() or ch in "_$":
            m2 = re.compile(r"[$\w]+").match(code, i)
            assert m2 is not None
            toks.append(_Tok("id", m2.group()))
            i = m2.end()
            continue
        two = code[i:i + 2]
        if two in ("::", "->", "=>", "||", "&&", ">>", "=="):
            toks.append(_Tok("p", two))
            i += 2
            continue
        toks.append(_Tok("p", ch))
        i += 1
    return toks


def _args(toks: list[_Tok], start: int, lang: str) -> tuple[list[_Tok], bool]:
    """The argument tokens of a call starting at ``start``; False when one is not a literal string."""
    parens = start < len(toks) and toks[start].text == "("
    i = start + 1 if parens else start
    depth = 0
    out: list[_Tok] = []
    ok = True
    while i < len(toks):
        t = toks[i]
        if t.kind == "p" and t.text in "([{":
            depth += 1
            if t.text == "{":  # an options object ends the argument list we read
                break
        elif t.kind == "p" and t.text in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and not parens and t.kind == "p" and t.text in (";", "\n"):
            break
        if t.kind in ("str", "cmd"):
            out.append(t)
            ok = ok and not t.dynamic
        elif t.kind == "id" or (t.kind == "p" and t.text not in (",", "[", "]", "(", ")", "=>", "\n")):
            ok = False
        i += 1
    return out, ok


def _options_say_recursive(toks: list[_Tok], start: int) -> bool:
    window = [t.text for t in toks[start:start + 30]]
    return "recursive" in window


def script(lang: str, code: str) -> list[Effect]:
    """Effects of perl/ruby/node/php/lua code."""
    if lang == "python":
        return python(code)
    if lang == "awk":
        return awk(code)
    calls = _CALLS[lang]
    toks = _tokens(lang, code)
    gate_word, gated = _GATED.get(lang, ("", set()))
    gate_open = not gate_word or any(t.text == gate_word or gate_word in t.text for t in toks)
    effects: list[Effect] = []
    seen: dict[str, int] = {}
    for i, t in enumerate(toks):
        if t.kind == "cmd":
            effects.append(Effect("shell", t.text) if not t.dynamic else
                           _ask(f"{lang} code runs a command that is not a literal"))
            continue
        if t.kind != "id" or t.text not in calls:
            continue
        prev = toks[i - 1].text if i else ""
        if prev in ("sub", "def", "function", "my", "local") or (t.text in gated and not gate_open):
            continue
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if nxt is not None and nxt.kind == "p" and nxt.text in ("=", ":", "{") and t.text != "eval":
            continue  # a definition or a key, not a call
        if lang == "perl" and t.text == "eval" and nxt is not None and nxt.text == "{":
            continue
        kind = calls[t.text]
        seen[t.text] = seen.get(t.text, 0) + 1
        args, literal = _args(toks, i + 1, lang)
        what = f"{lang} code"
        if kind == "ask":
            effects.append(_ask(f"{what} calls {t.text}"))
        elif kind == "eval":
            if literal and args:
                effects.extend(script(lang, "".join(a.text for a in args)))
            else:
                effects.append(_ask(f"{what} evaluates code that is not a literal ({t.text})"))
        elif kind == "open":
            if any("|" in a.text for a in args) or not literal:
                effects.append(_ask(f"{what} opens a pipe to a command"))
        elif not literal or not args:
            effects.append(_ask(f"{what} runs a command that is not a literal ({t.text})" if kind in
                                ("shell", "run", "argv") else f"{what} acts on something that is not a literal "
                                                              f"({t.text})"))
        elif kind == "shell" or (kind == "run" and len(args) == 1):
            effects.append(Effect("shell", args[0].text))
        elif kind in ("run", "argv"):
            effects.append(Effect("argv", argv=[Word(a.text) for a in args]))
        elif kind in ("rm", "rmr", "rmopt"):
            recursive = kind == "rmr" or (kind == "rmopt" and _options_say_recursive(toks, i))
            effects.extend(Effect("delete", a.text, recursive=recursive) for a in args)
        elif kind == "kill":
            effects.append(Effect("hardline", "kill -1 signals every process") if any(
                a.text == "-1" for a in args) else _ask(f"{what} signals processes"))
    # The tokenizer guesses where regex literals are; a call it swallowed must still ask.
    for name, kind in calls.items():
        if kind in ("shell", "run", "argv", "eval") and (name not in gated or gate_open):
            raw = len(re.findall(rf"(?<![\w$.>:-]){re.escape(name)}\s*(?:\(|\s+['\"`$\w])", code))
            if raw > seen.get(name, 0):
                effects.append(_ask(f"{lang} code calls {name} in a way that could not be read"))
    if lang == "perl" and re.search(r"(?<![\w$])kill\s*\(?\s*['\"]?\w*['\"]?\s*,\s*-1\b", code):
        effects.append(Effect("hardline", "kill -1 signals every process"))
    return effects


# ---------------------------------------------------------------------------------------------- awk


def awk(code: str) -> list[Effect]:
    toks = _tokens("awk", code)
    effects: list[Effect] = []
    in_print = False
    depth = 0
    for i, t in enumerate(toks):
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if t.kind == "id" and t.text in ("print", "printf"):
            in_print, depth = True, 0
        elif t.kind == "p" and t.text in (";", "\n", "}"):
            in_print = False
        elif t.kind == "p" and t.text == "(":
            depth += 1
        elif t.kind == "p" and t.text == ")":
            depth -= 1
        if t.kind == "id" and t.text == "system":
            args, literal = _args(toks, i + 1, "awk")
            effects.append(Effect("shell", "".join(a.text for a in args)) if literal and args else
                           _ask("awk code runs a command that is not a literal (system)"))
        elif t.kind == "p" and t.text == "|":
            if nxt is not None and nxt.kind == "id" and nxt.text == "getline":
                prev = toks[i - 1] if i else None
                effects.append(Effect("shell", prev.text) if prev is not None and prev.kind == "str" else
                               _ask("awk code reads from a command that is not a literal"))
            elif nxt is not None and nxt.kind == "str":
                effects.append(Effect("shell", nxt.text))
            else:
                effects.append(_ask("awk code pipes into a command that is not a literal"))
        elif in_print and depth <= 0 and t.kind == "p" and t.text in (">", ">>"):
            effects.append(Effect("write", nxt.text) if nxt is not None and nxt.kind == "str" else
                           _ask("awk code writes to a file that is not a literal"))
    return effects


# ---------------------------------------------------------------------------------------------- sed


def _sed_part(s: str, i: int, delim: str) -> int:
    """Index just past the part that ``delim`` closes, starting at ``i``; -1 if it never closes."""
    while i < len(s):
        if s[i] == "\\":
            i += 2
            continue
        if s[i] == delim:
            return i + 1
        i += 1
    return -1


def sed(script_text: str) -> list[Effect]:
    """Effects of a sed script: ``e`` runs commands, ``w``/``W`` and ``s///w`` write files."""
    s = script_text
    effects: list[Effect] = []
    i, n = 0, len(s)

    def rest_of_line(j: int) -> tuple[str, int]:
        end = s.find("\n", j)
        end = n if end < 0 else end
        return s[j:end].strip(), end

    while i < n:
        ch = s[i]
        if ch in " \t\n;{}!":
            i += 1
            continue
        if ch.isdigit() or ch in "$,~+":
            i += 1
            continue
        if ch == "/" or ch == "\\":
            delim = "/" if ch == "/" else (s[i + 1] if i + 1 < n else "/")
            j = _sed_part(s, i + (1 if ch == "/" else 2), delim)
            if j < 0:
                return [_ask("the sed script could not be read")]
            i = j
            while i < n and s[i] in "IM":
                i += 1
            continue
        if ch == "#":
            _, i = rest_of_line(i)
            continue
        if ch in "sy":
            if i + 1 >= n:
                return [_ask("the sed script could not be read")]
            delim = s[i + 1]
            j = _sed_part(s, i + 2, delim)
            k = _sed_part(s, j, delim) if j >= 0 else -1
            if k < 0:
                return [_ask("the sed script could not be read")]
            i = k
            if ch == "s":
                m = re.match(r"[gpiIMme0-9]*", s[i:])
                flags = m.group() if m else ""
                i += len(flags)
                if "e" in flags:
                    effects.append(_ask("sed s///e runs the result as a command"))
                if i < n and s[i] == "w":
                    target, i = rest_of_line(i + 1)
                    effects.append(Effect("write", target))
            continue
        if ch in "wW":
            target, i = rest_of_line(i + 1)
            effects.append(Effect("write", target))
            continue
        if ch == "e":
            cmd, i = rest_of_line(i + 1)
            effects.append(Effect("shell", cmd) if cmd else _ask("sed e runs the pattern space as a command"))
            continue
        if ch in "aicrRbtT:vlLqQ":
            _, end = rest_of_line(i + 1)
            if ch in "btT:v":
                semi = s.find(";", i + 1)
                end = semi if 0 <= semi < end else end
            i = end
            continue
        if ch in "=dDgGhHnNpPxzF":
            i += 1
            continue
        return [_ask("the sed script could not be read")]
    return effects
