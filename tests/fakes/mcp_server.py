"""A real MCP server for the tests, on the same SDK as Herald's client: stdio (Herald starts it in its sandbox) or
streamable HTTP (``--http PORT``, started by the test).

Tools: ``echo`` (read-only), ``write`` (records each call it gets in ``calls.log`` in its working directory, or in
``--record FILE``), ``slow`` (sleeps; a call that outlives its timeout), ``freeze`` (stops the whole process: a
hung server), ``die`` (exits mid-call), ``snoop`` (tries to read what the sandbox hides and reports what it could),
``picture`` (returns a small PNG). One resource (``note://readme``) and one prompt (``summarize``), so what a
server offers besides tools can be listed. ``--crash-at-start`` exits before speaking.
"""

from __future__ import annotations

import sys

# Inside the sandbox the test's virtualenv interpreter may be hidden (it can live in the daemon user's home): the
# tests run this file with a system python and name the virtualenv's site-packages first.
if len(sys.argv) > 2 and sys.argv[1] == "--site":
    sys.path.insert(0, sys.argv[2])
    del sys.argv[1:3]

import argparse
import asyncio
import base64
import io
import json
import os
import signal
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp_types import ImageContent, ToolAnnotations

parser = argparse.ArgumentParser()
parser.add_argument("--http", type=int, default=0)
parser.add_argument("--record", default="calls.log")
parser.add_argument("--crash-at-start", action="store_true")
parser.add_argument("--name", default="fake")
parser.add_argument("--snoop", action="append", default=[], help="a path snoop tries to read")
parser.add_argument("--marker", default=None, help="text snoop looks for in every visible process's environment")
opts = parser.parse_args()

if opts.crash_at_start:
    print("fake mcp server: crashing at start as asked", file=sys.stderr, flush=True)
    sys.exit(3)

server = MCPServer(opts.name, log_level="WARNING")


def record(entry: dict[str, object]) -> None:
    with open(opts.record, "a") as f:
        f.write(json.dumps(entry) + "\n")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


@server.tool()
def write(name: str, count: int = 1) -> str:
    """Record that it was called (a side effect)."""
    record({"tool": "write", "name": name, "count": count})
    return f"wrote {name} x{count}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def slow(seconds: float) -> str:
    """Sleep, then answer (recorded when it begins)."""
    record({"tool": "slow", "seconds": seconds})
    await asyncio.sleep(seconds)
    return "slept"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def freeze() -> str:
    """Stop the whole process (SIGSTOP): it never answers anything again."""
    os.kill(os.getpid(), signal.SIGSTOP)
    return "unreachable"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def die() -> str:
    """Exit in the middle of the call."""
    print("fake mcp server: dying mid-call", file=sys.stderr, flush=True)
    os._exit(7)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def snoop() -> str:
    """Try to read what the sandbox should hide; report what could be read."""
    read: dict[str, str] = {}
    for path in opts.snoop:
        try:
            read[path] = Path(path).read_bytes()[:200].decode(errors="replace")
        except OSError as exc:
            read[path] = f"ERROR {type(exc).__name__}"
    marked = []
    if opts.marker:
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and opts.marker.encode() in (entry / "environ").read_bytes():
                    marked.append(entry.name)
            except OSError:
                pass
    return json.dumps({"env": dict(os.environ), "read": read, "marked": marked})


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def picture() -> list[object]:
    """A small PNG."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (4, 3), (200, 10, 10)).save(buf, "PNG")
    return [ImageContent(type="image", data=base64.b64encode(buf.getvalue()).decode(), mime_type="image/png")]


@server.resource("note://readme", name="readme")
def readme() -> str:
    """A short text."""
    return "the fake server's readme"


@server.prompt()
def summarize(text: str) -> str:
    """Ask for a summary of the text."""
    return f"Summarize: {text}"


if __name__ == "__main__":
    print(f"fake mcp server {opts.name} starting (pid {os.getpid()})", file=sys.stderr, flush=True)
    if opts.http:
        asyncio.run(server.run_streamable_http_async(host="127.0.0.1", port=opts.http))
    else:
        server.run()
