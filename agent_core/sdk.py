"""The ``openai`` SDK, imported with its ``openai.types`` packages loaded on demand.

Each package under ``openai.types`` has an ``__init__`` that imports every model of its API at once, and the SDK
imports several of them at start-up (``openai.types``, ``openai.types.responses``...): ~600 modules and ~18 MB
resident, of which a chat completion needs a few dozen. Loaded through ``_LazyTypes``, such a package binds each
name the first time it is asked for (``from openai.types.chat import ChatCompletion`` loads that model and
what it uses), so what is never asked for is never imported. A package ``__init__`` that does anything but
re-export its modules' names (``from .module import Name as Name``) is imported as written.

Import ``openai`` from here (``from agent_core.sdk import openai``): the finder has to be in place before the
SDK's first import. If something imported the SDK first, it stays as it was loaded.
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

_TYPES = "openai.types"


def _reexports(path: str) -> dict[str, tuple[str, str]] | None:
    """name -> (module beside it, name there) for an ``__init__`` made only of ``from .module import Name``
    lines (a docstring and ``from __future__`` allowed); None for any other."""
    try:
        with open(path, encoding="utf-8") as f:
            body = ast.parse(f.read()).body
    except (OSError, SyntaxError, ValueError):
        return None
    names: dict[str, tuple[str, str]] = {}
    for node in body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module and "." not in node.module:
            if any(alias.name == "*" for alias in node.names):
                return None
            names.update((alias.asname or alias.name, (node.module, alias.name)) for alias in node.names)
        elif not ((isinstance(node, ast.ImportFrom) and node.module == "__future__")
                  or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))):
            return None
    return names


class _LazyPackage(importlib.abc.Loader):
    """Makes a package whose names are imported from its modules when first asked for."""

    def __init__(self, names: dict[str, tuple[str, str]]) -> None:
        self.names = names

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module, with the spec's __path__

    def exec_module(self, module: ModuleType) -> None:
        names = self.names

        def __getattr__(name: str) -> object:
            if name in names:
                where, attr = names[name]
                value = getattr(importlib.import_module(f"{module.__name__}.{where}"), attr)
            else:  # a subpackage or module asked for as an attribute (``openai.types.chat``)
                full = f"{module.__name__}.{name}"
                try:
                    value = importlib.import_module(full)
                except ModuleNotFoundError as exc:
                    if exc.name != full:
                        raise
                    raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}") from None
            setattr(module, name, value)
            return value

        module.__getattr__ = __getattr__  # type: ignore[method-assign]
        module.__all__ = list(names)


class _LazyTypes(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != _TYPES and not fullname.startswith(_TYPES + "."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.submodule_search_locations or not spec.origin:
            return spec  # a plain module (or nothing): the normal import
        names = _reexports(spec.origin)
        if names is not None:
            spec.loader = _LazyPackage(names)
        return spec


if "openai" not in sys.modules and not any(isinstance(f, _LazyTypes) for f in sys.meta_path):
    sys.meta_path.insert(0, _LazyTypes())

import openai  # noqa: E402
from openai.types.chat import ChatCompletion  # noqa: E402

__all__ = ["ChatCompletion", "openai"]
