"""``send_file``: the agent sends a file from its workspace to the chat of the turn, after the answer's text.

Only files inside the workspace: the path is resolved like ``read_file`` resolves it (symlinks and ``..``
followed, every place on the way checked against what the sandbox shows) and the real file must lie in the
workspace; the final open never follows a symlink. The gateway's ``files_out`` (ToolContext.extras) copies
the open file at once and caps its size (``media.max_send_mb``).
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

from tools.fileio import CannotOpen, open_asked
from tools.registry import ToolContext, code, error, tool
from tools.sandbox import context_policy, within

CAPTION_MAX = 1000


@tool(
    "send_file",
    "Send a file from the workspace to this chat (a chart, a CSV, a patched config, an image). It arrives after "
    "the text of your answer, in the order you send files. Only files inside the workspace.",
    {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "The file, inside the workspace; absolute or relative to it."},
            "caption": {"type": "string", "description": "A short caption shown with the file (optional)."},
        },
        "required": ["path"],
    },
    toolset="files",
    progress=lambda args: f"sending {code(args.get('path', ''))}",
)
def send_file(args: dict[str, Any], ctx: ToolContext) -> str:
    files_out = ctx.extras.get("files_out")
    if files_out is None:
        return error("files cannot be sent from here (no chat is waiting for this turn's answer)")
    asked = str(args.get("path") or "")
    caption = args.get("caption")
    if caption is not None and not isinstance(caption, str):
        return error("caption must be a string")
    if caption and len(caption) > CAPTION_MAX:
        return error(f"caption is too long ({len(caption)} characters; at most {CAPTION_MAX})")
    if not asked:
        return error("path is required")
    policy = context_policy(ctx)
    ws = os.path.realpath(policy.workspace)
    try:
        real, fd = open_asked(asked, policy, tool="send_file")
    except CannotOpen as exc:
        return error(str(exc))
    if real == ws or not within(real, ws):
        os.close(fd)
        return error(f"send_file sends only files inside the workspace {ws}; {asked} resolves to {real}")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return error(f"{asked} is not a regular file")
        if st.st_size == 0:
            return error(f"{asked} is empty (0 bytes): nothing to send")
        if st.st_size > files_out.max_bytes:
            return error(f"{asked} is {st.st_size / 1048576:.1f} MB; send_file sends at most "
                         f"{files_out.max_bytes / 1048576:g} MB (media.max_send_mb)")
        try:
            result = files_out.queue(fd, os.path.basename(real), caption)
        except (OSError, ValueError) as exc:
            return error(f"cannot send {asked}: {exc}")
    finally:
        os.close(fd)
    result["path"] = real
    result["note"] = "It will be delivered after the text of your answer."
    return json.dumps(result, ensure_ascii=False)
