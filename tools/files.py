"""``read_file`` and ``write_file``: plain text file access relative to the terminal working directory."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from tools.registry import ToolContext, error, tool
from tools.terminal import resolve_cwd

MAX_READ_BYTES = 10 * 1024 * 1024
DEFAULT_LIMIT = 2000
MAX_LINE_CHARS = 2000
_SNIFF = 8192


def resolve_path(path: str, ctx: ToolContext) -> Path:
    p = Path(path).expanduser()
    if not p.is_absolute():
        p = Path(resolve_cwd(ctx)) / p
    return p


def _positive_int(value: Any, name: str, default: int) -> int:
    if value is None:
        return default
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an integer") from None
    if n < 1:
        raise ValueError(f"{name} must be at least 1")
    return n


@tool(
    "read_file",
    "Read a text file. Returns numbered lines (like cat -n). Use offset (1-based line) and limit "
    "(number of lines) to page through long files.",
    {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Absolute, or relative to the working directory."},
            "offset": {"type": "integer", "description": "First line to return, 1-based. Default 1."},
            "limit": {"type": "integer", "description": f"Lines to return. Default {DEFAULT_LIMIT}."},
        },
        "required": ["path"],
    },
    toolset="files",
)
def read_file(args: dict[str, Any], ctx: ToolContext) -> str:
    try:
        offset = _positive_int(args.get("offset"), "offset", 1)
        limit = _positive_int(args.get("limit"), "limit", DEFAULT_LIMIT)
    except ValueError as exc:
        return error(str(exc))
    path = resolve_path(str(args["path"]), ctx)
    try:
        st = path.stat()
    except FileNotFoundError:
        return error(f"file not found: {path}")
    if path.is_dir():
        return error(f"{path} is a directory")
    if st.st_size > MAX_READ_BYTES:
        return error(f"{path} is too large to read ({st.st_size} bytes; limit {MAX_READ_BYTES})")
    data = path.read_bytes()
    if b"\0" in data[:_SNIFF]:
        return error(f"{path} looks like a binary file")
    lines = data.decode("utf-8", "replace").splitlines()
    chunk = lines[offset - 1 : offset - 1 + limit]
    width = len(str(offset + len(chunk)))
    numbered = []
    for n, line in enumerate(chunk, start=offset):
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + f" [... line cut at {MAX_LINE_CHARS} chars]"
        numbered.append(f"{n:>{width}}\t{line}")
    result: dict[str, Any] = {"path": str(path), "total_lines": len(lines), "content": "\n".join(numbered)}
    last = offset - 1 + len(chunk)
    if last < len(lines):
        result["next_offset"] = last + 1
    return json.dumps(result, ensure_ascii=False)


@tool(
    "write_file",
    "Write text to a file, replacing it if it exists and creating parent directories as needed.",
    {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Absolute, or relative to the working directory."},
            "content": {"type": "string", "description": "The complete new file content."},
        },
        "required": ["path", "content"],
    },
    toolset="files",
)
def write_file(args: dict[str, Any], ctx: ToolContext) -> str:
    content = args["content"]
    if not isinstance(content, str):
        return error("content must be a string")
    path = resolve_path(str(args["path"]), ctx)
    if path.is_dir():
        return error(f"{path} is a directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8")
    # Write-then-rename: a crash or a concurrent reader never sees a half-written file.
    tmp = path.with_name(f".{path.name}.herald-tmp-{os.getpid()}-{threading.get_ident()}")
    try:
        tmp.write_bytes(data)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return json.dumps({"path": str(path), "bytes_written": len(data)})
