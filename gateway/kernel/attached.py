"""How a user message names the files it came with, as stored in the history: the text, then a block the
gateway writes listing each file's path. The history keeps this reference, never the bytes; a turn that
sends the history to the model reads the files again (gateway/media/content.py), and retention finds the
files of the sessions it deletes here (gateway/storage/retention.py).
"""

from __future__ import annotations

HEADER = "[Attached files, saved on this machine:]"
_BLOCK = f"\n\n{HEADER}\n"


def with_files(text: str, paths: list[str]) -> str:
    """``text`` followed by the block naming ``paths`` (``text`` alone without any)."""
    if not paths:
        return text
    return text + _BLOCK + "\n".join(f"- {path}" for path in paths)


def split_files(content: str) -> tuple[str, list[str]]:
    """(the text, the paths its block names). Only the last block counts, and only when it ends the text: a
    person quoting the header in a message of their own does not make a file out of what follows it."""
    at = content.rfind(_BLOCK)
    if at < 0:
        return content, []
    lines = content[at + len(_BLOCK):].split("\n")
    if not lines or not all(line.startswith("- /") for line in lines):
        return content, []
    return content[:at], [line[2:] for line in lines]
