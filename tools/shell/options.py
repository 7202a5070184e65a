"""Command-line options as the programs read them: clusters, attached values, GNU abbreviations.

``rm --recu --forc`` is ``rm --recursive --force`` to getopt_long, and git's parse-options does the same,
so a long option is matched to every option it abbreviates. An ambiguous abbreviation counts as all of
its candidates: the program would refuse it, but the reading must never be milder than the program's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tools.shell.parse import Word


@dataclass
class Opts:
    short: set[str] = field(default_factory=set)
    long: set[str] = field(default_factory=set)
    values: dict[str, list[Word]] = field(default_factory=dict)  # option (-x or --long) -> its values
    operands: list[Word] = field(default_factory=list)
    dynamic: bool = False  # a word in option position is only known at run time

    def has(self, *names: str) -> bool:
        return any((n in self.long) if n.startswith("--") else (n.lstrip("-") in self.short) for n in names)

    def value(self, *names: str) -> list[Word]:
        return [v for n in names for v in self.values.get(n, [])]


def expand_long(opt: str, known: tuple[str, ...]) -> list[str]:
    """The long options ``opt`` (without ``=value``) stands for."""
    if not known or opt in known:
        return [opt]
    matches = [k for k in known if k.startswith(opt)]
    return matches or [opt]


def parse_opts(words: list[Word], *, longs: tuple[str, ...] = (), short_args: str = "",
               long_args: tuple[str, ...] = (), stop_at_operand: bool = False) -> Opts:
    """Options and operands of ``words`` (the arguments, without the command name)."""
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
