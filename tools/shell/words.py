"""Shell words as bash sees them after quote removal: escapes, ANSI-C strings, brace expansion.

The classifier never matches text: it looks at the words a command would get after quote removal, escape
processing, ANSI-C decoding and brace expansion. A word that still depends on the run (a parameter
expansion, a command or arithmetic substitution) is *dynamic*; its text keeps the source of those parts
(``$HOME``) so rules can still recognise the worst cases, and its ``template`` keeps where each part sits
so that values the line itself fixes (``a=r; ${a}m``) can be filled in later.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from tree_sitter import Node

_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC
    r"|\x1b[PX^_][^\x1b]*\x1b\\"  # DCS/SOS/PM/APC
    r"|\x1b[@-Z\\-_]"  # two-byte sequences
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
)


def clean(text: str) -> str:
    """What the parser reads: ANSI escapes out, NFKC, invisible characters out, CR as newline.

    Unlike ``normalize`` it keeps whitespace and indentation, so code inside quotes (a multi-line
    ``python -c``) stays valid. Dropping characters only ever turns a word that would not run (``r\\u200bm``)
    into one that would, so the reading is never milder than bash's.
    """
    text = _ANSI.sub("", text)
    text = unicodedata.normalize("NFKC", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "".join(ch for ch in text if ch in "\n\t" or not unicodedata.category(ch).startswith("C"))


# Quoted characters that must not take part in brace expansion or globbing are swapped for private-use
# stand-ins while expanding; dynamic parts become one stand-in each so expansion cannot split them.
_QUOTED = {"{": "\ue000", "}": "\ue001", ",": "\ue002", "*": "\ue003", "?": "\ue004", "[": "\ue005",
           ".": "\ue006", "~": "\ue007"}
_UNQUOTE = {v: k for k, v in _QUOTED.items()}
_DYN_BASE = 0xF0000  # plane-15 private use: one code point per dynamic part
_MAX_BRACE = 512


@dataclass
class Word:
    text: str
    dynamic: bool = False  # holds an expansion or a substitution
    glob: bool = False  # unquoted * ? or [...]
    subs: list[Node] = field(default_factory=list)  # command/process substitutions inside, for static evaluation
    literal: bool = True  # no dynamic part and no quotes: what the text says is what bash sees
    # The text with each dynamic part as one stand-in (``stand_in(i)``) and those parts' sources, so that
    # values fixed by the line can be filled in (``tools/shell/values.py``).
    template: str = ""
    dyns: tuple[str, ...] = ()

    @property
    def procsub(self) -> Node | None:
        """The process substitution this word is made of, if it is exactly one."""
        if len(self.subs) == 1 and self.subs[0].type == "process_substitution" and self.text.startswith(("<(", ">(")):
            return self.subs[0]
        return None


def stand_in(i: int) -> str:
    return chr(_DYN_BASE + i)


def stand_in_index(ch: str) -> int | None:
    code = ord(ch) - _DYN_BASE
    return code if 0 <= code < 0x10000 else None


def ansi_c(body: str) -> str:
    """The body of $'...' decoded."""
    simple = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f",
              "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\" or i + 1 >= len(body):
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        m = None
        if nxt in simple:
            out.append(simple[nxt])
            i += 2
        elif nxt == "x" and (m := re.match(r"[0-9a-fA-F]{1,2}", body[i + 2:])):
            out.append(chr(int(m.group(), 16)))
            i += 2 + len(m.group())
        elif nxt in "uU" and (m := re.match(r"[0-9a-fA-F]{1,8}" if nxt == "U" else r"[0-9a-fA-F]{1,4}",
                                            body[i + 2:])):
            out.append(chr(min(int(m.group(), 16), 0x10FFFF)))
            i += 2 + len(m.group())
        elif nxt == "c" and i + 2 < len(body):
            out.append(chr(ord(body[i + 2].upper()) ^ 0x40))
            i += 3
        elif nxt in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1:])
            assert m is not None
            out.append(chr(int(m.group(), 8) & 0xFF))
            i += 1 + len(m.group())
        else:
            out.append("\\" + nxt)
            i += 2
    return unicodedata.normalize("NFKC", "".join(out))


def _quote_all(text: str) -> str:
    return "".join(_QUOTED.get(ch, ch) for ch in text)


_DQ_ESCAPE = re.compile(r"\\([$`\"\\\n])")


class _WordBuilder:
    """Turns a word node into one encoded string (quoted specials and dynamic parts as stand-ins)."""

    def __init__(self, src: bytes) -> None:
        self.src = src
        self.dyn: list[str] = []
        self.subs: list[Node] = []
        self.quoted = False

    def text(self, node: Node) -> str:
        return self.src[node.start_byte:node.end_byte].decode("utf-8", "replace")

    def dynamic(self, node: Node) -> str:
        self.dyn.append(self.text(node))
        return chr(_DYN_BASE + len(self.dyn) - 1)

    def unquoted(self, raw: str) -> str:
        out: list[str] = []
        i = 0
        while i < len(raw):
            ch = raw[i]
            if ch == "\\" and i + 1 < len(raw):
                if raw[i + 1] != "\n":
                    out.append(_quote_all(raw[i + 1]))
                    self.quoted = True
                i += 2
                continue
            out.append(ch)
            i += 1
        return "".join(out)

    def build(self, node: Node, in_dq: bool = False) -> str:
        t = node.type
        if t in ("simple_expansion", "expansion", "arithmetic_expansion"):
            for sub in descendants(node, ("command_substitution", "process_substitution")):
                self.subs.append(sub)
            return self.dynamic(node)
        if t in ("command_substitution", "process_substitution"):
            self.subs.append(node)
            return self.dynamic(node)
        if t == "raw_string":
            self.quoted = True
            return _quote_all(self.text(node)[1:-1])
        if t == "ansi_c_string":
            self.quoted = True
            return _quote_all(ansi_c(self.text(node)[2:-1]))
        if t == "string":
            self.quoted = True
            return self._gaps(node, node.start_byte + 1, max(node.start_byte + 1, node.end_byte - 1), True)
        if t == "translated_string":
            return "".join(self.build(c) for c in node.named_children)
        if node.named_child_count == 0 or t in ("word", "number"):
            raw = self.text(node)
            if in_dq:
                return _quote_all(_DQ_ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), raw))
            return self.unquoted(raw)
        return self._gaps(node, node.start_byte, node.end_byte, in_dq)

    def _gaps(self, node: Node, start: int, end: int, in_dq: bool) -> str:
        """Children resolved, the bytes between them taken literally (string contents, braces)."""
        out: list[str] = []
        pos = start
        for child in node.children:
            if child.end_byte <= start or child.start_byte >= end:
                continue
            if child.start_byte > pos:
                gap = self.src[pos:child.start_byte].decode("utf-8", "replace")
                out.append(_quote_all(_DQ_ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), gap))
                           if in_dq else self.unquoted(gap))
            if child.is_named:
                out.append(self.build(child, in_dq))
            else:
                raw = self.text(child)
                out.append(_quote_all(raw) if in_dq else self.unquoted(raw))
            pos = max(pos, child.end_byte)
        if pos < end:
            gap = self.src[pos:end].decode("utf-8", "replace")
            out.append(_quote_all(_DQ_ESCAPE.sub(lambda m: "" if m.group(1) == "\n" else m.group(1), gap))
                       if in_dq else self.unquoted(gap))
        return "".join(out)


def t_is_translated(node: Node) -> bool:
    nxt = node.next_sibling
    return nxt is not None and nxt.type == "string" and nxt.start_byte == node.end_byte


def descendants(node: Node, types: tuple[str, ...]) -> list[Node]:
    found: list[Node] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in types:
            found.append(n)
        else:
            stack.extend(n.children)
    return found


def _split_top(body: str, sep: str) -> list[str] | None:
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in body:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts if len(parts) > 1 else None


_SEQ = re.compile(r"^(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?$")


def _sequence(body: str) -> list[str] | None:
    m = _SEQ.match(body)
    if not m:
        return None
    a, b, step_s = m.group(1), m.group(2), m.group(3)
    step = abs(int(step_s)) if step_s and int(step_s) else 1
    if a.lstrip("-").isdigit() and b.lstrip("-").isdigit():
        lo, hi = int(a), int(b)
        rng = range(lo, hi + 1, step) if lo <= hi else range(lo, hi - 1, -step)
        return [str(x) for x in list(rng)[:_MAX_BRACE]]
    if len(a) == 1 and len(b) == 1 and not a.isdigit() and not b.isdigit():
        lo, hi = ord(a), ord(b)
        rng = range(lo, hi + 1, step) if lo <= hi else range(lo, hi - 1, -step)
        return [chr(x) for x in list(rng)[:_MAX_BRACE]]
    return None


def expand_braces(text: str) -> list[str]:
    """Bash brace expansion of an encoded word (quoted braces are already stand-ins)."""
    for i, ch in enumerate(text):
        if ch != "{" or (i > 0 and text[i - 1] == "$"):
            continue
        depth = 0
        for j in range(i, len(text)):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    body = text[i + 1:j]
                    alts = _split_top(body, ",") or _sequence(body)
                    if alts is None:
                        break
                    out: list[str] = []
                    for alt in alts:
                        for tail in expand_braces(alt + text[j + 1:]):
                            out.append(text[:i] + tail)
                            if len(out) >= _MAX_BRACE:
                                return out
                    return out
    return [text]


def _decode(encoded: str, dyn: list[str], subs: list[Node], quoted: bool) -> Word:
    out: list[str] = []
    template: list[str] = []
    used: list[str] = []
    dynamic = glob = False
    for ch in encoded:
        code = ord(ch)
        if code >= _DYN_BASE and code - _DYN_BASE < len(dyn):
            out.append(dyn[code - _DYN_BASE])
            template.append(stand_in(len(used)))
            used.append(dyn[code - _DYN_BASE])
            dynamic = True
        elif ch in _UNQUOTE:
            out.append(_UNQUOTE[ch])
            template.append(_UNQUOTE[ch])
        else:
            if ch in "*?" or (ch == "[" and "]" in encoded):
                glob = True
            out.append(ch)
            template.append(ch)
    return Word("".join(out), dynamic, glob, list(subs), literal=not dynamic and not quoted,
                template="".join(template), dyns=tuple(used))


def words_of(nodes: list[Node], src: bytes) -> list[Word]:
    """The words of adjacent argument nodes merged (tree-sitter splits ``$"x"`` and some odd words)."""
    groups: list[list[Node]] = []
    for n in nodes:
        if n.type == "$" and t_is_translated(n):
            continue
        if groups and groups[-1][-1].end_byte == n.start_byte:
            groups[-1].append(n)
        else:
            groups.append([n])
    words: list[Word] = []
    for group in groups:
        b = _WordBuilder(src)
        encoded = "".join(b.build(n) for n in group)
        for alt in expand_braces(encoded):
            words.append(_decode(alt, b.dyn, b.subs, b.quoted))
    return words


def word_of(node: Node, src: bytes) -> Word:
    b = _WordBuilder(src)
    return _decode(b.build(node), b.dyn, b.subs, b.quoted)
