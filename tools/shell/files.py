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

    def cmd_tar(self, args: list[Word]) -> None:
        if args and re.fullmatch(r"[A-Za-z]+", args[0].text) and not args[0].dynamic:
            args = [Word("-" + args[0].text), *args[1:]]  # old style: ``tar xzf a.tar``
        o = parse_opts(args, short_args="fCIFTXgLVbKNH", long_args=_TAR_ARGS, longs=_TAR_ARGS + _TAR_FLAGS)
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
            if o.has("-P", "--absolute-names"):
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
            if o.has("--remove-files"):
                for f in o.operands:
                    self.write(f, "tar --remove-files deletes", glob_ok=True)
        for f in o.value("--index-file"):
            self.write(f, "tar --index-file writes")

    cmd_bsdtar = cmd_tar

    def cmd_zip(self, args: list[Word]) -> None:
        o = parse_opts(args, short_args="bOntix", long_args=("--unzip-command", "--temp-path", "--output-file",
                                                            "--suffixes", "--include", "--exclude"))
        for w in o.value("-TT", "--unzip-command"):
            self.run_program(w, "zip --unzip-command")
        tt = [i for i, a in enumerate(args) if a.text == "-TT"]  # -TT takes the next word (not a cluster)
        for i in tt:
            if i + 1 < len(args):
                self.run_program(args[i + 1], "zip -TT")
        ops = [w for w in o.operands if not any(i + 1 < len(args) and args[i + 1] is w for i in tt)]
        for f in o.value("-O", "--output-file") or ops[:1]:
            self.write(f, "zip writes the archive")
        if o.has("-m", "--move"):
            for f in ops[1:]:
                self.write(f, "zip -m deletes", glob_ok=True)

    def cmd_unzip(self, args: list[Word]) -> None:
        o = parse_opts(args, short_args="dx")
        if o.has("l", "t", "v", "Z", "z", "p", "c"):
            return
        dirs = o.value("-d")
        self.unpack(dirs[-1] if dirs else Word("."), "unzip extracts")

    def compressor(self, name: str, args: list[Word]) -> None:
        o = parse_opts(args, short_args="oSbLTM" if name.startswith(("zstd", "unzstd")) else "S",
                       long_args=("--output", "--suffix"))
        if o.has("-c", "--stdout", "--to-stdout", "-t", "--test", "-l", "--list"):
            return
        for f in o.value("-o", "--output"):
            self.write(f, f"{name} writes")
        for f in o.operands:
            if f.text != "-":
                self.write(f, f"{name} replaces", glob_ok=True)

    def cmd_patch(self, args: list[Word]) -> None:
        o = parse_opts(args, short_args="iodpBDFrVYzgs", long_args=("--input", "--output", "--directory", "--strip",
                                                                    "--prefix", "--reject-file", "--suffix",
                                                                    "--basename-prefix", "--ifdef", "--get"))
        if o.has("-C", "--dry-run", "--check"):
            return
        for f in o.value("-o", "--output"):
            self.write(f, "patch writes")
        if o.operands and not o.value("-o", "--output"):
            self.write(o.operands[0], "patch changes")
            return
        dirs = o.value("-d", "--directory")
        self.unpack(dirs[-1] if dirs else Word("."), "patch writes the files its patch names")

    # ---- filters that may write --------------------------------------------------------------------

    def cmd_sort(self, args: list[Word]) -> None:
        o = parse_opts(args, short_args="oTSktz", long_args=("--output", "--compress-program", "--temporary-directory",
                                                            "--buffer-size", "--key", "--field-separator",
                                                            "--files0-from", "--parallel", "--batch-size", "--sort",
                                                            "--random-source"))
        for f in o.value("-o", "--output"):
            self.write(f, "sort -o writes")
        for w in o.value("--compress-program"):
            self.run_program(w, "sort --compress-program")

    def cmd_uniq(self, args: list[Word]) -> None:
        ops = parse_opts(args, short_args="fsw", long_args=("--skip-fields", "--skip-chars", "--check-chars",
                                                            "--group", "--all-repeated")).operands
        if len(ops) >= 2:
            self.write(ops[1], "uniq writes")

    def cmd_xxd(self, args: list[Word]) -> None:
        ops = parse_opts(args, short_args="cglnosC").operands
        if len(ops) >= 2:
            self.write(ops[1], "xxd writes")

    def cmd_split(self, args: list[Word]) -> None:
        o = parse_opts(args, short_args="abCdlnt", long_args=("--filter", "--suffix-length", "--bytes",
                                                             "--line-bytes", "--lines", "--number",
                                                             "--additional-suffix", "--separator"))
        for w in o.value("--filter"):
            self.run_program(w, "split --filter")
        prefix = o.operands[1] if len(o.operands) > 1 else Word("x")
        self.write(Word(prefix.text + "aa", prefix.dynamic), "split writes")

    def cmd_csplit(self, args: list[Word]) -> None:
        o = parse_opts(args, short_args="fbn", long_args=("--prefix", "--suffix-format", "--digits"))
        prefix = (o.value("-f", "--prefix") or [Word("xx")])[0]
        self.write(Word(prefix.text + "00", prefix.dynamic), "csplit writes")

    def cmd_tree(self, args: list[Word]) -> None:
        o = parse_opts(args, short_args="oLPIHTX", long_args=("--filelimit", "--timefmt", "--charset", "--sort"))
        for f in o.value("-o"):
            self.write(f, "tree -o writes")
        if o.has("-R"):
            self.add("dangerous", "tree -R writes an index file into every directory")

    # ---- downloads -----------------------------------------------------------------------------------

    def home_rc(self, name: str, rc: str) -> None:
        ws = self.ctx.workspace
        if ws is not None and os.path.lexists(posixpath.join(ws, rc)):
            self.add("dangerous", f"{name} reads {rc} from the sandbox's home, which can make it write or run things")

    def cmd_curl(self, args: list[Word]) -> None:
        o = parse_opts(args, short_args="oDcKdXHAeEuwTmrbFQxUYyzCt",
                       long_args=("--output", "--dump-header", "--cookie-jar", "--config", "--trace", "--trace-ascii",
                                  "--stderr", "--libcurl", "--output-dir", "--etag-save", "--hsts", "--alt-svc",
                                  "--header", "--data", "--user-agent", "--user", "--referer", "--request",
                                  "--cookie", "--form", "--upload-file", "--url", "--proxy", "--max-time",
                                  "--connect-timeout", "--retry", "--data-raw", "--data-binary", "--json"))
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
        o = parse_opts(args, short_args="OoaPeiUBTtwlDQA",
                       long_args=("--output-document", "--output-file", "--append-output", "--directory-prefix",
                                  "--execute", "--input-file", "--user-agent", "--header", "--config",
                                  "--use-askpass", "--post-data", "--post-file", "--user", "--password", "--tries",
                                  "--timeout", "--level", "--accept", "--reject", "--domains", "--base"))
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
