"""Python code handed to the interpreter, read with the real ``ast``.

Calls are resolved to dotted names through imports, ``as`` aliases, plain assignments (``f = os.system``),
``__import__``/``importlib.import_module`` and ``getattr`` with literal (or literally concatenated) names.
What cannot be resolved to a name needs approval instead of passing as harmless:

- a reference to a function that runs commands, deletes or evaluates code, taken without calling it
  (``f = getattr(os, "sys" + "tem")``), and ``getattr``/``__import__`` with a computed name;
- reflection: dunder attributes (``os.__dict__``, ``__builtins__``, ``__subclasses__``), ``globals()``,
  ``sys.modules``, ``vars(...)[...]``;
- calls of unmistakable methods (``unlink``, ``rmtree``, ``system``...) on objects the code computes
  (``[p.unlink() for p in pathlib.Path("/").rglob("*")]``), and calls through computed callables when
  the code imports a module that can run commands;
- ``eval`` of anything, native code (ctypes/cffi), writes to paths that are not literals.

Writes (``open(..., "w")``, ``Path.write_text``, ``shutil.copy``, ``os.rename``...) are effects on their
literal paths, decided by the workspace rule. ``fork`` asks; inside a loop it is a fork bomb (hardline).
Imports are reported so that modules the code would import from the working directory are read too.
"""

from __future__ import annotations

import ast

from tools.shell.effects import FORK_BOMB, Effect, ask
from tools.shell.words import Word

_PYVAR = "$PYTHON_VALUE"  # how a computed argument shows in an argv: dynamic, never a path

_SHELL = frozenset({"os.system", "os.popen", "subprocess.getoutput", "subprocess.getstatusoutput",
                    "commands.getoutput", "commands.getstatusoutput", "platform.popen",
                    "asyncio.create_subprocess_shell"})
_RUN = frozenset({"subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
                  "subprocess.Popen", "pty.spawn"})
_EXEC_PREFIX = ("os.exec", "os.spawn", "os.posix_spawn", "asyncio.create_subprocess_exec")
_DELETE = {"os.remove": False, "os.unlink": False, "os.rmdir": False, "os.removedirs": True,
           "shutil.rmtree": True}
_EVAL = frozenset({"exec", "eval", "compile", "builtins.exec", "builtins.eval", "builtins.compile"})
_FORK = frozenset({"os.fork", "os.forkpty", "pty.fork"})
_REFLECT_CALLS = frozenset({"getattr", "builtins.getattr", "setattr", "delattr", "__import__",
                            "builtins.__import__", "importlib.import_module", "importlib.__import__"})
_DANGER = _SHELL | _RUN | _EVAL | _FORK | _REFLECT_CALLS | frozenset(_DELETE) | {"os.kill", "os.killpg"}
_NATIVE = ("ctypes", "cffi", "_ctypes")
_DB_METHODS = frozenset({"execute", "executemany", "executescript", "exec_driver_sql"})
_DANGER_MODULES = frozenset({"os", "subprocess", "shutil", "pty", "commands", "posix", "asyncio", "ctypes",
                             "pathlib", "importlib", "builtins", "sys", "platform", "multiprocessing"})
# Method names that mean one thing whatever object they are called on.
_UNMISTAKABLE = frozenset({"system", "popen", "rmtree", "removedirs", "unlink", "rmdir", "getoutput",
                           "getstatusoutput", "check_output", "check_call", "Popen", "posix_spawn", "posix_spawnp",
                           "fork", "forkpty", "killpg", "write_text", "write_bytes", "symlink_to", "hardlink_to",
                           "extractall", "extract", "execv", "execve", "execvp", "execvpe", "execl", "execlp",
                           "spawnv", "spawnvp", "spawnl", "spawnlp", "load_module", "exec_module"})
_DUNDER_OK = frozenset({"__name__", "__doc__", "__file__", "__version__", "__all__", "__len__", "__init__",
                        "__enter__", "__exit__", "__iter__", "__next__", "__str__", "__repr__", "__eq__",
                        "__hash__", "__annotations__", "__dataclass_fields__", "__qualname__", "__module__"})
