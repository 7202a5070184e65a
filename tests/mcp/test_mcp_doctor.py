"""`herald doctor` starts each enabled MCP server as the daemon would (in its sandbox), lists its tools and stops
it: a server that answers is ok, one that does not is a warning (Herald runs without it)."""

from __future__ import annotations

from pathlib import Path

from gateway.config import parse_config, resolve_paths
from gateway.ops.doctor import Doctor
from tests.mcp.servers import stdio_server


async def test_doctor_names_each_server_up_or_down(home: Path) -> None:
    (home / "workspace").mkdir(parents=True)
    cfg = parse_config({"mcp": {"servers": {"good": stdio_server(), "broken": stdio_server("--crash-at-start"),
                                            "off": {**stdio_server(), "enabled": False}}}})
    checks = {c.name: c for c in await Doctor(cfg, resolve_paths(), timeout=20).mcp()}
    assert set(checks) == {"mcp.servers.good", "mcp.servers.broken"}
    assert checks["mcp.servers.good"].status == "ok" and "7 tool(s)" in checks["mcp.servers.good"].message
    assert checks["mcp.servers.broken"].status == "warn" and checks["mcp.servers.broken"].message.startswith("down")
