"""A platform is named only inside its own package: adding one is its package and one registry line.

Every module of the project outside gateway/platforms/<name>/ is read with ``ast``: a registered platform's
name may not be a word of a string literal ("web_token", "slack_mrkdwn", "e.g. telegram") nor of an identifier
(``web_adapter``, ``cfg.platforms.web``, ``gateway.platforms.web.adapter``). Docstrings and comments may give a
platform as an example; names imported from other libraries (aiohttp's ``web``) are theirs. What a platform
brings that the rest must know goes through its declaration (gateway/platforms/declaration.py).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from gateway.platforms import PLATFORMS

ROOT = Path(__file__).resolve().parents[2]
# Where a platform could be named: tools/ and agent_core/ import nothing of gateway (tests/test_structure.py), so
# a word there ("a web server", git's web.browser) is English, not a platform.
PACKAGES = ("gateway", "cron")
REGISTRY = ROOT / "gateway" / "platforms" / "__init__.py"
# Words that are a platform's name by coincidence: (module, what in the literal holds it). The agent's tools that
# read the world wide one are named so (tools.web_fetch.*, tools.web_search.*).
ALLOWED = {("gateway/talk/help.py", tool) for tool in ("web_fetch", "web_search")} | {
    ("gateway/api/adapter.py", "OpenWebUI"),  # Open WebUI's own header, which the API reads
}


def words(text: str) -> set[str]:
    """``web_token`` -> web, token; ``WebAdapter`` -> web, adapter; ``slack-bolt`` -> slack, bolt."""
    out = set()
    for part in re.findall(r"[A-Za-z0-9]+", text):
        out.update(w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+", part))
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def _first_party(module: str) -> bool:
    return module.split(".")[0] in (*PACKAGES, "tools", "agent_core")


def _foreign_names(tree: ast.AST) -> set[str]:
    """Names bound by importing another library (``from aiohttp import web``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if not _first_party(a.name))
        elif isinstance(node, ast.ImportFrom) and not node.level and not _first_party(node.module or ""):
            names.update(a.asname or a.name for a in node.names)
    return names


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _texts(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every string literal but docstrings, and of every identifier that is the project's."""
    docstrings, foreign = _docstrings(tree), _foreign_names(tree)
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            out.append((line, node.value))
        elif isinstance(node, ast.Name) and node.id not in foreign:
            out.append((line, node.id))
        elif isinstance(node, ast.Attribute) and _root(node) not in foreign:
            out.append((line, node.attr))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.append((line, node.name))
        elif isinstance(node, ast.arg):
            out.append((line, node.arg))
        elif isinstance(node, ast.keyword) and node.arg:
            out.append((node.value.lineno, node.arg))
        elif isinstance(node, ast.ImportFrom) and (node.level or _first_party(node.module or "")):
            out += [(line, node.module or ""), *((line, a.asname or a.name) for a in node.names)]
        elif isinstance(node, ast.Import):
            out += [(line, a.asname or a.name) for a in node.names if _first_party(a.name)]
    return out


def mentions(path: Path, names: set[str], rel: str | None = None) -> list[str]:
    rel = rel or path.relative_to(ROOT).as_posix()
    tree = ast.parse(path.read_text(), rel)
    return [f"{rel}:{line}: {text[:70]!r}" for line, text in _texts(tree)
            if words(text) & names and not any(rel == where and part in text for where, part in ALLOWED)]


def outside_their_packages() -> list[Path]:
    own = {ROOT / "gateway" / "platforms" / name for name in PLATFORMS}
    return [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
            if path != REGISTRY and not any(path.is_relative_to(folder) for folder in own)]


def test_no_module_outside_a_platforms_package_names_it() -> None:
    names = set(PLATFORMS)
    found = [hit for path in outside_their_packages() for hit in mentions(path, names)]
    assert found == [], "a platform named outside gateway/platforms/<name>/ (say it in its declaration):\n" + \
        "\n".join(found)


def test_the_registry_names_each_platform_once_as_its_package() -> None:
    tree = ast.parse(REGISTRY.read_text())
    literals = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                and words(n.value) & set(PLATFORMS) and n.value in PLATFORMS]
    assert sorted(literals) == sorted(PLATFORMS)
    for name in PLATFORMS:
        assert (ROOT / "gateway" / "platforms" / name / "__init__.py").exists()


def test_the_check_sees_what_it_must(tmp_path: Path) -> None:
    """A test that cannot fail is a defect: each way of naming a platform is caught, the allowed ones are not."""
    sample = tmp_path / "sample.py"
    sample.write_text('''"""A docstring may say Telegram and web."""
from aiohttp import web
from gateway.platforms.web.adapter import web_token
from gateway.platforms import PLATFORMS

# a comment may too: slack
def serve(web_adapter):
    web.get("/", None)
    cfg.platforms.web.enabled
    marks = {"slack_mrkdwn": 1}
    return chunk(dialect="discord")
''')
    found = mentions(sample, {"web", "telegram", "slack", "discord"}, "gateway/sample.py")
    lines = sorted({int(hit.split(":")[1]) for hit in found})
    assert lines == [3, 7, 9, 10, 11], found
