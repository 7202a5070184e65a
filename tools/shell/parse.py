"""tree-sitter-bash turns a command line into simple commands with statically resolved words.

The classifier never matches text: it looks at the words a command would get after quote removal, escape
processing, ANSI-C decoding and brace expansion. A word that still depends on the run (a parameter
expansion, a command or arithmetic substitution) is *dynamic*; its text keeps the source of those parts
(``$HOME``) so rules can still recognise the worst cases.

Every simple command anywhere in the tree is reported: in lists, pipelines, subshells, ``{ }`` groups,
function bodies, ``if``/``for``/``while``/``case``, command and process substitutions and the bodies of
unquoted here-documents. Each carries what feeds its standard input (a here-document, a here-string, a
file, or the stage before it in a pipeline). A tree with ERROR or MISSING nodes is marked ``broken``.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import dataclass, field

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

_LANGUAGE = Language(tree_sitter_bash.language())
_local = threading.local()


def _parser() -> Parser:
    # Parser objects keep per-parse state, so each worker thread gets its own.
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = Parser(_LANGUAGE)
    return parser


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


# ------------------------------------------------------------------------------------------- words

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

    @property
    def procsub(self) -> Node | None:
        """The process substitution this word is made of, if it is exactly one."""
        if len(self.subs) == 1 and self.subs[0].type == "process_substitution" and self.text.startswith(("<(", ">(")):
            return self.subs[0]
        return None


@dataclass
class Redirect:
    op: str  # > >> >| &> &>> >& < <& <> << <<- <<<
    fd: str | None
    target: Word | None  # file (or fd number) for file redirects
    body: str | None = None  # here-document or here-string text
    body_static: bool = True  # False when expansions in the body are left unresolved


@dataclass
class Feed:
    """What a command reads on standard input."""

    kind: str  # "text" (here-doc/here-string), "file" (< FILE), "pipe" (the stage before)
    text: str | None = None
    static: bool = True
    file: Word | None = None
    stage: list[Command] | None = None  # the commands of the stage before, for "pipe"


@dataclass
class Command:
    words: list[Word]
    assigns: list[tuple[str, Word]]
    redirects: list[Redirect]
    feed: Feed | None
    node: Node | None = None
    declaration: bool = False  # export/declare/local/readonly/typeset: assignments are its arguments


@dataclass
class Script:
    commands: list[Command] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)  # on compound statements ({ } > f, done < f)
    broken: bool = False
    text: str = ""


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
            for sub in _descendants(node, ("command_substitution", "process_substitution")):
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


def _descendants(node: Node, types: tuple[str, ...]) -> list[Node]:
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
    dynamic = glob = False
    for ch in encoded:
        code = ord(ch)
        if code >= _DYN_BASE and code - _DYN_BASE < len(dyn):
            out.append(dyn[code - _DYN_BASE])
            dynamic = True
        elif ch in _UNQUOTE:
            out.append(_UNQUOTE[ch])
        else:
            if ch in "*?" or (ch == "[" and "]" in encoded):
                glob = True
            out.append(ch)
    return Word("".join(out), dynamic, glob, list(subs), literal=not dynamic and not quoted)


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


# ------------------------------------------------------------------------------------------ the walk

_REDIRECT_TYPES = ("file_redirect", "heredoc_redirect", "herestring_redirect")


class _Walker:
    def __init__(self, src: bytes) -> None:
        self.src = src
        self.script = Script(text=src.decode("utf-8", "replace"))

    def text(self, node: Node) -> str:
        return self.src[node.start_byte:node.end_byte].decode("utf-8", "replace")

    def walk(self, node: Node, feed: Feed | None) -> list[Command]:
        """Records every simple command under ``node``; returns those of this node's own pipeline stage."""
        t = node.type
        if t == "command":
            return self.command(node, feed)
        if t in ("declaration_command", "unset_command"):
            return self.declaration(node, feed)
        if t == "pipeline":
            return self.pipeline([c for c in node.children if c.is_named], feed)
        if t == "redirected_statement":
            return self.redirected(node, feed)
        if t in ("command_substitution", "process_substitution"):
            for c in node.children:
                self.walk(c, None)
            return []
        if t == "heredoc_body":
            for sub in _descendants(node, ("command_substitution",)):
                self.walk(sub, None)
            return []
        if t == "variable_assignment":
            # A bare assignment runs nothing itself, but rules look at some names (PAGER=..., alias tables).
            return self.assignment_only(node, feed)
        own: list[Command] = []
        for c in node.children:
            own.extend(self.walk(c, feed))
        return own

    def pipeline(self, stages: list[Node], feed: Feed | None) -> list[Command]:
        prev: list[Command] | None = None
        last: list[Command] = []
        for stage in stages:
            last = self.walk(stage, feed if prev is None else Feed("pipe", stage=prev))
            prev = last
        return last

    def redirect(self, node: Node) -> Redirect:
        fd_node = node.child_by_field_name("descriptor")
        fd = self.text(fd_node) if fd_node is not None else None
        op = next((c.type for c in node.children if not c.is_named), "")
        if node.type == "heredoc_redirect":
            start = next((c for c in node.children if c.type == "heredoc_start"), None)
            body = next((c for c in node.children if c.type == "heredoc_body"), None)
            delim = self.text(start) if start is not None else ""
            quoted = any(q in delim for q in "'\"\\")
            text = self.text(body) if body is not None else ""
            if op == "<<-":
                text = "\n".join(line.lstrip("\t") for line in text.split("\n"))
            dynamic = not quoted and body is not None and any(c.is_named and c.type != "heredoc_content"
                                                              for c in body.children)
            return Redirect(op, fd, None, text, not dynamic)
        if node.type == "herestring_redirect":
            content = [c for c in node.children if c.is_named]
            w = word_of(content[0], self.src) if content else Word("")
            return Redirect("<<<", fd, None, w.text + "\n", not w.dynamic)
        dest = [c for c in node.children_by_field_name("destination")] or [
            c for c in node.children if c.is_named and c.type != "file_descriptor"]
        target = words_of(dest, self.src)
        return Redirect(op, fd, target[0] if target else None)

    def feed_from(self, redirects: list[Redirect], feed: Feed | None) -> Feed | None:
        for r in redirects:
            if r.fd not in (None, "0"):
                continue
            if r.body is not None:
                feed = Feed("text", r.body, r.body_static)
            elif r.op in ("<", "<>") and r.target is not None:
                feed = Feed("file", file=r.target)
        return feed

    def _redirect_children(self, redirect_nodes: list[Node]) -> tuple[list[Redirect], list[Node]]:
        """Redirects, plus what tree-sitter hangs inside a here-document redirect (``<<EOF | sh``)."""
        redirects: list[Redirect] = []
        trailing: list[Node] = []
        for r in redirect_nodes:
            redirects.append(self.redirect(r))
            for c in r.children:
                if c.type in _REDIRECT_TYPES:
                    redirects.append(self.redirect(c))
                    self._redirect_children([c])
                elif c.type == "heredoc_body":
                    self.walk(c, None)
                elif r.type == "heredoc_redirect" and c.is_named and c.type not in ("heredoc_start", "heredoc_end"):
                    trailing.append(c)
                elif c.is_named:
                    for sub in _descendants(c, ("command_substitution", "process_substitution")):
                        self.walk(sub, None)
        return redirects, trailing

    def _after_heredoc(self, node: Node, trailing: list[Node], own: list[Command]) -> list[Command]:
        for extra in trailing:
            if extra.type == "pipeline":
                stages = [c for c in extra.children if c.is_named]
                while len(stages) == 1 and stages[0].type == "pipeline":
                    stages = [c for c in stages[0].children if c.is_named]
                own = self.pipeline_from(stages, own)
            else:
                self.walk(extra, None)
        return own

    def pipeline_from(self, stages: list[Node], first: list[Command]) -> list[Command]:
        prev = first
        for stage in stages:
            prev = self.walk(stage, Feed("pipe", stage=prev))
        return prev

    def redirected(self, node: Node, feed: Feed | None) -> list[Command]:
        body = node.child_by_field_name("body")
        redirect_nodes = [c for c in node.children if c.type in _REDIRECT_TYPES]
        redirects, trailing = self._redirect_children(redirect_nodes)
        inner_feed = self.feed_from(redirects, feed)
        if body is not None and body.type == "command":
            own = self.command(body, inner_feed, extra=redirects)
        else:
            self.script.redirects.extend(redirects)
            own = self.walk(body, inner_feed) if body is not None else []
        for c in node.children:
            if c != body and c.type not in _REDIRECT_TYPES and c.is_named:
                self.walk(c, None)
        return self._after_heredoc(node, trailing, own)

    def command(self, node: Node, feed: Feed | None, extra: list[Redirect] | None = None) -> list[Command]:
        assigns: list[tuple[str, Word]] = []
        word_nodes: list[Node] = []
        redirect_nodes: list[Node] = []
        for c in node.children:
            if c.type == "variable_assignment":
                assigns.append(self._assignment(c))
            elif c.type in _REDIRECT_TYPES:
                redirect_nodes.append(c)
            elif c.type == "command_name":
                word_nodes.extend(c.children)
            elif c.type != "comment":
                word_nodes.append(c)
        redirects, trailing = self._redirect_children(redirect_nodes)
        feed = self.feed_from(redirects, feed)
        if extra:
            redirects = [*extra, *redirects]
        cmd = Command(words_of(word_nodes, self.src), assigns, redirects, feed, node)
        self.script.commands.append(cmd)
        for c in node.children:
            if c.type not in _REDIRECT_TYPES:
                for sub in _descendants(c, ("command_substitution", "process_substitution")):
                    self.walk(sub, None)
        return self._after_heredoc(node, trailing, [cmd])

    def _assignment(self, node: Node) -> tuple[str, Word]:
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        key = self.text(name) if name is not None else ""
        if value is None:
            return key, Word("")
        if value.type == "array":
            items = words_of([c for c in value.children if c.is_named], self.src)
            return key, Word(" ".join(w.text for w in items), any(w.dynamic for w in items))
        return key, word_of(value, self.src)

    def assignment_only(self, node: Node, feed: Feed | None) -> list[Command]:
        cmd = Command([], [self._assignment(node)], [], feed, node)
        self.script.commands.append(cmd)
        for sub in _descendants(node, ("command_substitution", "process_substitution")):
            self.walk(sub, None)
        return [cmd]

    def declaration(self, node: Node, feed: Feed | None) -> list[Command]:
        words: list[Word] = []
        assigns: list[tuple[str, Word]] = []
        for c in node.children:
            if c.type == "variable_assignment":
                key, value = self._assignment(c)
                assigns.append((key, value))
                words.append(Word(f"{key}={value.text}", value.dynamic))
            elif c.type not in ("comment",) and (c.is_named or c.type in ("export", "declare", "local",
                                                                          "readonly", "typeset", "unset",
                                                                          "unsetenv")):
                words.extend(words_of([c], self.src))
        cmd = Command(words, assigns, [], feed, node, declaration=True)
        self.script.commands.append(cmd)
        for sub in _descendants(node, ("command_substitution", "process_substitution")):
            self.walk(sub, None)
        return [cmd]


def parse(text: str) -> Script:
    """The simple commands of a (cleaned) command line. Never raises."""
    src = text.encode("utf-8", "surrogatepass")
    tree = _parser().parse(src)
    walker = _Walker(src)
    walker.script.broken = tree.root_node.has_error
    walker.walk(tree.root_node, None)
    return walker.script
