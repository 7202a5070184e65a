"""The option allowlist and the delete rule, as the walk applies them to every simple command.

Options: a program the classifier knows has a table of its options (``tables.py``); an option that is not
in it asks, a risky one asks with its reason, a value that must be plain (a backup suffix, a perl module
name) asks when it is not, and an option that writes or runs its value hands that on to the workspace
rule or to the walk. For a program whose options may delete, write or run something, a word that may
*expand* to an option asks too: a value only known at run time, or a glob when a file whose name starts
with ``-`` may match it (``touch -- --remove-files; tar -cf a.tar *``).

Deletes: removing files one by one can empty a folder as surely as ``rm -r``. Each command that deletes
files inside the workspace (``rm``, ``unlink``, ``git rm``, a compressor replacing its inputs) may name at
most ``MAX_DELETES`` files, and so may the whole line together; a pattern (a glob, a value only known at run
time) or a directory tree asks whatever its size.
"""

from __future__ import annotations

import glob
import os
import posixpath
import re
from typing import TYPE_CHECKING

from tools.shell.options import Opts, Spec, expand_long, parse_opts
from tools.shell.parse import Word
from tools.shell.tables import OPTIONS, SHELL_RCS
from tools.shell.tables_run import ATTACHED_UNREAD, DB_SUBCOMMANDS

if TYPE_CHECKING:
    from tools.shell.engine import Engine as _Base
else:
    _Base = object

MAX_DELETES = 3
_VERSIONED = re.compile(r"[\d.]+$")


def spec_for(name: str) -> Spec | None:
    """The table of ``name`` (``python3.12`` reads as ``python3``'s, then ``python``'s)."""
    found = OPTIONS.get(name)
    if found is None and _VERSIONED.search(name):
        found = OPTIONS.get(name.rstrip("0123456789.").rstrip("-")) or OPTIONS.get(_VERSIONED.sub("", name))
    return found


class OptionCheck(_Base):
    def check_options(self, label: str, args: list[Word], spec: Spec) -> Opts:
        """Reads ``args`` as the program does and reports every option not known to be harmless."""
        o = parse_opts(args, spec=spec)
        if spec.free:
            return o
        for opt in dict.fromkeys(o.unknown):
            self.add("dangerous", f"{label} {opt} is not an option this classifier knows to be harmless")
        for opt in dict.fromkeys(o.seen):
            if opt in spec.risky:
                self.add("dangerous", f"{label} {opt} {spec.risky[opt]}")
        for opt, pattern in spec.values.items():
            for v in o.value(opt):
                if v.dynamic or not re.fullmatch(pattern, v.text):
                    self.add("dangerous", f"{label} {opt} {v.text[:40]!r} is not a value known to be harmless")
        for opt in sorted(spec.writes):
            for v in o.value(opt):
                if v.text != "-":
                    self.write(v, f"{label} {opt} writes")
        for opt in sorted(spec.runs):
            for v in o.value(opt):
                self.run_program(v, f"{label} {opt}")
        if not spec.pure:
            self.loose_words(label, o.loose)
        return o

    def loose_words(self, label: str, words: list[Word]) -> None:
        for w in words:
            if w.dynamic:
                values = self.values(w)
                if values is None or any(v.startswith("-") for v in values):
                    self.add("dangerous", f"{label}: {w.text[:40]} is only known at run time and may be read as "
                                          "an option")
                    return
            elif self.glob_injects(w):
                self.add("dangerous", f"{label}: {w.text[:40]} may match a file whose name is read as an option")
                return

    def glob_injects(self, w: Word) -> bool:
        """Whether a file whose name starts with ``-`` may be among the names this glob expands to."""
        ctx = self.ctx
        if ctx.unpacked or ctx.opaque or any(
                x.word.dynamic or posixpath.basename(x.word.text.rstrip("/")).startswith("-") for x in ctx.writes):
            return True
        for d in self.here():
            if d is None or not posixpath.isabs(d):
                return True
            try:
                if any(m.startswith("-") for m in glob.glob(w.text, root_dir=d)):
                    return True
            except (OSError, ValueError):
                return True
        return False

    def program_options(self, name: str, args: list[Word]) -> bool:
        """The option check of ``dispatch`` for ``name``; False when the classifier has no table for it."""
        spec = spec_for(name)
        if spec is None:
            return False
        if spec.subs is None:
            o = self.check_options(name, args, spec)
            subs = DB_SUBCOMMANDS.get(name)
            if subs is not None and o.operands and o.operands[0].text not in subs:
                self.add("dangerous", f"{name} {o.operands[0].text[:30]} is not a subcommand this classifier knows to "
                                      "be harmless")
        self.attached_code(name, args, spec)
        rcs = SHELL_RCS.get(name)
        ws = self.ctx.workspace
        if rcs is not None and ws is not None and not any(a.text in rcs[1] for a in args):
            for rc in rcs[0]:
                if os.path.lexists(posixpath.join(ws, rc)):
                    self.add("dangerous", f"{name} reads {rc} from the sandbox's home, which can run anything")
        return True

    def attached_code(self, name: str, args: list[Word], spec: Spec) -> None:
        unread = ATTACHED_UNREAD.get(name, frozenset())
        for a in args:
            if a.text == "--" or not a.text.startswith("-"):
                return
            opt, eq, _ = a.text.partition("=")
            if eq and set(expand_long(opt, spec.longs)) & unread:
                self.add("dangerous", f"{name} {opt}=… is code the classifier reads only as a separate word")
                return

    def sub_options(self, name: str, args: list[Word]) -> tuple[str | None, Opts]:
        """For a program with subcommands (``ruff check``): the options before the subcommand, then the
        subcommand's own; a subcommand without a table asks. Returns the subcommand and its options."""
        spec = OPTIONS[name]
        head = self.check_options(name, args, spec)
        if not head.operands or spec.subs is None:
            return None, head
        sub = head.operands[0]
        rest = args[args.index(sub) + 1:]
        table = spec.subs.get(sub.text) if not sub.dynamic else None
        if table is None:
            self.add("dangerous", f"{name} {sub.text[:30]} is not a subcommand this classifier knows to be harmless")
            return None, parse_opts(rest)
        return sub.text, self.check_options(f"{name} {sub.text}", rest, table)

    # ---- deletes -----------------------------------------------------------------------------------

    def deletes(self, targets: list[Word], how: str, *, own_link: bool = False, verb: str = "deletes") -> None:
        """Files a command deletes (or empties): each must stay inside the workspace, and together they must be
        few and named (``MAX_DELETES``)."""
        patterns = [t for t in targets if t.glob or t.dynamic]
        named = len(targets) - len(patterns)
        if patterns:
            self.add("dangerous", f"{how} {patterns[0].text[:40]} {verb} every file the pattern matches")
        if named > MAX_DELETES:
            self.add("dangerous", f"{how} {verb} {named} files (more than {MAX_DELETES} ask)")
        else:
            before = self.ctx.deleted
            self.ctx.deleted += named
            if before <= MAX_DELETES < self.ctx.deleted:
                self.add("dangerous", f"this command line deletes more than {MAX_DELETES} files", own=False)
        for t in targets:
            self.write(t, f"{how} {verb}", glob_ok=True, own_link=own_link)