_OPENERS = frozenset({"open", "io.open", "builtins.open", "codecs.open"})
# (function, indexes of the path arguments it writes)
_WRITES: dict[str, tuple[int, ...]] = {
    "os.rename": (0, 1), "os.replace": (0, 1), "os.renames": (0, 1), "os.chmod": (0,), "os.lchmod": (0,),
    "os.chown": (0,), "os.lchown": (0,), "os.truncate": (0,), "os.mkdir": (0,), "os.makedirs": (0,),
    "os.mkfifo": (0,), "os.mknod": (0,), "os.utime": (0,), "os.symlink": (1,), "os.link": (1,),
    "shutil.copy": (1,), "shutil.copy2": (1,), "shutil.copyfile": (1,), "shutil.copytree": (1,),
    "shutil.copymode": (1,), "shutil.copystat": (1,), "shutil.move": (0, 1), "shutil.chown": (0,),
    "shutil.make_archive": (0,),
}
_PATH_WRITES = frozenset({"write_text", "write_bytes", "touch", "mkdir", "symlink_to", "hardlink_to", "chmod",
                          "lchmod", "rename", "replace"})


def _literal(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
        v = node.value
        return v.decode("utf-8", "replace") if isinstance(v, bytes) else v
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _literal(node.left), _literal(node.right)
        return a + b if a is not None and b is not None else None
    if isinstance(node, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in node.values):
        return "".join(str(v.value) for v in node.values if isinstance(v, ast.Constant))
    return None


class _Py(ast.NodeVisitor):
    def __init__(self) -> None:
        self.alias: dict[str, str] = {}
        self.effects: list[Effect] = []
        self.called: set[int] = set()  # ids of nodes that are the callee of a call
        self.loops = 0
        self.danger_imported = False

    def asks(self, reason: str) -> None:
        self.effects.append(ask(reason))

    # ---- names -------------------------------------------------------------------------------------

    def imported(self, module: str) -> None:
        if module.split(".")[0] in _DANGER_MODULES:
            self.danger_imported = True
        self.effects.append(Effect("import", module))

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.imported(a.name)
            self.alias[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = "." * node.level + (node.module or "")
        self.imported(base)
        for a in node.names:
            if a.name == "*":
                if (node.module or "").split(".")[0] in _DANGER_MODULES:
                    self.asks(f"python code imports everything from {node.module}")
                continue
            full = f"{base}.{a.name}" if node.module else f"{base}{a.name}"
            if node.level:
                self.effects.append(Effect("import", full))
            self.alias[a.asname or a.name] = full

    def name(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.alias.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.name(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Subscript):
            base = self.name(node.value)
            key = _literal(node.slice)
            if base == "sys.modules" and key is not None:
                return key
            return None
        if isinstance(node, ast.Call):
            fn = self.name(node.func)
            first = node.args[0] if node.args else None
            if fn in ("__import__", "importlib.import_module", "builtins.__import__", "importlib.__import__"):
                lit = _literal(first)
                return lit if lit is not None else "<dynamic import>"
            if fn in ("getattr", "builtins.getattr") and len(node.args) >= 2:
                base = self.name(node.args[0]) or "<object>"
                attr = _literal(node.args[1])
                return f"{base}.{attr}" if attr is not None else f"{base}.<dynamic attribute>"
            if fn in _EVAL:
                return "<dynamic eval>"
            if fn in ("pathlib.Path", "pathlib.PosixPath", "Path", "PosixPath"):
                return "pathlib.Path()"
        return None

    def bind(self, target: ast.AST, value: ast.AST | None) -> None:
        if not isinstance(target, ast.Name):
            return
        resolved = self.name(value) if value is not None else None
        if resolved is not None and resolved != target.id:
            self.alias[target.id] = resolved
        elif target.id in self.alias and resolved is None:
            del self.alias[target.id]

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        for t in node.targets:
            self.bind(t, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.generic_visit(node)
        self.bind(node.target, node.value)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.generic_visit(node)
        self.bind(node.target, node.value)

    # ---- references that are not calls -------------------------------------------------------------

    def reference(self, node: ast.AST) -> None:
        if id(node) in self.called:
            return
        resolved = self.name(node)
        if resolved is not None and (resolved in _DANGER or resolved.startswith(_EXEC_PREFIX)):
            self.asks(f"python code takes a reference to {resolved} instead of calling it")
        elif resolved is not None and "<dynamic" in resolved:
            self.asks("python code reaches something whose name is only known at run time")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in ("globals", "locals", "__builtins__", "__loader__", "__spec__"):
            self.asks(f"python code reaches {node.id}, which can hide what it calls")
        elif isinstance(node.ctx, ast.Load):
            self.reference(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.generic_visit(node)
        if node.attr.startswith("__") and node.attr.endswith("__") and node.attr not in _DUNDER_OK:
            self.asks(f"python code reaches {node.attr}, which can hide what it calls")
        elif self.name(node) == "sys.modules":
            self.asks("python code reaches sys.modules, which can hide what it calls")
        elif isinstance(node.ctx, ast.Load):
            self.reference(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self.generic_visit(node)
        base = node.value
        if isinstance(base, ast.Call) and self.name(base.func) in ("vars", "dir", "builtins.vars"):
            self.asks("python code looks a name up in vars(), which can hide what it calls")

    # ---- loops (for fork bombs) --------------------------------------------------------------------

    def _loop(self, node: ast.AST) -> None:
        self.loops += 1
        self.generic_visit(node)
        self.loops -= 1

    visit_While = visit_For = visit_AsyncFor = visit_ListComp = visit_SetComp = visit_GeneratorExp = _loop
    visit_DictComp = _loop

    # ---- calls -------------------------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        self.called.add(id(node.func))
        self.generic_visit(node)
        fn = self.name(node.func)
        if fn is None:
            self.unnamed_call(node)
            return
        root = fn.split(".")[0]
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        first = node.args[0] if node.args else kw.get("args") or kw.get("cmd")
        if "<dynamic" in fn:
            self.asks("python code calls something whose name is only known at run time")
        elif fn in ("__import__", "importlib.import_module", "builtins.__import__") and _literal(first):
            self.imported(_literal(first) or "")
        elif fn in _SHELL:
            self.shell(first, fn)
        elif fn in _RUN or fn.startswith("asyncio.create_subprocess_exec"):
            self.run(fn, node, first, kw)
        elif fn.startswith(_EXEC_PREFIX):
            self.exec_family(fn, node)
        elif fn in _DELETE or (fn.startswith("pathlib.Path().") and fn.rsplit(".", 1)[1] in ("unlink", "rmdir")):
            self.delete(fn, node, first)
        elif fn.startswith("pathlib.Path().") and fn.rsplit(".", 1)[1] in _PATH_WRITES | {"open"}:
            self.path_write(fn, node)
        elif fn in _WRITES:
            for i in _WRITES[fn]:
                self.write(node.args[i] if i < len(node.args) else None, fn)
            if fn in ("os.symlink", "os.link"):
                self.effects.append(Effect("links"))
        elif fn in _OPENERS:
            mode = node.args[1] if len(node.args) > 1 else kw.get("mode")
            text = _literal(mode) if mode is not None else "r"
            if text is None or set(text) & set("wax+"):
                self.write(first, fn)
        elif fn == "os.open":
            self.write(first, fn)
        elif fn in _FORK:
            self.effects.append(Effect("hardline", FORK_BOMB) if self.loops else ask("python code starts processes "
                                                                                      "(fork)"))
        elif fn in ("os.kill", "os.killpg"):
            target = node.args[0] if node.args else None
            if isinstance(target, ast.UnaryOp) and isinstance(target.op, ast.USub) and \
                    isinstance(target.operand, ast.Constant) and target.operand.value == 1:
                self.effects.append(Effect("hardline", "kill -1 signals every process"))
            else:
                self.asks("python code signals processes")
        elif fn in _EVAL:
            code = _literal(first)
            if code is None or fn.endswith("eval"):
                self.asks(f"python code evaluates a string as code ({fn})")
            if code is not None:
                self.effects.extend(python(code))
        elif fn in ("setattr", "delattr", "builtins.setattr"):
            self.asks("python code changes attributes by name")
        elif root in _NATIVE:
            self.asks("python code calls native code (ctypes/cffi)")
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _DB_METHODS:
            self.sql(node)
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _UNMISTAKABLE and \
                root not in _DANGER_MODULES and not fn.startswith("pathlib.Path()"):
            self.asks(f"python code calls {node.func.attr} on an object it computes")

    def unnamed_call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in _DB_METHODS:
                self.sql(node)
            elif func.attr in _UNMISTAKABLE:
                self.asks(f"python code calls {func.attr} on an object it computes")
        elif self.danger_imported and not isinstance(func, ast.Name):
            self.asks("python code calls a function it computes, and can reach modules that run commands")

    def shell(self, arg: ast.AST | None, fn: str) -> None:
        text = _literal(arg)
        if text is not None:
            self.effects.append(Effect("shell", text, piped=True))
            return
        argv = self.argv(arg) if arg is not None else None
        if argv is not None and fn in _RUN:
            self.effects.append(Effect("argv", argv=argv, piped=True))
        else:
            self.asks(f"python code runs a command that is not a literal ({fn})")

    def run(self, fn: str, node: ast.Call, first: ast.AST | None, kw: dict[str | None, ast.expr]) -> None:
        shell = kw.get("shell")
        if fn.startswith("asyncio.create_subprocess_exec"):
            self.run_argv(ast.List(elts=list(node.args)), fn)
        elif shell is not None and not (isinstance(shell, ast.Constant) and not shell.value):
            if isinstance(shell, ast.Constant) and shell.value:
                self.shell(first, fn)
            else:
                self.asks(f"python {fn} with a shell= flag only known at run time")
        else:
            self.run_argv(first, fn)
        if "executable" in kw:
            self.asks(f"python {fn} picks its executable separately")

    def argv(self, node: ast.AST) -> list[Word] | None:
        if isinstance(node, ast.List | ast.Tuple):
            words = []
            for elt in node.elts:
                lit = None if isinstance(elt, ast.Starred) else _literal(elt)
                words.append(Word(lit) if lit is not None else Word(_PYVAR, dynamic=True))
            return words
        lit = _literal(node)
        return [Word(lit)] if lit is not None else None

    def run_argv(self, arg: ast.AST | None, fn: str) -> None:
        argv = self.argv(arg) if arg is not None else None
        if not argv or argv[0].dynamic:
            self.asks(f"python code runs a command that is not a literal ({fn})")
        else:
            self.effects.append(Effect("argv", argv=argv, piped=True))

    def exec_family(self, fn: str, node: ast.Call) -> None:
        args = list(node.args)
        if fn.startswith("os.spawn"):
            args = args[1:]  # the mode
        if not args:
            return
        path = _literal(args[0])
        rest = args[1:]
        if fn.endswith(("v", "ve", "vp", "vpe")) or fn.startswith("os.posix_spawn"):
            argv = self.argv(rest[0]) if rest else []
        else:
            argv = [Word(lit) if (lit := _literal(a)) is not None else Word(_PYVAR, dynamic=True)
                    for a in (rest[:-1] if fn.endswith("e") else rest)]
        if path is None or argv is None:
            self.asks(f"python code runs a command that is not a literal ({fn})")
            return
        self.effects.append(Effect("argv", argv=[Word(path), *argv[1:]], piped=True))

    def receiver_path(self, node: ast.Call) -> ast.AST | None:
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        return receiver.args[0] if isinstance(receiver, ast.Call) and receiver.args else None

    def delete(self, fn: str, node: ast.Call, first: ast.AST | None) -> None:
        recursive = _DELETE.get(fn, False)
        if fn.startswith("pathlib.Path()."):
            first = self.receiver_path(node)
        path = _literal(first)
        if path is None:
            self.asks(f"python code deletes a path that is not a literal ({fn})")
        else:
            self.effects.append(Effect("delete", path, recursive=recursive or fn.endswith("rmdir")))

    def path_write(self, fn: str, node: ast.Call) -> None:
        method = fn.rsplit(".", 1)[1]
        if method == "open":
            mode = _literal(node.args[0]) if node.args else "r"
            if mode is not None and not set(mode) & set("wax+"):
                return
        self.write(self.receiver_path(node), fn)
        if method in ("rename", "replace", "symlink_to", "hardlink_to"):
            self.write(node.args[0] if node.args else None, fn)
            if method != "rename" and method != "replace":
                self.effects.append(Effect("links"))

    def write(self, arg: ast.AST | None, fn: str) -> None:
        path = _literal(arg)
        if path is None:
            self.asks(f"python code writes to a path that is not a literal ({fn})")
        else:
            self.effects.append(Effect("write", path))

    def sql(self, node: ast.Call) -> None:
        text = _literal(node.args[0]) if node.args else None
        if text is None:
            self.asks("python code runs SQL that is not a literal")
        else:
            self.effects.append(Effect("sql", text))


def python(code: str) -> list[Effect]:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return [ask("python code could not be parsed")]
    visitor = _Py()
    try:
        visitor.visit(tree)
    except RecursionError:
        return [ask("python code nests too deeply to check")]
    return visitor.effects
