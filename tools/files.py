"""``read_file`` and ``write_file``: text files, seen exactly as the terminal's sandbox sees them.

Paths are resolved like the kernel would (symlinks, ``..``; relative = from the workspace, ``~`` = the
workspace, the sandbox's $HOME). A read is refused when any step lands where the sandbox shows nothing
(tools/sandbox.py: Herald's files, hidden paths, /run, the host's /tmp) or on /proc and /dev; a write
only when the real target lies inside the workspace. The final open never follows a symlink, so a link
swapped in after the check is not followed either.
"""

from __future__ import annotations

import json
import os
from typing import Any

from tools.fileio import CannotOpen, open_asked, write_atomically
from tools.registry import ToolContext, code, error, tool
from tools.sandbox import Refused, context_policy, resolve_for_write

MAX_READ_BYTES = 10 * 1024 * 1024
DEFAULT_LIMIT = 2000
MAX_LINE_CHARS = 2000
_SNIFF = 8192


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
    progress=lambda args: f"reading {code(args.get('path', ''))}",
)
def read_file(args: dict[str, Any], ctx: ToolContext) -> str:
    try:
        offset = _positive_int(args.get("offset"), "offset", 1)
        limit = _positive_int(args.get("limit"), "limit", DEFAULT_LIMIT)
    except ValueError as exc:
        return error(str(exc))
    asked = str(args["path"])
    try:
        path, fd = open_asked(asked, context_policy(ctx))
    except CannotOpen as exc:
        return error(str(exc))
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_READ_BYTES:
            return error(f"{path} is too large to read ({size} bytes; limit {MAX_READ_BYTES})")
        data = f.read(MAX_READ_BYTES + 1)[:MAX_READ_BYTES]
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
    result: dict[str, Any] = {"path": path, "total_lines": len(lines), "content": "\n".join(numbered)}
    last = offset - 1 + len(chunk)
    if last < len(lines):
        result["next_offset"] = last + 1
    return json.dumps(result, ensure_ascii=False)


@tool(
    "write_file",
    "Write text to a file, replacing it if it exists and creating parent directories as needed. Only "
    "inside the workspace (the terminal's working directory).",
    {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Inside the workspace; absolute, or relative to it."},
            "content": {"type": "string", "description": "The complete new file content."},
        },
        "required": ["path", "content"],
    },
    toolset="files",
    progress=lambda args: f"writing {code(args.get('path', ''))}",
)
def write_file(args: dict[str, Any], ctx: ToolContext) -> str:
    content = args["content"]
    if not isinstance(content, str):
        return error("content must be a string")
    asked = str(args["path"])
    policy = context_policy(ctx)
    data = content.encode("utf-8")
    try:
        path = resolve_for_write(asked, policy)
        # Write-then-rename: a crash or a concurrent reader never sees a half-written file.
        write_atomically(path, data, str(policy.workspace))
    except Refused as exc:
        return error(str(exc))
    except IsADirectoryError:
        return error(f"{asked} is a directory")
    except NotADirectoryError:
        return error(f"cannot write {asked}: a part of the path is a file, not a folder")
    except PermissionError:
        return error(f"permission denied: {asked}")
    except OSError as exc:
        return error(f"cannot write {asked}: {exc.strerror or exc}")
    return json.dumps({"path": path, "bytes_written": len(data)})
