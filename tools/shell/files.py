"""File tools: what they write (decided by the workspace rule) and the programs their options run.

Creating, extracting, compressing, patching, splitting and downloading are writes to named targets, or to
the working directory when the names come from an archive or a patch (``tar -x``, ``unzip``, ``patch``:
those also count as unpacking, so later reads and git see files nobody named). Options that name a
program run it like any command, with an input only known at run time: ``tar --to-command``,
``--checkpoint-action=exec=``, ``--use-compress-program``/``-I``, ``zip -TT``, ``sort
--compress-program``, ``split --filter``, ``wget --use-askpass``. Options that read more options from a
file (``curl -K``, ``wget -e``/``--config``, a ``.curlrc``/``.wgetrc`` in the sandbox's home) ask.
"""

from __future__ import annotations

import os
import posixpath
import re
from typing import TYPE_CHECKING

from tools.shell.engine import UNKNOWN_INPUT
from tools.shell.options import parse_opts
from tools.shell.parse import Word
from tools.shell.tables import OPTIONS
from tools.shell.tables_files import XXD_OPTIONS, XXD_VALUES

if TYPE_CHECKING:
    from tools.shell.engine import Engine as _Base
else:
    _Base = object

_TAR_ARGS = ("--file", "--directory", "--use-compress-program", "--to-command", "--checkpoint-action",
             "--info-script", "--new-volume-script", "--rsh-command", "--rmt-command", "--exclude", "--files-from",
             "--exclude-from", "--index-file", "--format", "--owner", "--group", "--mode", "--transform", "--xform",
             "--newer", "--after-date", "--label", "--tape-length", "--blocking-factor", "--record-size",
             "--starting-file", "--suffix", "--backup", "--volno-file", "--listed-incremental", "--warning",
             "--checkpoint", "--occurrence", "--strip-components", "--level", "--sort", "--mtime",
             "--one-top-level", "--hole-detection", "--quoting-style", "--xattrs-include", "--xattrs-exclude",
             "--compress-program")
_TAR_FLAGS = ("--extract", "--get", "--create", "--append", "--update", "--list", "--delete", "--concatenate",
              "--catenate", "--diff", "--compare", "--remove-files", "--absolute-names", "--overwrite",
              "--keep-old-files", "--skip-old-files", "--verbose", "--gzip", "--bzip2", "--xz", "--zstd", "--lzma",
              "--auto-compress", "--no-same-owner", "--same-permissions", "--preserve-permissions",
              "--numeric-owner", "--dereference", "--recursion", "--no-recursion", "--wildcards", "--totals",
              "--ignore-zeros", "--to-stdout", "--keep-newer-files", "--unlink-first", "--recursive-unlink",
              "--null", "--verify", "--sparse", "--interactive", "--confirmation", "--acls", "--selinux",
              "--xattrs", "--touch", "--help", "--version", "--show-transformed-names", "--test-label")
# These keep their input unless told to remove it (``--rm``); the others replace it unless told to keep it.
_KEEPS_INPUT = frozenset({"zstd", "unzstd", "lz4", "unlz4", "brotli"})
_COMPRESSORS = frozenset({"gzip", "gunzip", "bzip2", "bunzip2", "xz", "unxz", "zstd", "unzstd", "lzma", "unlzma",
                          "pigz", "unpigz", "lz4", "unlz4", "brotli", "lzip", "compress", "uncompress"})


