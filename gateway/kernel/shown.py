"""How a command is shown to a person: whole and as written, with only configured secrets' exact values
masked, and never inside code that runs to compute a word (``$(…)``, backticks, ``<(…)``/``>(…)``): a generic
"looks like a token" rule would let ``export TOKEN="$(curl …|sh)"`` be shown as ``export TOKEN=[REDACTED]``.

Used by the approval prompt, the progress lines of a streaming answer and cron's script checks; it imports
nothing of ``gateway`` but the log redaction beside it.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import quote

from gateway.kernel.logs import REDACTED, redact
from tools.dangerous import normalize

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

# A configured secret shorter than this is not masked in a command: it would match ordinary words and paths
# and hide what runs.
MIN_MASKED = 6
_CODE_NODES = ("command_substitution", "process_substitution")
_OPENERS = re.compile(r"\$\(|`|[<>]\(")
_local = threading.local()


def command_hash(command: str) -> str:
    return hashlib.sha256(normalize(command).encode()).hexdigest()


def exact_hash(command: str) -> str:
    """The exact text's hash (no normalisation): what a cron job's approved script is checked against."""
    return hashlib.sha256(command.encode()).hexdigest()


def _parser() -> Parser:
    parser = getattr(_local, "parser", None)
    if parser is None:
        # Loaded with the first command shown that has code in it: a daemon that shows none never needs it.
        import tree_sitter_bash
        from tree_sitter import Language, Parser

        parser = _local.parser = Parser(Language(tree_sitter_bash.language()))
    return parser


def code_spans(text: str) -> list[tuple[int, int]]:
    """Character ranges of ``text`` that are code run to compute a word: ``$(…)``, backticks, ``<(…)``, ``>(…)``.

    Text the parser cannot read whole counts as code from the first such opener to the end.
    """
    if not _OPENERS.search(text):
        return []
    data = text.encode()
    tree = _parser().parse(data)
    if tree.root_node.has_error:
        first = _OPENERS.search(text)
        return [(first.start(), len(text))] if first else []
    spans: list[tuple[int, int]] = []
    stack: list[Node] = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type in _CODE_NODES:
            # Byte offsets to character offsets (the text may hold non-ASCII characters).
            spans.append((len(data[: node.start_byte].decode(errors="replace")),
                          len(data[: node.end_byte].decode(errors="replace"))))
            continue  # nested ones lie inside this span anyway
        stack.extend(node.children)
    return spans


def shown_command(command: str, secret_values: Iterable[str] | None = None) -> str:
    """The command as the approver sees it: whole, with only configured secrets' exact values masked, and
    those only outside code that runs to compute a word."""
    text = normalize(command)
    values: set[str] = set()
    for value in secret_values or ():
        value = (value or "").strip()
        if len(value) >= MIN_MASKED:
            values |= {value, quote(value, safe="")}
    present = [v for v in values if v in text]
    if not present:
        return text
    spans = code_spans(text)
    pattern = re.compile("|".join(re.escape(v) for v in sorted(present, key=len, reverse=True)))

    def mask(m: re.Match[str]) -> str:
        if any(m.start() < end and start < m.end() for start, end in spans):
            return m.group(0)
        return REDACTED

    return pattern.sub(mask, text)


def shown_reason(reason: str, secret_values: Iterable[str] | None = None) -> str:
    """A classifier's reason as people see it: it may quote words of a file the classifier read, so known
    token shapes (``redact()``) and configured secrets' values are masked."""
    text = reason
    for value in sorted({(v or "").strip() for v in secret_values or ()}, key=len, reverse=True):
        if len(value) >= 4:
            text = text.replace(value, REDACTED).replace(quote(value, safe=""), REDACTED)
    return redact(text)
