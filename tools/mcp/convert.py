"""What the model sees of an MCP server: tool names, schemas checked before a call, results made into text.

A server is untrusted: its names are made safe for the model's API, its descriptions are labelled with the server
and capped, a call's arguments are checked against the tool's own JSON schema here (a call that does not match is
answered with the validation error and never sent), and its results are capped. Images are not inlined: one that
decodes as an image (Pillow, with its decompression-bomb limit) is saved into the workspace, where the agent's
other tools and replies can use it, and the result names the file.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import os
import re
import time
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError

from tools.sandbox import Refused, SandboxPolicy, resolve_for_write

MAX_NAME = 64  # what OpenAI-compatible APIs take for a function name
MAX_DESCRIPTION = 1024
MAX_ERRORS = 5
MAX_IMAGE_BYTES = 10 * 1024 * 1024
IMAGE_FOLDER = "mcp-images"
_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str, taken: set[str]) -> str:
    """``mcp_<server>_<tool>``, only characters the API takes, at most 64, unique among ``taken``."""
    name = _UNSAFE.sub("_", f"mcp_{server}_{tool}")
    if len(name) <= MAX_NAME and name not in taken:
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9]}_{digest}"


def description(server: str, text: str | None, read_only: bool) -> str:
    label = f"[MCP server {server}{', read-only' if read_only else ''}] "
    body = " ".join((text or "").split()) or "(no description)"
    if len(label) + len(body) > MAX_DESCRIPTION:
        body = body[: MAX_DESCRIPTION - len(label) - 1] + "…"
    return label + body


def checker(schema: Any) -> Draft202012Validator | None:
    """A validator for a tool's input schema (its own ``$schema`` draft, else 2020-12), or None when the schema
    itself is not valid JSON Schema (the tool is then not offered)."""
    if not isinstance(schema, dict):
        return None
    cls = validators.validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError:
        return None
    # No remote $ref is ever fetched: the referencing library resolves only what the schema itself holds.
    return cls(schema)  # type: ignore[no-any-return]


def validation_error(check: Draft202012Validator, args: dict[str, Any]) -> str | None:
    """What is wrong with ``args`` for the schema, in a few lines, or None when they match."""
    found = sorted(check.iter_errors(args), key=lambda e: list(e.absolute_path))
    if not found:
        return None
    lines = []
    for err in found[:MAX_ERRORS]:
        where = "/".join(str(p) for p in err.absolute_path) or "(the arguments)"
        message = err.message if len(err.message) <= 300 else err.message[:299] + "…"
        lines.append(f"{where}: {message}")
    more = len(found) - MAX_ERRORS
    return "; ".join(lines) + (f"; and {more} more" if more > 0 else "")


def _save_image(data: str, mime: str, server: str, policy: SandboxPolicy | None) -> dict[str, Any]:
    ext = _EXTENSIONS.get(mime)
    if ext is None or policy is None:
        return {"image": f"not kept: {mime} is not an image type that is kept (png, jpeg, gif, webp)"}
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return {"image": "not kept: its data is not base64"}
    if len(raw) > MAX_IMAGE_BYTES:
        return {"image": f"not kept: {len(raw)} bytes, more than {MAX_IMAGE_BYTES}"}
    from PIL import Image

    try:
        with Image.open(io.BytesIO(raw)) as img:
            img.verify()
            size = img.size
    except Exception as exc:  # whatever Pillow says of a bad or oversized image
        return {"image": f"not kept: it does not decode as an image ({type(exc).__name__})"}
    name = f"{IMAGE_FOLDER}/{server}-{time.time_ns()}.{ext}"
    try:
        # The folder lies in the workspace, which the agent can change: resolved like write_file resolves a path.
        folder = resolve_for_write(IMAGE_FOLDER, policy, "mcp")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        path = resolve_for_write(name, policy, "mcp")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
    except (Refused, OSError) as exc:
        return {"image": f"not kept: {exc}"}
    return {"image": name, "mime": mime, "width": size[0], "height": size[1], "bytes": len(raw)}


def _capped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n[… {len(text) - limit} more characters not shown]"


def result_text(result: Any, server: str, policy: SandboxPolicy | None, limit: int) -> str:
    """A ``CallToolResult`` as the JSON text the model gets: the text blocks joined, images saved into the
    workspace and named, resources and links described; ``limit`` caps each text on the way."""
    texts: list[str] = []
    files: list[dict[str, Any]] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(_capped(block.text, limit))
        elif kind == "image":
            files.append(_save_image(block.data, block.mime_type, server, policy))
        elif kind == "audio":
            texts.append(f"[audio ({block.mime_type}) not shown]")
        elif kind == "resource_link":
            texts.append(f"[resource {block.uri}{f' ({block.name})' if getattr(block, 'name', None) else ''}]")
        elif kind == "resource":
            res = block.resource
            text = getattr(res, "text", None)
            texts.append(_capped(text, limit) if isinstance(text, str)
                         else f"[resource {res.uri}: {getattr(res, 'mime_type', None) or 'binary'} content not shown]")
        else:
            texts.append(f"[{kind or 'unknown'} content not shown]")
    out: dict[str, Any] = {"server": server}
    if getattr(result, "is_error", False):
        out["is_error"] = True
    out["content"] = "\n\n".join(texts)
    structured = getattr(result, "structured_content", None)
    if structured is not None and not texts:
        out["structured"] = structured
    if files:
        out["images"] = files
    return json.dumps(out, ensure_ascii=False, default=str)
