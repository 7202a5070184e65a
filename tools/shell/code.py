"""Commands hidden in perl, ruby, node, php, lua and awk code (python: ``pycode``; sed: ``sedcode``).

A tokenizer that knows strings, comments and regex literals, then tables of the calls that run commands,
delete or write files, start processes or evaluate more code. Literal strings joined with the language's
concatenation operator count as one literal (``"exec" + "Sync"``), and a literal member lookup is a
name (``c["execSync"]``, ``os["execute"]``). What hides the callee needs approval instead:

- node, lua: a member looked up by a computed key (``c[m]``) in code that can reach modules or globals;
  ``require``/``import()`` of a computed name;
- php: variable functions (``$f(...)``, ``$o->$m()``), ``call_user_func`` and friends;
- perl: calls through references or globs (``&$f``, ``&{...}``, ``$f->()``, ``*{...}``), ``can``;
- ruby: ``send``, ``public_send``, ``method``, ``const_get`` and friends;
- every language: ``eval`` of anything that is not a literal; ``fork`` asks, inside a loop it is a fork
  bomb (``perl -e 'fork while fork'``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tools.shell.effects import FORK_BOMB, Effect
from tools.shell.effects import ask as _ask
from tools.shell.pycode import python
from tools.shell.sedcode import sed
from tools.shell.words import Word

__all__ = ["Effect", "python", "script", "sed"]

# name -> how its literal arguments are read: shell (one string of shell), run (one string = shell,
# several = argv), argv (program then a list), rm / rmr / rmopt (paths deleted), kill, eval (more code),
# write / write2 / write12 (the first, second or both arguments are written), open2 (path, then a mode),
# fork, ask.
_CALLS: dict[str, dict[str, str]] = {
    "perl": {"system": "run", "exec": "run", "unlink": "rm", "rmtree": "rmr", "remove_tree": "rmr",
             "rmdir": "rm", "kill": "kill", "eval": "eval", "open": "open", "readpipe": "shell",
             "syscall": "ask", "fork": "fork", "rename": "write12", "symlink": "write2", "link": "write2",
             "mkdir": "write", "truncate": "write", "make_path": "write", "mkpath": "write", "copy": "write2",
             "move": "write12", "sysopen": "ask", "can": "ask", "dump": "ask"},
    "ruby": {"system": "run", "exec": "run", "spawn": "run", "popen": "run", "capture2": "run",
             "capture2e": "run", "capture3": "run", "popen2": "run", "popen3": "run", "popen2e": "run",
             "pipeline": "run", "rm_rf": "rmr", "rm_r": "rmr", "remove_dir": "rmr", "remove_entry": "rmr",
             "rmtree": "rmr", "rm": "rm", "rm_f": "rm", "remove": "rm", "safe_unlink": "rm", "delete": "rm",
             "unlink": "rm", "rmdir": "rm", "kill": "kill", "eval": "eval", "instance_eval": "eval",
             "class_eval": "eval", "module_eval": "eval", "instance_exec": "ask", "syscall": "ask", "fork": "fork",
             "send": "ask", "public_send": "ask", "__send__": "ask", "method": "ask", "instance_method": "ask",
             "const_get": "ask", "define_method": "ask", "binding": "ask", "load": "ask", "dlopen": "ask"},
    "node": {"exec": "shell", "execSync": "shell", "execFile": "argv", "execFileSync": "argv",
             "spawn": "argv", "spawnSync": "argv", "fork": "ask", "rmSync": "rmopt", "rm": "rmopt",
             "rmdirSync": "rmopt", "rmdir": "rmopt", "unlinkSync": "rm", "unlink": "rm", "kill": "kill",
             "eval": "eval", "Function": "eval", "runInThisContext": "eval", "runInNewContext": "eval",
             "runInContext": "eval", "compileFunction": "eval", "dlopen": "ask", "binding": "ask",
             "writeFileSync": "write", "writeFile": "write", "appendFileSync": "write", "appendFile": "write",
             "createWriteStream": "write", "truncateSync": "write", "truncate": "write", "mkdirSync": "write",
             "mkdir": "write", "chmodSync": "write", "chmod": "write", "chownSync": "write", "chown": "write",
             "utimesSync": "write", "openSync": "open2", "open": "open2", "copyFileSync": "write2",
             "copyFile": "write2", "cpSync": "write2", "cp": "write2", "symlinkSync": "write2",
             "symlink": "write2", "linkSync": "write2", "link": "write2", "renameSync": "write12",
             "rename": "write12"},
    "php": {"system": "shell", "exec": "shell", "shell_exec": "shell", "passthru": "shell", "popen": "shell",
            "proc_open": "run", "pcntl_exec": "argv", "unlink": "rm", "rmdir": "rm", "posix_kill": "kill",
            "eval": "eval", "assert": "eval", "create_function": "ask", "dl": "ask", "FFI": "ask",
            "pcntl_fork": "fork", "call_user_func": "ask", "call_user_func_array": "ask",
            "forward_static_call": "ask", "forward_static_call_array": "ask", "ReflectionFunction": "ask",
            "register_shutdown_function": "ask", "file_put_contents": "write", "fopen": "open2",
            "touch": "write", "mkdir": "write", "chmod": "write", "chown": "write", "copy": "write2",
            "rename": "write12", "symlink": "write2", "link": "write2", "move_uploaded_file": "write2"},
    "lua": {"execute": "shell", "popen": "shell", "remove": "rm", "loadstring": "eval", "load": "eval",
            "dofile": "ask", "loadfile": "ask", "loadlib": "ask", "rename": "write12", "output": "write",
            "open": "open2"},
}
# Names too common to mean anything unless the code also mentions the module that makes them so.
_GATES: dict[str, list[tuple[str, frozenset[str]]]] = {
    "node": [("child_process", frozenset({"exec", "execSync", "execFile", "execFileSync", "spawn", "spawnSync",
                                          "fork"})),
             ("fs", frozenset({"writeFile", "appendFile", "truncate", "mkdir", "chmod", "chown", "open",
                               "copyFile", "cp", "symlink", "link", "rename", "rm", "rmdir", "unlink"}))],
    "lua": [("os", frozenset({"execute", "remove", "rename"})), ("io", frozenset({"output", "open", "popen"})),
            ("package", frozenset({"loadlib"}))],
}
# Words without which a computed member lookup cannot reach anything that acts.
_REACH = {"node": re.compile(r"\b(require|process|import|globalThis|global|Function|eval|module|constructor|"
                             r"child_process|Reflect|Bun|Deno)\b"),
          "lua": re.compile(r"\b(os|io|_G|_ENV|load|loadstring|require|package|debug|getfenv)\b")}
_CONCAT = {"node": ("+",), "ruby": ("+",), "php": (".",), "perl": (".",), "lua": ("..",), "awk": ()}
_COMMENTS = {"perl": ("#",), "ruby": ("#",), "node": ("//", "/*"), "php": ("//", "#", "/*"), "lua": ("--",),
             "awk": ("#",)}
_CMD_QUOTES = {"perl": "`", "ruby": "`", "php": "`"}
_RUNS = frozenset({"shell", "run", "argv", "eval", "rm", "rmr", "fork", "ask"})
_LOOPS = frozenset({"while", "until", "for", "foreach", "loop", "do", "times", "each"})
_RUBY_FILES = frozenset({"File", "IO", "FileUtils", "Dir", "Pathname"})
_RUBY_READS = frozenset({"read", "readlines", "binread", "foreach", "exist?", "exists?", "file?", "directory?",
                         "basename", "dirname", "join", "expand_path", "glob", "entries", "children", "size",
                         "mtime", "stat", "lstat", "pwd", "getwd", "home", "absolute_path", "realpath", "extname",
                         "split", "readable?", "writable?", "executable?", "zero?", "empty?", "each_child",
                         "each_line", "ftype", "symlink?", "size?", "new", "open", "compare_file", "identical?",
                         "uptodate?", "cmp", "each_entry"})


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
        if two in ("::", "->", "=>", "||", "&&", ">>", "==", ".."):
            toks.append(_Tok("p", two))
            i += 2
            continue
        toks.append(_Tok("p", ch))
        i += 1
    return toks


def _fold(lang: str, toks: list[_Tok]) -> list[_Tok]:
    """Literal strings joined by the concatenation operator become one; ``x["name"]`` becomes ``x.name``."""
    ops = _CONCAT.get(lang, ())
    out: list[_Tok] = []
    for t in toks:
        if t.kind == "str" and len(out) >= 2 and out[-1].kind == "p" and out[-1].text in ops and \
                out[-2].kind == "str":
            out.pop()
            prev = out.pop()
            out.append(_Tok("str", prev.text + t.text, prev.dynamic or t.dynamic))
            continue
        out.append(t)
    if lang not in ("node", "lua"):
        return out
    folded: list[_Tok] = []
    i = 0
    while i < len(out):
        t = out[i]
        if t.text == "[" and t.kind == "p" and folded and (folded[-1].kind == "id" or folded[-1].text in (")", "]")) \
                and i + 2 < len(out) and out[i + 1].kind == "str" and not out[i + 1].dynamic \
                and out[i + 2].text == "]" and re.fullmatch(r"[\w$]+", out[i + 1].text):
            folded.extend([_Tok("p", "."), _Tok("id", out[i + 1].text)])
            i += 3
            continue
        folded.append(t)
        i += 1
    return folded


def _arglist(toks: list[_Tok], start: int) -> list[_Tok | None]:
    """The arguments of a call starting at ``start``: each a literal string token, or None when computed."""
    parens = start < len(toks) and toks[start].text == "("
    i = start + 1 if parens else start
    depth = 0
    args: list[_Tok | None] = []
    cur: list[_Tok] = []

    def close() -> None:
        if cur:
            lits = [t for t in cur if t.text != "\n"]
            args.append(lits[0] if len(lits) == 1 and lits[0].kind in ("str", "cmd") and not lits[0].dynamic
                        else None)
            cur.clear()

    while i < len(toks):
        t = toks[i]
        if t.kind == "p" and t.text in ("[", "]"):  # an argv array: its items are the arguments
            i += 1
            continue
        if t.kind == "p" and t.text in "({":
            if t.text == "{" and depth == 0:  # an options object ends the argument list we read
                break
            depth += 1
        elif t.kind == "p" and t.text in ")}":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and not parens and t.kind == "p" and t.text in (";", "\n"):
            break
        if depth == 0 and t.kind == "p" and t.text in (",", "=>"):
            close()
        else:
            cur.append(t)
        i += 1
    close()
    return args


def _options_say_recursive(toks: list[_Tok], start: int) -> bool:
    window = [t.text for t in toks[start:start + 30]]
    return "recursive" in window


def _hidden_callees(lang: str, toks: list[_Tok], code: str) -> list[Effect]:
    """Calls whose callee the code computes: they need approval whatever they turn out to be."""
    what = f"{lang} code"
    reach = _REACH.get(lang)
    for i, t in enumerate(toks):
        prev = toks[i - 1] if i else None
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        nxt2 = toks[i + 2] if i + 2 < len(toks) else None
        if reach is not None and t.kind == "p" and t.text == "[" and prev is not None and \
                (prev.kind == "id" or prev.text in (")", "]")) and reach.search(code):
            inner = nxt.text if nxt is not None else ""
            if not (inner.isdigit() and nxt2 is not None and nxt2.text == "]"):
                return [_ask(f"{what} looks a member up by a computed key")]
        if lang == "node" and t.kind == "id" and t.text in ("require", "import") and nxt is not None and \
                nxt.text == "(" and not (nxt2 is not None and nxt2.kind == "str" and not nxt2.dynamic):
            return [_ask(f"{what} loads a module whose name is computed")]
        if lang == "php" and nxt is not None and nxt.text == "(" and (
                (t.kind == "id" and t.text.startswith("$")) or (t.kind == "str" and prev is not None
                                                                 and prev.text not in (",", "(", "=>"))):
            return [_ask(f"{what} calls a function through a variable or a string")]
        if lang == "php" and t.text == "->" and nxt is not None and nxt.text.startswith(("$", "{")):
            return [_ask(f"{what} calls a method whose name is computed")]
        if lang == "perl" and ((t.text == "&" and nxt is not None and nxt.text.startswith(("$", "{")))
                               or (t.text == "->" and nxt is not None and (nxt.text in ("(", "{") or
                                                                          nxt.text.startswith("$")))
                               or (t.text == "*" and nxt is not None and nxt.text == "{"
                                   and (prev is None or prev.kind == "p"))):
            return [_ask(f"{what} calls a sub through a reference")]
    return []


def _loop_statement(toks: list[_Tok], i: int) -> bool:
    """Whether the statement holding token ``i`` (between ``;`` or line ends) has a loop keyword."""
    j = i
    while j > 0 and toks[j - 1].text not in (";", "\n"):
        j -= 1
    k = i
    while k < len(toks) and toks[k].text not in (";", "\n"):
        k += 1
    return any(t.kind == "id" and t.text in _LOOPS for t in toks[j:k])


def _gated_closed(lang: str, name: str, toks: list[_Tok]) -> bool:
    for word, names in _GATES.get(lang, ()):
        if name in names and not any(word in t.text for t in toks if t.kind in ("str", "id")):
            return True
    return False


def _ruby_file_call(toks: list[_Tok], i: int) -> list[Effect] | None:
    """``File.write(...)``, ``FileUtils.cp(...)``: every literal path a file class method is given is written."""
    if i < 2 or toks[i - 1].text not in (".", "::") or toks[i - 2].text not in _RUBY_FILES:
        return None
    name = toks[i].text
    args = _arglist(toks, i + 1)
    if name in ("open", "new"):
        mode = args[1] if len(args) > 1 else None
        if len(args) < 2 or (mode is not None and not set(mode.text) & set("wa+")):
            return []
    elif name in _RUBY_READS:
        return []
    out: list[Effect] = []
    for a in args[:1] if name in ("open", "new", "write", "binwrite") else args:
        if a is None:
            out.append(_ask(f"ruby code writes to a path that is not a literal ({name})"))
        elif not re.fullmatch(r"0?[0-7]{3,4}|\d+", a.text):
            out.append(Effect("write", a.text))
    return out


def script(lang: str, code: str) -> list[Effect]:
    """Effects of perl/ruby/node/php/lua/awk code (python goes to ``pycode``)."""
    if lang == "python":
        return python(code)
    if lang == "awk":
        return awk(code)
    calls = _CALLS[lang]
    toks = _fold(lang, _tokens(lang, code))
    effects: list[Effect] = _hidden_callees(lang, toks, code)
    seen: dict[str, int] = {}
    what = f"{lang} code"
    for i, t in enumerate(toks):
        if t.kind == "cmd":
            effects.append(Effect("shell", t.text, piped=True) if not t.dynamic else
                           _ask(f"{what} runs a command that is not a literal"))
            continue
        if lang == "ruby" and t.kind == "id":
            files = _ruby_file_call(toks, i)
            if files is not None:
                effects.extend(files)
                continue
        callable_str = lang == "php" and t.kind == "str" and i + 1 < len(toks) and toks[i + 1].text == "("
        if lang == "node" and t.kind == "id" and t.text == "constructor" and i and toks[i - 1].text == "." and \
                i + 1 < len(toks) and toks[i + 1].text == "(":
            effects.extend(_call(lang, "eval", "constructor", toks, i))  # x.constructor.constructor(code)
            continue
        if lang == "php" and t.kind == "str" and not callable_str and calls.get(t.text) in _RUNS:
            effects.append(_ask(f"{what} names the function {t.text} as a value"))
            continue
        if not (t.kind == "id" or callable_str) or t.text not in calls:
            continue
        prev = toks[i - 1].text if i else ""
        if prev in ("sub", "def", "function", "my", "local") or _gated_closed(lang, t.text, toks):
            continue
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if nxt is not None and nxt.kind == "p" and nxt.text in ("=", ":", "{") and t.text != "eval":
            continue  # a definition or a key, not a call
        if lang == "perl" and t.text == "eval" and nxt is not None and nxt.text == "{":
            continue
        kind = calls[t.text]
        seen[t.text] = seen.get(t.text, 0) + 1
        effects.extend(_call(lang, kind, t.text, toks, i))
    if lang == "node":
        effects.extend(_node_imports(toks))
    # The tokenizer guesses where regex literals are; a call it swallowed must still ask.
    for name, kind in calls.items():
        if kind in ("shell", "run", "argv", "eval", "fork") and not _gated_closed(lang, name, toks):
            raw = len(re.findall(rf"(?<![\w$.>:-]){re.escape(name)}\s*(?:\(|\s+['\"`$\w])", code))
            if raw > seen.get(name, 0):
                effects.append(_ask(f"{what} calls {name} in a way that could not be read"))
    if lang == "perl" and re.search(r"(?<![\w$])kill\s*\(?\s*['\"]?\w*['\"]?\s*,\s*-1\b", code):
        effects.append(Effect("hardline", "kill -1 signals every process"))
    return effects


def _call(lang: str, kind: str, name: str, toks: list[_Tok], i: int) -> list[Effect]:
    what = f"{lang} code"
    arglist = _arglist(toks, i + 1)
    literal = all(a is not None for a in arglist)
    args = [a for a in arglist if a is not None]
    if kind == "ask":
        return [_ask(f"{what} calls {name}")]
    if kind == "fork":
        return [Effect("hardline", FORK_BOMB) if _loop_statement(toks, i) else _ask(f"{what} starts processes "
                                                                                    "(fork)")]
    if kind == "eval":
        if literal and args:
            return script(lang, "".join(a.text for a in args))
        return [_ask(f"{what} evaluates code that is not a literal ({name})")]
    if kind == "open":
        return _perl_open(arglist)
    if kind in ("write", "write2", "write12", "open2"):
        if kind == "open2":
            mode = arglist[1] if len(arglist) > 1 else None
            if len(arglist) < 2 or (mode is not None and not set(mode.text) & set("wax+c")):
                return []
        picks = {"write": (0,), "open2": (0,), "write2": (1,), "write12": (0, 1)}[kind]
        targets = [arglist[j] if j < len(arglist) else None for j in picks]
        return [Effect("write", a.text) if a is not None else
                _ask(f"{what} writes to a path that is not a literal ({name})") for a in targets]
    if not literal or not args:
        return [_ask(f"{what} runs a command that is not a literal ({name})" if kind in ("shell", "run", "argv")
                     else f"{what} acts on something that is not a literal ({name})")]
    if kind == "shell" or (kind == "run" and len(args) == 1):
        return [Effect("shell", args[0].text, piped=True)]
    if kind in ("run", "argv"):
        return [Effect("argv", argv=[Word(a.text) for a in args], piped=True)]
    if kind in ("rm", "rmr", "rmopt"):
        recursive = kind == "rmr" or (kind == "rmopt" and _options_say_recursive(toks, i))
        return [Effect("delete", a.text, recursive=recursive) for a in args]
    if kind == "kill":
        return [Effect("hardline", "kill -1 signals every process") if any(a.text == "-1" for a in args)
                else _ask(f"{what} signals processes")]
    return []


def _node_imports(toks: list[_Tok]) -> list[Effect]:
    """``require("x")``, ``import("x")``, ``import ... from "x"``, ``import "x"``: modules the code loads."""
    out: list[Effect] = []
    for i, t in enumerate(toks):
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        nxt2 = toks[i + 2] if i + 2 < len(toks) else None
        if t.kind == "id" and t.text in ("require", "import") and nxt is not None and nxt.text == "(" and \
                nxt2 is not None and nxt2.kind == "str" and not nxt2.dynamic:
            out.append(Effect("import", nxt2.text))
        elif t.kind == "id" and t.text in ("from", "import") and nxt is not None and nxt.kind == "str" and \
                not nxt.dynamic and (t.text == "from" or i == 0 or toks[i - 1].text in (";", "\n")):
            out.append(Effect("import", nxt.text))
    return out


def _perl_open(args: list[_Tok | None]) -> list[Effect]:
    """``open(FH, ">file")``, ``open(FH, ">", $f)``, ``open(FH, "|cmd")``."""
    mode_tok = args[1] if len(args) > 1 else None
    if mode_tok is None:
        return [_ask("perl code opens a file in a mode that is not a literal")] if len(args) > 1 else []
    mode = mode_tok.text.strip()
    if "|" in mode or mode.startswith("-"):
        return [_ask("perl code opens a pipe to a command")]
    m = re.match(r"^(\+?[<>]{1,2}|)(&?)(.*)$", mode)
    op, rest = (m.group(1), m.group(3).strip()) if m else ("", mode)
    if not op or op == "<":
        return []
    if rest:
        return [Effect("write", rest)]
    path = args[2] if len(args) > 2 else None
    return [Effect("write", path.text)] if path is not None else [_ask("perl code writes to a path that is not a "
                                                                        "literal (open)")]


# ---------------------------------------------------------------------------------------------- awk


def awk(code: str) -> list[Effect]:
    toks = _tokens("awk", code)
    effects: list[Effect] = []
    in_print = False
    depth = 0
    if re.search(r"(^|[\s;{])@load\b", code):
        effects.append(_ask("awk code loads an extension (@load)"))
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
            args = _arglist(toks, i + 1)
            literal = bool(args) and all(a is not None for a in args)
            effects.append(Effect("shell", "".join(a.text for a in args if a is not None), piped=True)
                           if literal else _ask("awk code runs a command that is not a literal (system)"))
        elif t.kind == "p" and t.text == "|":
            if nxt is not None and nxt.kind == "id" and nxt.text == "getline":
                prev = toks[i - 1] if i else None
                effects.append(Effect("shell", prev.text) if prev is not None and prev.kind == "str" else
                               _ask("awk code reads from a command that is not a literal"))
            elif nxt is not None and nxt.kind == "str":
                effects.append(Effect("shell", nxt.text, piped=True))
            else:
                effects.append(_ask("awk code pipes into a command that is not a literal"))
        elif in_print and depth <= 0 and t.kind == "p" and t.text in (">", ">>"):
            effects.append(Effect("write", nxt.text) if nxt is not None and nxt.kind == "str" else
                           _ask("awk code writes to a file that is not a literal"))
    return effects