class FileTools(_Base):
    def run_program(self, word: Word, how: str) -> None:
        """A program an option names: it runs with an input nobody can know from the text."""
        if word.dynamic:
            self.add("dangerous", f"{how} runs a command that is only known at run time", own=False)
        else:
            self.run_text(word.text, how, feed=UNKNOWN_INPUT)

    def unpack(self, into: Word, how: str) -> None:
        self.ctx.links += 1
        self.ctx.unpacked = True
        self.ctx.opaque.add(self.owner)
        self.write(into, f"{how} into", own_link=True)

    # ---- creating and removing -----------------------------------------------------------------------

    def cmd_mkdir(self, args: list[Word]) -> None:
        for d in parse_opts(args, short_args="mZ", long_args=("--mode", "--context")).operands:
            self.write(d, "mkdir creates")

    def cmd_touch(self, args: list[Word]) -> None:
        for f in parse_opts(args, short_args="drt", long_args=("--date", "--reference", "--time")).operands:
            self.write(f, "touch changes", glob_ok=True)

    def cmd_rmdir(self, args: list[Word]) -> None:
        for d in parse_opts(args).operands:
            self.write(d, "rmdir deletes", glob_ok=True)

    def cmd_mktemp(self, args: list[Word]) -> None:
        o = parse_opts(args, short_args="p", long_args=("--tmpdir", "--suffix"))
        for d in o.value("-p", "--tmpdir"):
            if d.text:
                self.write(d, "mktemp creates a file in")
        for t in o.operands:
            if "/" in t.text:
                self.write(Word(posixpath.dirname(t.text) or ".", t.dynamic), "mktemp creates a file in")

    # ---- archives ------------------------------------------------------------------------------------

    def cmd_tar(self, args: list[Word], name: str = "tar") -> None:
        if args and re.fullmatch(r"[A-Za-z]+", args[0].text) and not args[0].dynamic:
            args = [Word("-" + args[0].text), *args[1:]]  # old style: ``tar xzf a.tar``
        o = parse_opts(args, spec=OPTIONS[name])  # --remove-files, --recursive-unlink, -U: risky there
        if o.dynamic:
            self.add("dangerous", "tar with options only known at run time")
        for w in o.value("--to-command"):
            self.run_program(w, "tar --to-command")
        for w in o.value("-I", "--use-compress-program", "--compress-program"):
            self.run_program(w, "tar --use-compress-program")
        for w in o.value("-F", "--info-script", "--new-volume-script", "--rsh-command", "--rmt-command"):
            self.run_program(w, "tar runs a script")
        for w in o.value("--checkpoint-action"):
            action, _, cmd = w.text.partition("=")
            if action == "exec":
                self.run_program(Word(cmd, w.dynamic), "tar --checkpoint-action=exec")
        files = o.value("-f", "--file")
        if any(":" in f.text.split("/")[0] for f in files if not f.text.startswith("/")):
            self.add("dangerous", "tar -f host:file runs a remote shell")
        if o.has("-x", "--extract", "--get"):
            if o.has("-P", "--absolute-names", "--absolute-paths"):
                self.add("dangerous", "tar -P extracts to absolute paths anywhere")
            dirs = o.value("-C", "--directory")
            if o.has("-O", "--to-stdout"):
                return
            self.unpack(dirs[-1] if dirs else Word("."), "tar extracts")
        elif o.has("-c", "--create", "-r", "--append", "-u", "--update", "--delete", "-A", "--concatenate",
                   "--catenate"):
            for f in files:
                if f.text != "-":
                    self.write(f, "tar writes the archive")
        for f in o.value("--index-file"):
            self.write(f, "tar --index-file writes")

    def cmd_bsdtar(self, args: list[Word]) -> None:
        self.cmd_tar(args, "bsdtar")

    def cmd_zip(self, args: list[Word]) -> None:
        o = parse_opts(args, spec=OPTIONS["zip"])  # -m, --move: risky there
        for w in o.value("-TT", "--unzip-command"):
            self.run_program(w, "zip --unzip-command")
        for f in o.value("-O", "--output-file", "--out") or o.operands[:1]:
            self.write(f, "zip writes the archive")

    def cmd_unzip(self, args: list[Word]) -> None:
        o = parse_opts(args, spec=OPTIONS["unzip"])
        if o.has("l", "t", "v", "Z", "z", "p", "c"):
            return
        dirs = o.value("-d")
        self.unpack(dirs[-1] if dirs else Word("."), "unzip extracts")

    def compressor(self, name: str, args: list[Word]) -> None:
        """A compressor writes FILE.gz (or FILE from FILE.gz) and, unless told to keep it, deletes FILE: a
        delete of each input (``optcheck.deletes``); ``-r`` replaces every file of a tree."""
        o = parse_opts(args, spec=OPTIONS[name])
        if o.has("-c", "--stdout", "--to-stdout", "-t", "--test", "-l", "--list"):
            return
        for f in o.value("-o", "--output"):
            self.write(f, f"{name} writes")
        inputs = [f for f in o.operands if f.text != "-"]
        if name in _KEEPS_INPUT:
            removes = o.has("--rm") or (name == "brotli" and o.has("-j"))
        else:
            removes = not o.has("-k", "--keep")
        if o.has("-r", "--recursive") and inputs:
            self.add("dangerous", f"{name} -r {'replaces' if removes else 'writes next to'} every file of a tree")
        if removes:
            self.deletes(inputs, f"{name} (it replaces its input)")
        else:
            for f in inputs:
                self.write(f, f"{name} writes next to", glob_ok=True)

    def cmd_patch(self, args: list[Word]) -> None:
        o = parse_opts(args, spec=OPTIONS["patch"])
        if o.has("-C", "--dry-run", "--check"):
            return
        for f in o.value("-o", "--output"):
            self.write(f, "patch writes")
        if o.operands and not o.value("-o", "--output"):
            self.write(o.operands[0], "patch changes")
            return
        dirs = o.value("-d", "--directory")
        strip = [w.text for w in o.value("-p", "--strip")]
        if not self.apply_patch(o.value("-i", "--input")[:1], "patch", dirs[-1] if dirs else Word("."),
                                int(strip[-1]) if strip and strip[-1].isdigit() else None):
            self.unpack(dirs[-1] if dirs else Word("."), "patch writes the files its patch names")

    def apply_patch(self, sources: list[Word], how: str, base: Word, strip: int | None) -> bool:
        """The files a patch (from ``sources``, else standard input) changes and deletes, each checked like a
        write and a delete; a patch nobody can read from the line may delete anything in the tree (False)."""
        texts: list[bytes | None] = [self.read_file(w)[0] for w in sources] if sources else \
            [b"" if self.cur_feed is None else self.stdin_data(self.cur_feed)]
        if any(t is None for t in texts) or base.dynamic:
            self.add("dangerous", f"{how} applies a patch that is only known at run time (it may delete files)")
            return False
        self.ctx.links += 1  # a git patch may make symlinks
        for data in texts:
            changed, deleted = patch_targets((data or b"").decode("utf-8", "replace"), strip)
            for name in changed:
                self.write(Word(posixpath.join(base.text, name)), f"{how} changes", own_link=True)
            self.deletes([Word(posixpath.join(base.text, name)) for name in deleted], how, own_link=True)
        return True

    # ---- filters that may write --------------------------------------------------------------------

    def cmd_sort(self, args: list[Word]) -> None:
        o = parse_opts(args, spec=OPTIONS["sort"])
        for f in o.value("-o", "--output"):
            self.write(f, "sort -o writes")
        for w in o.value("--compress-program"):
            self.run_program(w, "sort --compress-program")

    def cmd_uniq(self, args: list[Word]) -> None:
        ops = parse_opts(args, spec=OPTIONS["uniq"]).operands
        if len(ops) >= 2:
            self.write(ops[1], "uniq writes")

    def cmd_xxd(self, args: list[Word]) -> None:
        """xxd reads an option by its first letter (``-c8``, ``-cols 8``, ``-ps``): it writes its second operand."""
        ops: list[Word] = []
        i = 0
        while i < len(args):
            t = args[i].text
            i += 1
            if not t.startswith("-") or t == "-" or ops:
                ops.append(args[i - 1])
                continue
            if t[1:2] not in XXD_OPTIONS:
                self.add("dangerous", f"xxd {t[:20]} is not an option this classifier knows to be harmless")
            elif t[1] in XXD_VALUES and (len(t) == 2 or t[2:].isalpha()):
                i += 1  # the value is the next word (``-c 8``, ``-cols 8``); else it is attached (``-c8``)
        if len(ops) >= 2:
            self.write(ops[1], "xxd writes")

    def cmd_split(self, args: list[Word]) -> None:
        o = parse_opts(args, spec=OPTIONS["split"])
        for w in o.value("--filter"):
            self.run_program(w, "split --filter")
        prefix = o.operands[1] if len(o.operands) > 1 else Word("x")
        self.write(Word(prefix.text + "aa", prefix.dynamic), "split writes")

    def cmd_csplit(self, args: list[Word]) -> None:
        o = parse_opts(args, spec=OPTIONS["csplit"])
        prefix = (o.value("-f", "--prefix") or [Word("xx")])[0]
        self.write(Word(prefix.text + "00", prefix.dynamic), "csplit writes")

    def cmd_tree(self, args: list[Word]) -> None:
        o = parse_opts(args, spec=OPTIONS["tree"])  # -R: risky there
        for f in o.value("-o"):
            self.write(f, "tree -o writes")

    # ---- downloads -----------------------------------------------------------------------------------

    def home_rc(self, name: str, rc: str) -> None:
        ws = self.ctx.workspace
        if ws is not None and os.path.lexists(posixpath.join(ws, rc)):
            self.add("dangerous", f"{name} reads {rc} from the sandbox's home, which can make it write or run things")

    def cmd_curl(self, args: list[Word]) -> None:
        o = parse_opts(args, spec=OPTIONS["curl"])
        if not (args and args[0].text in ("-q", "--disable")):
            self.home_rc("curl", ".curlrc")
        if o.value("-K", "--config"):
            self.add("dangerous", "curl -K reads more options from a file")
        for w in o.value("-o", "--output", "-D", "--dump-header", "-c", "--cookie-jar", "--trace", "--trace-ascii",
                         "--stderr", "--libcurl", "--etag-save", "--hsts", "--alt-svc"):
            if w.text != "-":
                self.write(w, "curl writes")
        outdir = (o.value("--output-dir") or [Word("")])[0]
        if o.has("-O", "--remote-name", "--remote-name-all"):
            for url in o.operands:
                name = posixpath.basename(url.text.split("?")[0]) or url.text
                self.write(Word(posixpath.join(outdir.text, name) if outdir.text else name,
                                url.dynamic or outdir.dynamic), "curl -O writes")

    def cmd_wget(self, args: list[Word]) -> None:
        o = parse_opts(args, spec=OPTIONS["wget"])
        self.home_rc("wget", ".wgetrc")
        if o.value("-e", "--execute", "--config"):
            self.add("dangerous", "wget -e/--config runs settings that can write anywhere")
        for w in o.value("--use-askpass"):
            self.run_program(w, "wget --use-askpass")
        for w in o.value("-o", "--output-file", "-a", "--append-output"):
            self.write(w, "wget writes its log to")
        docs = o.value("-O", "--output-document")
        for w in docs:
            if w.text != "-":
                self.write(w, "wget writes")
        if docs:
            return
        prefix = o.value("-P", "--directory-prefix")
        if o.has("-r", "--recursive", "-m", "--mirror", "-p", "--page-requisites", "-x", "--force-directories"):
            self.write(prefix[-1] if prefix else Word("."), "wget writes files into")
            return
        for url in o.operands:
            name = posixpath.basename(url.text.split("?")[0].rstrip("/")) if "/" in url.text.split("//", 1)[-1] \
                else "index.html"
            target = posixpath.join(prefix[-1].text, name or "index.html") if prefix else (name or "index.html")
            self.write(Word(target, url.dynamic or any(p.dynamic for p in prefix)), "wget writes")


def patch_targets(text: str, strip: int | None) -> tuple[list[str], list[str]]:
    """The files a unified or git patch changes and the ones it deletes (``+++ /dev/null``), with ``strip``
    leading components taken off (None: GNU patch's default, the base name)."""
    changed: list[str] = []
    deleted: list[str] = []
    old = ""
    for line in text.splitlines():
        if line.startswith("--- "):
            old = _patch_name(line[4:])
        elif line.startswith("+++ "):
            new = _patch_name(line[4:])
            if new == "/dev/null":
                deleted.append(_strip(old, strip))
            else:
                changed.append(_strip(new, strip))
        elif line.startswith(("rename to ", "copy to ")):
            changed.append(line.split(" to ", 1)[1].strip())
    return list(dict.fromkeys(changed)), list(dict.fromkeys(deleted))


def _patch_name(field: str) -> str:
    name = field.split("\t")[0].strip()
    return name[1:-1] if len(name) > 1 and name[0] == name[-1] == '"' else name


def _strip(path: str, strip: int | None) -> str:
    if strip is None:
        return posixpath.basename(path) or path
    parts = path.split("/")
    return "/".join(parts[strip:]) or posixpath.basename(path)
