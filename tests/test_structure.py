"""The house's shape: no import circles among the project's modules, and arrows that point down.

The graph is built from the source with ``ast`` (every import, including those under ``TYPE_CHECKING`` and
inside functions: a circle of types is still a circle), so it stays true as the code changes.
"""

from __future__ import annotations

import ast
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


@pytest.mark.parametrize("lower", ["gateway.platforms", "cron", "tools", "agent_core", "gateway.approvals"])
def test_nothing_below_the_composition_root_imports_the_runner(lower: str) -> None:
    """Adapters and features depend on narrow ports, never on gateway/runner.py."""
    graph = import_graph()
    offenders = sorted(name for name, deps in graph.items()
                       if (name == lower or name.startswith(lower + ".")) and "gateway.runner" in deps)
    assert offenders == []


def test_agent_core_and_tools_know_nothing_of_platforms() -> None:
    graph = import_graph()
    offenders = sorted(f"{name} -> {dep}" for name, deps in graph.items() if name.startswith(("agent_core", "tools"))
                       for dep in deps if dep.startswith(("gateway.platforms", "gateway.runner", "cron")))
    assert offenders == []


def test_files_stay_small() -> None:
    """One job per file: a module past ~600 lines is doing several."""
    big = {name: n for name, path in _modules().items() if (n := len(path.read_text().splitlines())) > 650}
    assert big == {}
