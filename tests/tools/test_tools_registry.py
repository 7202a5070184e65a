from __future__ import annotations

import json
import threading

import pytest

from tools.config import TerminalConfig, ToolsConfig
from tools.registry import Tool, ToolContext, ToolRegistry, load_builtin_tools, tool

OFF = ToolsConfig(terminal=TerminalConfig(enabled=False))


def ctx(**cfg) -> ToolContext:
    cfg.setdefault("terminal", TerminalConfig(enabled=False))
    return ToolContext("s", "/tmp", threading.Event(), ToolsConfig(**cfg))


@pytest.fixture
def reg():
    r = ToolRegistry()

    @tool("big", "Returns a lot.", {"type": "object"}, target=r, toolset="misc")
    def big(args, c):
        return "x" * 500

    @tool("capped", "Own cap.", {"type": "object"}, target=r, max_result_chars=10)
    def capped(args, c):
        return "y" * 50

    @tool("boom", "Raises.", {"type": "object", "required": ["n"]}, target=r)
    def boom(args, c):
        raise RuntimeError(f"failed on {args['n']}")

    @tool(
        "dict_result", "Returns a dict.", {"type": "object"}, target=r, check_enabled=lambda cfg: cfg.terminal.enabled
    )
    def dict_result(args, c):
        return {"ok": True}

    return r


def test_names_filter_by_config_and_toolset(reg):
    assert reg.names(OFF) == ["big", "boom", "capped"]
    on = ToolsConfig(terminal=TerminalConfig(enabled=True))
    assert reg.names(on) == ["big", "boom", "capped", "dict_result"]
    assert reg.names(on, toolsets=["misc"]) == ["big"]


def test_schemas_are_openai_format_and_cached(reg):
    s = reg.schemas(["big", "capped"])
    assert s[0] == {
        "type": "function",
        "function": {"name": "big", "description": "Returns a lot.", "parameters": {"type": "object"}},
    }
    assert reg.schemas(["big", "capped"]) is s


def test_dispatch_errors_and_caps(reg):
    c = ctx(max_result_chars=100)
    assert json.loads(reg.dispatch("boom", {"n": 3}, c)) == {"error": "RuntimeError: failed on 3"}
    assert "missing required" in json.loads(reg.dispatch("boom", {}, c))["error"]
    assert json.loads(reg.dispatch("nope", {}, c))["error"] == "unknown tool: nope"
    assert "disabled" in json.loads(reg.dispatch("dict_result", {}, c))["error"]
    on = ctx(terminal=TerminalConfig(enabled=True))
    assert json.loads(reg.dispatch("dict_result", {}, on)) == {"ok": True}
    big = json.loads(reg.dispatch("big", {}, c))
    assert big["truncated"] is True and big["content"] == "x" * 100 and "500" in big["note"]
    assert json.loads(reg.dispatch("capped", {}, c))["content"] == "y" * 10


def test_duplicate_registration_is_refused(reg):
    with pytest.raises(ValueError):
        reg.register(Tool("big", "again", {}, lambda a, c: ""))
    reg.register(Tool("big", "again", {}, lambda a, c: ""), replace=True)
    assert reg.get("big").description == "again"


def test_builtin_tools_self_register():
    r = load_builtin_tools()
    assert {"terminal", "read_file", "write_file"} <= set(r.names(ToolsConfig(terminal={"enabled": True})))
    assert "terminal" not in r.names(OFF)
    assert "terminal" in r.names(ToolsConfig())  # on by default: dangerous commands need approval
    assert "disabled" in json.loads(r.dispatch("terminal", {"command": "true"}, ctx()))["error"]
