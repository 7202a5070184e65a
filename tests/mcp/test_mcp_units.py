"""The parts of MCP support that need no daemon: config rules, names, schema checks, result conversion, the address
rules for HTTP servers, the registry a daemon's MCP tools live in, the gate's decisions, degraded conditions."""

from __future__ import annotations

import base64
import io
import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gateway.config import ConfigError, parse_config, secret_env_names
from gateway.kernel.faults import Faults
from tools.config import ToolsConfig
from tools.mcp.client import ToolInfo
from tools.mcp.config import McpServerConfig
from tools.mcp.convert import checker, result_text, tool_name, validation_error
from tools.mcp.http import AddressRefused, allowed_addresses
from tools.mcp.tools import Ask, make_tools, needs_approval
from tools.registry import Tool, ToolContext, ToolRegistry
from tools.sandbox import SandboxPolicy


def test_a_server_is_a_command_or_a_url_and_takes_no_literal_secret() -> None:
    with pytest.raises(ConfigError, match="either command"):
        parse_config({"mcp": {"servers": {"x": {}}}})
    with pytest.raises(ConfigError, match="NAME_env"):
        parse_config({"mcp": {"servers": {"x": {"command": "srv", "env": {"TOKEN": "ghp_literal"}}}}})
    with pytest.raises(ConfigError, match="sandbox sets it"):
        parse_config({"mcp": {"servers": {"x": {"command": "srv", "env": {"HOME_env": "X"}}}}})
    with pytest.raises(ConfigError, match="no credentials in the URL"):
        parse_config({"mcp": {"servers": {"x": {"url": "https://u:p@example.com/mcp"}}}})
    with pytest.raises(ConfigError, match="name"):
        parse_config({"mcp": {"servers": {"bad name": {"command": "srv"}}}})
    cfg = parse_config({"mcp": {"servers": {
        "gh": {"command": "srv", "env": {"GITHUB_TOKEN_env": "HERALD_GH"}},
        "web": {"url": "https://example.com/mcp", "headers_env": {"Authorization": "HERALD_WEB"}},
        "off": {"enabled": False, "command": "srv", "env": {"X_env": "NEVER_READ"}}}}})
    # Their variables are secrets: masked in the log and in approval prompts.
    assert set(secret_env_names(cfg)) == {"HERALD_GH", "HERALD_WEB"}


def test_tool_names_are_what_the_api_takes_and_unique() -> None:
    taken: set[str] = set()
    assert tool_name("gh", "create_issue", taken) == "mcp_gh_create_issue"
    odd = tool_name("gh", "repo/list.all", taken)
    assert odd == "mcp_gh_repo_list_all"
    taken.add(odd)
    again = tool_name("gh", "repo.list/all", taken)
    assert again != odd and again.startswith("mcp_gh_repo_list_all")
    long = tool_name("s", "x" * 100, set())
    assert len(long) <= 64 and long.startswith("mcp_s_x")


def test_arguments_are_checked_against_the_servers_schema() -> None:
    check = checker({"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
                     "required": ["name"], "additionalProperties": False})
    assert check is not None
    assert validation_error(check, {"name": "a", "n": 2}) is None
    wrong = validation_error(check, {"name": 5, "extra": 1})
    assert wrong is not None and "name" in wrong and "extra" in wrong
    assert checker({"type": "object", "properties": {"a": {"type": "no-such-type"}}}) is None
    assert checker("not a schema") is None


def _policy(ws: Path) -> SandboxPolicy:
    ws.mkdir(exist_ok=True)
    return SandboxPolicy(mode="none", workspace=ws)


def _png() -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (3, 2)).save(buf, "PNG")
    return base64.b64encode(buf.getvalue()).decode()


def test_results_are_text_capped_and_images_go_into_the_workspace(tmp_path: Path) -> None:
    policy = _policy(tmp_path / "ws")
    result = SimpleNamespace(is_error=False, structured_content=None, content=[
        SimpleNamespace(type="text", text="a" * 50),
        SimpleNamespace(type="image", data=_png(), mime_type="image/png"),
        SimpleNamespace(type="image", data=base64.b64encode(b"not an image").decode(), mime_type="image/png"),
        SimpleNamespace(type="image", data=_png(), mime_type="image/svg+xml"),
    ])
    out = json.loads(result_text(result, "srv", policy, limit=10))
    assert out["content"].startswith("a" * 10) and "40 more characters" in out["content"]
    saved, broken, svg = out["images"]
    assert saved["width"] == 3 and (tmp_path / "ws" / saved["image"]).read_bytes()[:4] == b"\x89PNG"
    assert broken["image"].startswith("not kept") and svg["image"].startswith("not kept")


def test_an_image_folder_planted_as_a_symlink_is_not_followed(tmp_path: Path) -> None:
    policy = _policy(tmp_path / "ws")
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "ws" / "mcp-images").symlink_to(outside)
    result = SimpleNamespace(is_error=False, structured_content=None,
                             content=[SimpleNamespace(type="image", data=_png(), mime_type="image/png")])
    out = json.loads(result_text(result, "srv", policy, limit=100))
    assert out["images"][0]["image"].startswith("not kept") and list(outside.iterdir()) == []


async def test_http_servers_reach_only_public_addresses_unless_allowed() -> None:
    with pytest.raises(AddressRefused, match="loopback"):
        await allowed_addresses("127.0.0.1", 80, allow_private=False)
    with pytest.raises(AddressRefused, match="link-local"):
        await allowed_addresses("169.254.169.254", 80, allow_private=False)  # the cloud metadata endpoint
    with pytest.raises(AddressRefused):
        await allowed_addresses("::ffff:10.0.0.1", 80, allow_private=False)
    with pytest.raises(AddressRefused):
        await allowed_addresses("localhost", 80, allow_private=False)
    assert await allowed_addresses("127.0.0.1", 80, allow_private=True) == ["127.0.0.1"]
    assert await allowed_addresses("93.184.215.14", 443, allow_private=False) == ["93.184.215.14"]


