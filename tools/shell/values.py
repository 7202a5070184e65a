"""Values the command line itself fixes, filled into words that are only dynamic in form.

``a=r; ${a}m -rf /``, ``rm${IFS}-rf${IFS}/``, ``for i in /; do rm -rf $i; done``, ``sh -c 'rm -rf "$0"' /``
and ``echo x | base64 -d`` in a substitution all name their command or target in the text. Each dynamic
part of a word gets its possible values (a variable's assignments in the line, a loop's list, the
positional parameters of ``sh -c``/a function call, IFS's default, the static output of a substitution);
parts that stay unknown keep their source, so the filled command is still dynamic there. The filled
command is checked *in addition to* the dynamic reading, so filling can only make a verdict stricter.
"""

from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING

from tools.shell.words import Word, stand_in_index

if TYPE_CHECKING:
    from tools.shell.engine import Engine as _Base
else:
    _Base = object

MAX_COMBINATIONS = 16
_SIMPLE = re.compile(r"\$(?:\{([A-Za-z_]\w*|\d+|[@*])\}|([A-Za-z_]\w*|\d|[@*]))")
_ARRAY = re.compile(r"\$\{([A-Za-z_]\w*)\[[@*0]\]\}")
_SAFE = re.compile(r"[\w@%+=:,./-]+")


def quote(word: str) -> str:
    return word if _SAFE.fullmatch(word) else "'" + word.replace("'", "'\\''") + "'"


def _split(value: str, split: re.Pattern[str] | None) -> str:
    if split is None:
        return quote(value)
    pieces = split.split(value)
    if not any(pieces):
        return " " if value else ""
    return (" " if not pieces[0] else "") + " ".join(quote(p) for p in pieces if p) + (" " if not pieces[-1] else "")


class Values(_Base):
    def static_output(self, text: str) -> bytes | None:  # provided by the walk
        raise NotImplementedError

    def part_values(self, src: str) -> list[str] | None:
        """Possible values of one dynamic part (its source text), or None when only the run knows it."""
        m = _SIMPLE.fullmatch(src) or _ARRAY.fullmatch(src)
        if m:
            name = next(g for g in m.groups() if g is not None)
            if name.isdigit() or name in ("@", "*"):
                return self.positional_value(name)
            if name in self.ctx.vars:
                known = self.ctx.vars[name]
                return list(known) if known is not None else None
            return [" "] if name == "IFS" else None
        if src.startswith(("$(", "`")) and not src.startswith("$(("):
            body = src[2:-1] if src.startswith("$(") else src[1:-1]
            data = self.static_output(body)
            return [data.decode("utf-8", "replace").rstrip("\n")] if data is not None else None
        return None

    def positional_value(self, name: str) -> list[str] | None:
        pos = self.positional
        if pos is None:
            return None
        if name in ("@", "*"):
            rest = pos[1:]
            return None if any(w.dynamic and w.dyns for w in rest) else [" ".join(w.text for w in rest)]
        i = int(name)
        if i >= len(pos):
            return [""]
        # A word that is dynamic without dynamic parts stands for paths found at run time (find's ``{}``):
        # its text is still the worst case to try.
        return None if pos[i].dynamic and pos[i].dyns else [pos[i].text]

    def values(self, word: Word) -> list[str] | None:
        """Every value ``word`` may take, when the line fixes all its dynamic parts."""
        if not word.dynamic:
            return [word.text]
        pieces: list[list[str]] = []
        for ch in word.template or word.text:
            i = stand_in_index(ch)
            if i is None or i >= len(word.dyns):
                pieces.append([ch])
                continue
            vals = self.part_values(word.dyns[i])
            if vals is None:
                return None
            pieces.append(vals)
        out = []
        for combo in itertools.islice(itertools.product(*pieces), MAX_COMBINATIONS):
            out.append("".join(combo))
        return out

    def fill(self, words: list[Word]) -> list[str]:
        """Command lines with the known values filled in (unknown parts keep their source); [] if none is known."""
        per_word: list[list[str]] = []
        resolved = False
        ifs_known = self.ctx.vars.get("IFS")
        ifs = ifs_known[0] if ifs_known and len(ifs_known) == 1 else " \t\n"
        split = re.compile("[" + re.escape(ifs) + "]+") if ifs else None
        for w in words:
            if not w.dynamic:
                per_word.append([quote(w.text)])
                continue
            segments: list[list[str]] = []
            literal: list[str] = []
            for ch in w.template or w.text:
                i = stand_in_index(ch)
                if i is None or i >= len(w.dyns):
                    literal.append(ch)
                    continue
                if literal:
                    segments.append([quote("".join(literal))])
                    literal = []
                vals = self.part_values(w.dyns[i])
                if vals is None:
                    segments.append([w.dyns[i]])
                else:
                    resolved = True
                    # Unquoted, a value is split on IFS; reading it so is never milder.
                    segments.append([_split(v, split) for v in vals])
            if literal:
                segments.append([quote("".join(literal))])
            per_word.append(["".join(c) for c in itertools.islice(itertools.product(*segments), MAX_COMBINATIONS)])
        if not resolved:
            return []
        return [" ".join(c) for c in itertools.islice(itertools.product(*per_word), MAX_COMBINATIONS)]
