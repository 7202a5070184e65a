"""tree-sitter-bash turns a command line into simple commands with statically resolved words (words.py).

Every simple command anywhere in the tree is reported: in lists, pipelines, subshells, ``{ }`` groups,
function bodies, ``if``/``for``/``while``/``case``, command and process substitutions and the bodies of
unquoted here-documents. Each carries what feeds its standard input (a here-document, a here-string, a
file, a duplicated descriptor, or the stage before it in a pipeline). A ``for``/``select`` loop shows as
an assignment of each listed value to its variable, ahead of its body; ``[[ ... ]]`` as a command named
``[[``. Function definitions are listed with their bodies, and a body that runs its own function in a
pipeline or in the background (``:(){ :|:& };:``) is marked a fork bomb - decided on the tree, so the
same text inside quotes is just text. A tree with ERROR or MISSING nodes is marked ``broken``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from tools.shell.words import Word, ansi_c, clean, descendants, expand_braces, stand_in, word_of, words_of

__all__ = ["Command", "Feed", "Redirect", "Script", "Word", "ansi_c", "clean", "expand_braces", "parse"]

_LANGUAGE = Language(tree_sitter_bash.language())
_local = threading.local()


def _parser() -> Parser:
    # Parser objects keep per-parse state, so each worker thread gets its own.
    parser = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = Parser(_LANGUAGE)
    return parser


@dataclass
class Redirect:
    op: str  # > >> >| &> &>> >& < <& <> << <<- <<<
    fd: str | None
    target: Word | None  # file (or fd number) for file redirects
    body: str | None = None  # here-document or here-string text
    body_static: bool = True  # False when expansions in the body are left unresolved
    word: Word | None = None  # a here-string's word, for values the line fixes


@dataclass
class Feed:
    """What a command reads on standard input."""

    kind: str  # "text" (here-doc/here-string), "file" (< FILE), "dup" (<&N), "pipe" (the stage before), "unknown"
    text: str | None = None
    static: bool = True
    file: Word | None = None  # the file, or for "dup" the descriptor number; for "text", a here-string's word
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
class Function:
    name: str
    body: str
    bomb: bool  # runs itself in a pipeline or in the background


@dataclass
class Script:
    commands: list[Command] = field(default_factory=list)
    functions: list[Function] = field(default_factory=list)
    # Loops, background jobs and pipeline stages: their commands need not run in the order of the text.
    unordered: bool = False
    redirects: list[Redirect] = field(default_factory=list)  # on compound statements ({ } > f, done < f)
    broken: bool = False
    text: str = ""



# ------------------------------------------------------------------------------------------ the walk

_REDIRECT_TYPES = ("file_redirect", "heredoc_redirect", "herestring_redirect")
_STATEMENTS = ("subshell", "compound_statement", "if_statement", "while_statement", "for_statement",
               "case_statement", "pipeline", "list")
_ATOMS = ("word", "raw_string", "string", "concatenation", "ansi_c_string", "number", "simple_expansion",
          "expansion", "command_substitution", "test_operator", "regex")


class _Walker:
    def __init__(self, src: bytes) -> None:
        self.src = src
        self.script = Script(text=src.decode("utf-8", "replace"))

    def text(self, node: Node) -> str:
        return self.src[node.start_byte:node.end_byte].decode("utf-8", "replace")

    def walk(self, node: Node, feed: Feed | None) -> list[Command]:
        """Records every simple command under ``node``; returns those of this node's own pipeline stage."""
        t = node.type
        if t in ("for_statement", "while_statement", "c_style_for_statement", "pipeline", "&"):
            self.script.unordered = True
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
            for sub in descendants(node, ("command_substitution",)):
                self.walk(sub, None)
            return []
        if t == "variable_assignment":
            # A bare assignment runs nothing itself, but rules look at some names (PAGER=..., alias tables).
            return self.assignment_only(node, feed)
        if t == "for_statement":
            self.loop_binding(node)
        elif t == "function_definition":
            self.function(node)
        elif t == "test_command":
            return self.test_command(node, feed)
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
            return Redirect("<<<", fd, None, w.text + "\n", not w.dynamic, word=w)
        dest = [c for c in node.children_by_field_name("destination")] or [
            c for c in node.children if c.is_named and c.type != "file_descriptor"]
        target = words_of(dest, self.src)
        return Redirect(op, fd, target[0] if target else None)

    def feed_from(self, redirects: list[Redirect], feed: Feed | None) -> Feed | None:
        for r in redirects:
            if r.fd not in (None, "0"):
                continue
            if r.body is not None:
                feed = Feed("text", r.body, r.body_static, file=r.word)
            elif r.op in ("<", "<>") and r.target is not None:
                feed = Feed("file", file=r.target)
            elif r.op == "<&" and r.target is not None:
                feed = Feed("dup", file=r.target)
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
                    for sub in descendants(c, ("command_substitution", "process_substitution")):
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
            elif c.type in _STATEMENTS:  # ``coproc NAME ( ... )`` reads as a command holding a subshell
                self.walk(c, feed)
            elif c.type not in ("comment", "ERROR"):
                word_nodes.append(c)
            else:
                for sub in descendants(c, ("command_substitution", "process_substitution")):
                    self.walk(sub, None)
        redirects, trailing = self._redirect_children(redirect_nodes)
        feed = self.feed_from(redirects, feed)
        if extra:
            redirects = [*extra, *redirects]
        cmd = Command(words_of(word_nodes, self.src), assigns, redirects, feed, node)
        self.script.commands.append(cmd)
        for c in node.children:
            if c.type not in _REDIRECT_TYPES:
                for sub in descendants(c, ("command_substitution", "process_substitution")):
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
        for sub in descendants(node, ("command_substitution", "process_substitution")):
            self.walk(sub, None)
        return [cmd]

    def loop_binding(self, node: Node) -> None:
        var = node.child_by_field_name("variable")
        if var is None:
            return
        values = node.children_by_field_name("value")
        name = self.text(var)
        words = words_of(values, self.src) if values else [word_of_source("$@")]
        self.script.commands.append(Command([], [(name, w) for w in words], [], None, node))

    def function(self, node: Node) -> None:
        name_node = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        if name_node is None or body is None:
            return
        name = self.text(name_node)
        bomb = False
        for cmd in descendants(body, ("command",)):
            head = cmd.child_by_field_name("name")
            if head is None or self.text(head) != name:
                continue
            up: Node | None = cmd
            while up is not None and up != body:
                nxt = up.next_sibling
                if up.type == "pipeline" or (nxt is not None and nxt.type == "&"):
                    bomb = True
                up = up.parent
        self.script.functions.append(Function(name, self.text(body), bomb))

    def test_command(self, node: Node, feed: Feed | None) -> list[Command]:
        atoms = sorted(descendants(node, _ATOMS), key=lambda n: n.start_byte)
        words = [Word("[["), *(w for a in atoms for w in words_of([a], self.src))]
        cmd = Command(words, [], [], feed, node)
        self.script.commands.append(cmd)
        for sub in descendants(node, ("command_substitution", "process_substitution")):
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
        for sub in descendants(node, ("command_substitution", "process_substitution")):
            self.walk(sub, None)
        return [cmd]


def word_of_source(src: str) -> Word:
    """A word made of one dynamic part (``$@``)."""
    return Word(src, dynamic=True, template=stand_in(0), dyns=(src,), literal=False)


def parse(text: str) -> Script:
    """The simple commands of a (cleaned) command line. Never raises."""
    src = text.encode("utf-8", "surrogatepass")
    tree = _parser().parse(src)
    walker = _Walker(src)
    walker.script.broken = tree.root_node.has_error
    walker.walk(tree.root_node, None)
    return walker.script