def test_a_daemons_registry_layers_its_tools_over_the_builtin_ones() -> None:
    base, mine = ToolRegistry(), ToolRegistry()
    layered = ToolRegistry(base=base)
    base.register(Tool("builtin", "b", {"type": "object"}, lambda a, c: "b"))
    layered.register(Tool("mcp_x_t", "m", {"type": "object"}, lambda a, c: "m"))
    assert layered.names(ToolsConfig()) == ["builtin", "mcp_x_t"] and mine.names(ToolsConfig()) == []
    first = layered.schemas(["builtin", "mcp_x_t"])
    assert [s["function"]["name"] for s in first] == ["builtin", "mcp_x_t"]
    layered.unregister("mcp_x_t")
    assert "mcp_x_t" not in layered and [s["function"]["name"] for s in layered.schemas(["builtin", "mcp_x_t"])] \
        == ["builtin"]
    base.register(Tool("builtin", "changed", {"type": "object"}, lambda a, c: "b"), replace=True)
    assert layered.schemas(["builtin"])[0]["function"]["description"] == "changed"  # the base's change is seen


def test_who_asks_follows_approve_and_the_read_only_hint() -> None:
    ro, rw = ToolInfo("r", None, {}, True), ToolInfo("w", None, {}, False)
    assert needs_approval(McpServerConfig(command="x"), ro)[0] is False
    assert needs_approval(McpServerConfig(command="x"), rw)[0] is True
    assert needs_approval(McpServerConfig(command="x", approve="always"), ro)[0] is True
    assert needs_approval(McpServerConfig(command="x", approve="never"), rw)[0] is False
    # A grant covers this server, this tool and these very arguments.
    a = Ask("s", "t", {"a": 1, "b": [1, 2]}, True, "why")
    assert a.key == Ask("s", "t", {"b": [1, 2], "a": 1}, True, "why").key
    assert a.key != Ask("s", "t", {"a": 2, "b": [1, 2]}, True, "why").key != Ask("s", "u", a.arguments, True, "").key


class _Hub:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def call(self, server: str, tool: str, args: dict[str, Any], *rest: Any) -> Any:
        self.calls.append((server, tool, args))
        return SimpleNamespace(is_error=False, structured_content=None, content=[SimpleNamespace(type="text",
                                                                                                   text="done")])


def _ctx(tmp_path: Path, approve: Any = None) -> ToolContext:
    return ToolContext("k", str(tmp_path), threading.Event(), ToolsConfig(), extras={"approve": approve} if approve
                       else {}, sandbox=_policy(tmp_path / "ws"))


def test_without_anyone_to_ask_a_call_that_needs_approval_is_not_sent(tmp_path: Path) -> None:
    hub = _Hub()
    infos = (ToolInfo("read", "R", {"type": "object"}, True), ToolInfo("write", "W", {"type": "object"}, False),
             ToolInfo("broken", "B", {"type": "object", "properties": {"a": {"type": 7}}}, False))
    tools = {t.name: t for t in make_tools("s", McpServerConfig(command="x"), infos, hub, set())}  # type: ignore[arg-type]
    assert sorted(tools) == ["mcp_s_read", "mcp_s_write"]  # a tool whose schema is not JSON Schema is not offered
    assert "[MCP server s, read-only]" in tools["mcp_s_read"].description
    assert json.loads(tools["mcp_s_read"].handler({}, _ctx(tmp_path)))["content"] == "done"
    refused = json.loads(tools["mcp_s_write"].handler({}, _ctx(tmp_path)))
    assert refused["status"] == "denied" and hub.calls == [("s", "read", {})]


def test_a_gate_hears_of_every_call(tmp_path: Path) -> None:
    asked: list[Ask] = []

    class Gate:
        def ask_tool(self, ask: Ask, ctx: Any) -> Any:
            asked.append(ask)
            return SimpleNamespace(approved=ask.tool == "read", outcome="denied", message="Denied by someone.")

    hub = _Hub()
    infos = (ToolInfo("read", None, {"type": "object"}, True), ToolInfo("write", None, {"type": "object"}, False))
    tools = {t.name: t for t in make_tools("s", McpServerConfig(command="x"), infos, hub, set())}  # type: ignore[arg-type]
    tools["mcp_s_read"].handler({}, _ctx(tmp_path, Gate()))
    out = json.loads(tools["mcp_s_write"].handler({"x": 1}, _ctx(tmp_path, Gate())))
    assert out == {"status": "denied", "error": "Denied by someone."}
    assert [(a.tool, a.needs_approval, a.arguments) for a in asked] == [("read", False, {}), ("write", True, {"x": 1})]
    assert hub.calls == [("s", "read", {})]


def test_a_degraded_condition_is_shown_without_making_the_daemon_unready() -> None:
    faults = Faults()
    faults.begin("mcp:x", "mcp_server_down", "MCP server x is down", degraded=True)
    assert faults.conditions()["mcp:x"]["degraded"] is True and faults.blocking() == []
    faults.begin("database", "database_unavailable", "database unavailable")
    assert faults.blocking() == ["database"] and "degraded" not in faults.conditions()["database"]
    faults.end("mcp:x")
    assert "mcp:x" not in faults.conditions()
