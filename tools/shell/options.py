"""Command-line options as the programs read them: clusters, attached values, GNU abbreviations, and the
table of each known program's options (``Spec``) that says which are harmless.

``rm --recu --forc`` is ``rm --recursive --force`` to getopt_long, and git's parse-options does the same,
so a long option is matched to every option it abbreviates. An ambiguous abbreviation counts as all of
its candidates: the program would refuse it, but the reading must never be milder than the program's.

A ``Spec`` lists every option of a program the classifier knows, with its arity, so that the words are
read as the program reads them; an option that is not in it is unknown and asks (``optcheck.py``). The
tables are written compactly (``spec``): short options as letters (``x:`` takes a value, ``x::`` an
attached optional one), long options as names (``name=`` takes a value, ``name=2`` two, ``name?=`` an
attached optional one). A mark in front says the option is not harmless by itself: ``>`` writes the file
its value names (the workspace rule decides), ``!`` runs its value as a command, ``*`` is acted on by the
program's own rule (which deletes, writes or runs something). ``risky`` options always ask, with why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from tools.shell.parse import Word


@dataclass
class Opts:
    short: set[str] = field(default_factory=set)
    long: set[str] = field(default_factory=set)
    values: dict[str, list[Word]] = field(default_factory=dict)  # option (-x or --long) -> its values
    operands: list[Word] = field(default_factory=list)
    dynamic: bool = False  # a word in option position is only known at run time
    unknown: list[str] = field(default_factory=list)  # options the spec does not know, as written
    seen: list[str] = field(default_factory=list)  # every option as the spec names it (-x, --long), in order
    loose: list[Word] = field(default_factory=list)  # words in option position that may expand to an option

    def has(self, *names: str) -> bool:
        return any((n in self.long) if n.startswith("--") else (n.lstrip("-") in self.short) for n in names)

    def value(self, *names: str) -> list[Word]:
        return [v for n in names for v in self.values.get(n, [])]


@dataclass(frozen=True)
class Spec:
    """The options of one program (or one subcommand): how many values each takes, and what each does."""

    flags: frozenset[str] = frozenset()  # -x and --long that take no value
    short_args: str = ""  # short options that take a value (attached or the next word)
    short_opt: str = ""  # short options with an optional value, attached only
    long_args: tuple[str, ...] = ()  # long options that take a value
    long_two: tuple[str, ...] = ()  # long options that take two values (jq --arg NAME VALUE)
    long_opt: tuple[str, ...] = ()  # long options with an optional value, attached only
    writes: frozenset[str] = frozenset()  # options whose value is a file the program writes
    runs: frozenset[str] = frozenset()  # options whose value is a command the program runs
    ruled: frozenset[str] = frozenset()  # options the program's own rule acts on
    risky: Mapping[str, str] = field(default_factory=dict)  # option -> what it does (always asks)
    values: Mapping[str, str] = field(default_factory=dict)  # option -> regex its values must match
    numbers: bool = False  # -NUM is a count or an operand (head -5, seq -1 1)
    stop: bool = False  # options end at the first operand (POSIX order; the rest is the program's argv)
    ends: frozenset[str] = frozenset()  # options after which no more options are read (python -c CODE)
    free: bool = False  # the program reads no options: every word is an operand (echo, test)
    plus: bool = False  # +x is an option too (bash +e)
    words: Mapping[str, int] = field(default_factory=dict)  # whole-word options (zip -TT CMD) -> values taken
    negatable: bool = False  # every --x also reads as --no-x, and the other way round (git's parse-options)
    subs: Mapping[str, Spec] | None = None  # per subcommand; this spec holds the options before it

    @property
    def longs(self) -> tuple[str, ...]:
        """Every long option, for abbreviations (risky ones too, so an abbreviation of one is caught)."""
        return tuple(dict.fromkeys([*(f for f in self.flags if f.startswith("--")), *self.long_args,
                                    *self.long_two, *self.long_opt, *(r for r in self.risky if r.startswith("--"))]))

    @property
    def short(self) -> str:
        return "".join(f[1] for f in self.flags if len(f) == 2 and not f.startswith("--")) + self.short_args + \
            self.short_opt

    @property
    def pure(self) -> bool:
        """Every option only changes what the program reads or prints: a word that may expand to an option
        (``$x``, ``*``) cannot make it delete, write or run anything."""
        return self.free or not (self.writes or self.runs or self.ruled or self.risky)

    def known(self, opt: str) -> bool:
        if self.negatable and opt.startswith("--") and opt not in self.risky:
            alt = "--" + opt[5:] if opt.startswith("--no-") else "--no-" + opt[2:]
            if alt not in self.risky and self._known(alt):
                return True
        return self._known(opt)

    def _known(self, opt: str) -> bool:
        return opt in self.flags or opt in self.risky or opt in self.long_args or opt in self.long_two or \
            opt in self.long_opt or opt in self.words or (len(opt) == 2 and opt[1] in self.short_args + self.short_opt)


def spec(short: str = "", long: str = "", *, risky: Mapping[str, str] | None = None,
         values: Mapping[str, str] | None = None, numbers: bool = False, stop: bool = False, ends: str = "",
         free: bool = False, plus: bool = False, subs: Mapping[str, Spec] | None = None) -> Spec:
    """A ``Spec`` from the compact notation (see the module docstring)."""
    flags: set[str] = set()
    short_args = short_opt = ""
    long_args: list[str] = []
    long_two: list[str] = []
    long_opt: list[str] = []
    words: dict[str, int] = {}
    marks: dict[str, set[str]] = {">": set(), "!": set(), "*": set()}
    for chunk in short.split():
        if chunk.lstrip(">!*").startswith("-"):  # a whole word: zip -TT, xxd -cols
            name = chunk.lstrip(">!*").rstrip(":")
            words[name] = 1 if chunk.endswith(":") else 0
            if chunk[0] in marks:
                marks[chunk[0]].add(name)
            continue
        for m in re.finditer(r"([>!*]?)([^\s:>!*])(:{0,2})", chunk):
            mark, ch, colons = m.groups()
            name = "-" + ch
            if colons == ":":
                short_args += ch
            elif colons == "::":
                short_opt += ch
            else:
                flags.add(name)
            if mark:
                marks[mark].add(name)
    for word in long.split():
        mark = word[0] if word[0] in marks else ""
        word = word.lstrip(">!*")
        name, eq, arity = word.partition("=")
        optional = name.endswith("?")
        name = "--" + name.rstrip("?")
        if optional:
            long_opt.append(name)
        elif not eq:
            flags.add(name)
        elif arity == "2":
            long_two.append(name)
        else:
            long_args.append(name)
        if mark:
            marks[mark].add(name)
    return Spec(flags=frozenset(flags), short_args=short_args, short_opt=short_opt, long_args=tuple(long_args),
                long_two=tuple(long_two), long_opt=tuple(long_opt), writes=frozenset(marks[">"]),
                runs=frozenset(marks["!"]), ruled=frozenset(marks["*"]), risky=dict(risky or {}),
                values=dict(values or {}), numbers=numbers, stop=stop, ends=frozenset(ends.split()), free=free,
                plus=plus, words=words, subs=subs)


def expand_long(opt: str, known: tuple[str, ...]) -> list[str]:
    """The long options ``opt`` (without ``=value``) stands for."""
    if not known or opt in known:
        return [opt]
    matches = [k for k in known if k.startswith(opt)]
    return matches or [opt]


def _may_be_option(w: Word) -> bool:
    """A word whose expansion may begin with ``-``: it starts with an expansion or a glob wildcard."""
    if w.dynamic and w.template[:1] and 0xF0000 <= ord(w.template[0]) < 0x100000:
        return True
    return w.glob and w.text[:1] in ("*", "?", "[")


_NUMBER = re.compile(r"-\d+")


def _is_stand_in(ch: str) -> bool:
    return 0xF0000 <= ord(ch) < 0x100000


def _dynamic_option(w: Word, spec: Spec) -> bool:
    """Whether a dynamic word's *options* are only known at run time (``--author=$(...)`` has a fixed option
    and a dynamic value; ``-$x`` and ``--$x`` do not)."""
    t = w.template or w.text
    if t.startswith("--"):
        return any(_is_stand_in(c) for c in t.partition("=")[0])
    for ch in t[1:]:
        if _is_stand_in(ch):
            return True
        if ch in spec.short_args or ch in spec.short_opt:
            return False
    return False


def parse_opts(words: list[Word], *, longs: tuple[str, ...] = (), short_args: str = "",
               long_args: tuple[str, ...] = (), stop_at_operand: bool = False, spec: Spec | None = None) -> Opts:
    """Options and operands of ``words`` (the arguments, without the command name); with ``spec``, as that
    program reads them, and the options it does not know in ``unknown``."""
    if spec is not None:
        if spec.free:
            return Opts(operands=list(words))
        return _parse_spec(words, spec)
    o = Opts()
    longs = longs or long_args
    i = 0
    ended = False
    while i < len(words):
        w = words[i]
        t = w.text
        i += 1
        if ended or not t.startswith("-") or t == "-":
            if w.dynamic and not ended:
                o.dynamic = True
            o.operands.append(w)
            if stop_at_operand:
                ended = True
            continue
        if t == "--":
            ended = True
            continue
        if w.dynamic:
            o.dynamic = True
        if t.startswith("--"):
            name, eq, val = t.partition("=")
            for full in expand_long(name, longs):
                o.long.add(full)
                if eq:
                    o.values.setdefault(full, []).append(Word(val, w.dynamic))
                elif full in long_args and i < len(words):
                    o.values.setdefault(full, []).append(words[i])
            if not eq and any(f in long_args for f in expand_long(name, longs)) and i < len(words):
                i += 1
            continue
        for j, ch in enumerate(t[1:], start=1):
            o.short.add(ch)
            if ch in short_args:
                rest = t[j + 1:]
                if rest:
                    o.values.setdefault("-" + ch, []).append(Word(rest, w.dynamic))
                elif i < len(words):
                    o.values.setdefault("-" + ch, []).append(words[i])
                    i += 1
                break
    return o


def _parse_spec(words: list[Word], spec: Spec) -> Opts:
    o = Opts()
    longs = spec.longs
    i = 0
    ended = False
    while i < len(words):
        w = words[i]
        t = w.text
        i += 1
        is_opt = t.startswith("-") or (spec.plus and t.startswith("+"))
        if ended or not is_opt or t in ("-", "+"):
            if not ended and _may_be_option(w):
                o.loose.append(w)
                o.dynamic = o.dynamic or w.dynamic
            o.operands.append(w)
            ended = ended or spec.stop
            continue
        if t == "--":
            ended = True
            continue
        if w.dynamic and _dynamic_option(w, spec):
            o.dynamic = True
            o.loose.append(w)
        if spec.numbers and _NUMBER.fullmatch(t):
            continue
        word_name, eq, val = t.partition("=")
        if word_name in spec.words:
            o.seen.append(word_name)
            o.long.add(word_name)
            if eq:
                o.values.setdefault(word_name, []).append(Word(val, w.dynamic))
            elif spec.words[word_name] and i < len(words):
                o.values.setdefault(word_name, []).append(words[i])
                i += 1
            ended = ended or word_name in spec.ends
            continue
        if t.startswith("--"):
            name, eq, val = t.partition("=")
            fulls = expand_long(name, longs)
            for full in fulls:
                o.long.add(full)
                o.seen.append(full)
                if not spec.known(full):
                    o.unknown.append(name)
                if eq:
                    o.values.setdefault(full, []).append(Word(val, w.dynamic))
                elif full in spec.long_args and i < len(words):
                    o.values.setdefault(full, []).append(words[i])
                elif full in spec.long_two:
                    o.values.setdefault(full, []).extend(words[i:i + 2])
            if not eq and any(f in spec.long_two for f in fulls):
                i += 2
            elif not eq and any(f in spec.long_args for f in fulls) and i < len(words):
                i += 1
            if any(f in spec.ends for f in fulls):
                ended = True
            continue
        for j, ch in enumerate(t[1:], start=1):
            o.short.add(ch)
            opt = "-" + ch
            o.seen.append(opt)
            if not spec.known(opt):
                o.unknown.append(t[0] + ch)
            if ch in spec.short_args or ch in spec.short_opt:
                rest = t[j + 1:]
                if rest:
                    o.values.setdefault(opt, []).append(Word(rest, w.dynamic))
                elif ch in spec.short_args and i < len(words):
                    o.values.setdefault(opt, []).append(words[i])
                    i += 1
                ended = ended or opt in spec.ends
                break
            ended = ended or opt in spec.ends
    return o
