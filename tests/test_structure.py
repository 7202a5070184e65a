"""The house's shape: no import circles among the project's modules, and arrows that point down — between
packages, not only between files (the layers below).

The graph is built from the source with ``ast`` (every import, including those under ``TYPE_CHECKING`` and
inside functions: a circle of types is still a circle), so it stays true as the code changes.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gateway", "agent_core", "tools", "cron")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            found[_module_name(path)] = path
    return found


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            # ``from pkg import mod`` imports the module pkg.mod when there is one.
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(path, name, known) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def _is_package_init(graph_node: str) -> bool:
    return (ROOT / Path(*graph_node.split(".")) / "__init__.py").exists()


def test_no_import_cycle() -> None:
    graph = import_graph()
    # A package's __init__ that gathers its submodules (gateway.cli) is not a dependency of theirs.
    for name, deps in graph.items():
        graph[name] = {d for d in deps if not (_is_package_init(d) and name.startswith(d + "."))}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


# The layers, bottom up: a package may import its own modules and those of lower layers, never a higher one
# (nor one beside it, unless it is listed below). ``tools`` and ``agent_core`` stand outside gateway, under it.
LAYERS: list[tuple[str, ...]] = [
    ("tools",),
    ("agent_core",),
    ("gateway.kernel",),  # leaves: configbase, faults, logs, health, metrics, untrusted input, chunking, shown
    ("gateway.platforms", "gateway.storage"),  # each platform speaks only to the kernel; storage the same
    ("gateway.config", "gateway.ports", "gateway.cluster", "gateway.session"),
    ("gateway.commands",),
    ("gateway.media",),  # files in and out: sniffing, images, audio endpoints, /voice
    ("gateway.outbound",),
    ("gateway.turns",),
    ("gateway.inbound",),
    ("gateway.approvals", "cron", "gateway.ops", "gateway.mcp", "gateway.api"),
    ("gateway.talk",),  # the agent in the conversation: questions, messages to other chats (uses cron's targets)
    ("gateway.runner",),  # the composition root
    ("gateway.cli",),
]
# Side by side in one layer, but allowed to lean on each other one way.
BESIDE = {
    ("gateway.config", "gateway.platforms"),  # platforms.<name> config models come from the registry
    ("gateway.ports", "gateway.platforms"),
    ("gateway.session", "gateway.config"),
    ("gateway.cluster", "gateway.storage"),
    ("gateway.session", "gateway.storage"),
    ("gateway.approvals", "gateway.commands"),
    ("gateway.ops", "gateway.turns"),
}


def package_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] != "gateway":
        return parts[0]
    return ".".join(parts[:2]) if len(parts) > 1 else "gateway"


def _rank(package: str) -> int | None:
    return next((i for i, layer in enumerate(LAYERS) if package in layer), None)


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    problems = []
    for name, deps in sorted(graph.items()):
        src = package_of(name)
        for dep in sorted(deps):
            dst = package_of(dep)
            if src == dst or (src, dst) in BESIDE:
                continue
            a, b = _rank(src), _rank(dst)
            if a is None or b is None:
                problems.append(f"{name} -> {dep}: {src if a is None else dst} is in no layer of LAYERS")
            elif b >= a:
                where = "above" if b > a else "beside"
                problems.append(f"{name} -> {dep}: {src} may not import {dst} (a layer {where} it)")
    return problems


def test_packages_import_only_the_layers_below() -> None:
    assert layer_violations(import_graph()) == []


def test_the_layer_check_names_both_modules_and_the_rule() -> None:
    problems = layer_violations({"gateway.kernel.logs": {"gateway.storage.db"},
                                 "gateway.storage.db": {"gateway.kernel.faults"}})
    assert problems == ["gateway.kernel.logs -> gateway.storage.db: gateway.kernel may not import gateway.storage "
                        "(a layer above it)"]


def test_every_package_has_a_layer_and_says_what_lives_there() -> None:
    graph = import_graph()
    packages = {package_of(name) for name in graph} - {"gateway"}
    assert sorted(p for p in packages if _rank(p) is None) == []
    for package in packages:
        init = ROOT / Path(*package.split(".")) / "__init__.py"
        if init.exists():
            doc = ast.get_docstring(ast.parse(init.read_text()))
            assert doc and len(doc) > 80, f"{init.relative_to(ROOT)}: say in a paragraph what lives here"


def test_a_platform_imports_no_other_platform() -> None:
    graph = import_graph()
    offenders = []
    for name, deps in graph.items():
        parts = name.split(".")
        if parts[:2] != ["gateway", "platforms"] or len(parts) < 4:
            continue
        for dep in deps:
            dparts = dep.split(".")
            # The contract's modules (base, buttons, files, ...) are shared; another platform's package is not.
            if (dparts[:2] == ["gateway", "platforms"] and len(dparts) >= 3 and dparts[2] != parts[2]
                    and (ROOT / "gateway" / "platforms" / dparts[2]).is_dir()):
                offenders.append(f"{name} -> {dep}")
    assert offenders == []


@pytest.mark.parametrize("lower", ["gateway.platforms", "cron", "tools", "agent_core", "gateway.approvals"])
def test_nothing_below_the_composition_root_imports_the_runner(lower: str) -> None:
    """Adapters and features depend on narrow ports, never on gateway/runner.py."""
    graph = import_graph()
    offenders = sorted(name for name, deps in graph.items()
                       if (name == lower or name.startswith(lower + ".")) and "gateway.runner" in deps)
    assert offenders == []


def test_agent_core_and_tools_know_nothing_of_gateway() -> None:
    graph = import_graph()
    offenders = sorted(f"{name} -> {dep}" for name, deps in graph.items() if name.startswith(("agent_core", "tools"))
                       for dep in deps if dep.startswith(("gateway", "cron")))
    assert offenders == []


def test_files_stay_small() -> None:
    """One job per file: a module past ~600 lines is doing several."""
    big = {name: n for name, path in _modules().items() if (n := len(path.read_text().splitlines())) > 650}
    assert big == {}


def test_the_top_of_gateway_holds_only_the_composition_root_and_shared_names() -> None:
    """A newcomer reads ``ls gateway/`` and sees the rooms: every other module lives in a package by concern."""
    top = sorted(p.stem for p in (ROOT / "gateway").glob("*.py"))
    assert set(top) <= {"__init__", "runner", "ports", "config"}, top


def _python_files() -> list[Path]:
    """The repo's own Python files, schema migrations aside (each is one long, linear script)."""
    skip = {".venv", ".git", "migrations", "node_modules", "__pycache__", ".pytest_cache"}
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in skip]
        found += [Path(folder, f) for f in files if f.endswith(".py")]
    return sorted(found)


def test_functions_stay_short() -> None:
    """One job per function: past 100 lines a function is doing several (named steps read better)."""
    long = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > 100:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines")
    assert long == [], "functions over 100 lines:\n" + "\n".join(long)


def test_no_issue_numbers_in_code() -> None:
    """A comment says why in words a clone can read: an issue number points at a tracker it may not have."""
    pattern = re.compile(r"\bissues? #?\d", re.IGNORECASE)
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for path in _python_files()
             for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert found == []
