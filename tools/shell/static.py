"""What a pipeline stage prints when the command line alone decides it.

``echo cm0gLXJmIH4= | base64 -d | sh`` runs ``rm -rf ~``: to classify what a shell or an interpreter reads
from a pipe, the stages before it are evaluated here when every one of them is a known pure filter of
static text (echo, printf, cat, base64, xxd -r, gzip/bzip2/xz -d, rev, tr). Anything else is unknown,
and code read from an unknown source needs approval.
"""

from __future__ import annotations

import base64
import binascii
import bz2
import gzip
import lzma
import posixpath
import re
from collections.abc import Callable

from tools.shell.parse import Command, Feed, Word, ansi_c

ReadFile = Callable[[Word], bytes | None]
_LIMIT = 256 * 1024


def _flags(args: list[str], allowed: str) -> tuple[set[str], list[str]]:
    """Leading short flags made only of ``allowed`` letters, and the rest."""
    flags: set[str] = set()
    i = 0
    while i < len(args) and args[i].startswith("-") and len(args[i]) > 1 and set(args[i][1:]) <= set(allowed):
        flags.update(args[i][1:])
        i += 1
    return flags, args[i:]


def _printf(fmt: str, args: list[str]) -> str | None:
    out: list[str] = []
    pending = list(args)
    spec = re.compile(r"%(%|[-+ #0]*\d*(?:\.\d+)?([sbdicuxXoq]))")
    while True:
        used = False
        pos = 0
        for m in spec.finditer(fmt):
            out.append(ansi_c(fmt[pos:m.start()]))
            pos = m.end()
            if m.group(1) == "%":
                out.append("%")
                continue
            used = True
            arg = pending.pop(0) if pending else ""
            out.append(ansi_c(arg) if m.group(2) == "b" else arg)
        out.append(ansi_c(fmt[pos:]))
        if not pending or not used:
            return "".join(out)
        if len(out) > _LIMIT:
            return None


def _tr_set(spec: str) -> str:
    spec = ansi_c(spec)
    out: list[str] = []
    i = 0
    while i < len(spec):
        if i + 2 < len(spec) and spec[i + 1] == "-":
            out.extend(chr(c) for c in range(ord(spec[i]), ord(spec[i + 2]) + 1))
            i += 3
        else:
            out.append(spec[i])
            i += 1
    return "".join(out)


def _tr(args: list[str], data: bytes) -> bytes | None:
    flags, rest = _flags(args, "ds")
    text = data.decode("utf-8", "replace")
    if any(c.startswith("[:") for c in rest) or "s" in flags:
        return None
    if "d" in flags and len(rest) == 1:
        drop = set(_tr_set(rest[0]))
        return "".join(ch for ch in text if ch not in drop).encode()
    if not flags and len(rest) == 2:
        a, b = _tr_set(rest[0]), _tr_set(rest[1])
        if not b:
            return None
        b = b + b[-1] * max(0, len(a) - len(b))
        return text.translate(str.maketrans(a, b[: len(a)])).encode()
    return None


def _decompress(name: str, data: bytes) -> bytes | None:
    try:
        if name.startswith(("gz", "gunzip", "zcat")):
            return gzip.decompress(data)
        if name.startswith(("bz", "bunzip2")):
            return bz2.decompress(data)
        return lzma.decompress(data)
    except (OSError, EOFError, ValueError, lzma.LZMAError):
        return None


def feed_bytes(feed: Feed | None, read_file: ReadFile, depth: int = 0) -> bytes | None:
    """The bytes a command reads on stdin, when fixed by the text; b"" when nothing feeds it."""
    if feed is None:
        return b""
    if feed.kind == "text":
        return feed.text.encode() if feed.static and feed.text is not None else None
    if feed.kind == "file":
        return read_file(feed.file) if feed.file is not None else None
    if feed.kind == "pipe" and feed.stage is not None and len(feed.stage) == 1 and depth < 16:
        return output(feed.stage[0], read_file, depth + 1)
    return None


def output(cmd: Command, read_file: ReadFile, depth: int = 0) -> bytes | None:
    """What one simple command prints, if it is a known filter of static input; else None."""
    if not cmd.words or any(w.dynamic or w.glob for w in cmd.words):
        return None
    name = posixpath.basename(cmd.words[0].text)
    args = [w.text for w in cmd.words[1:]]

    def stdin() -> bytes | None:
        return feed_bytes(cmd.feed, read_file, depth)

    def files_or_stdin(operands: list[str]) -> bytes | None:
        if not operands or operands == ["-"]:
            return stdin()
        chunks = []
        for w in cmd.words[1:]:
            if w.text in operands:
                data = read_file(w)
                if data is None:
                    return None
                chunks.append(data)
        return b"".join(chunks)

    if name == "echo":
        flags, rest = _flags(args, "neE")
        text = " ".join(rest)
        if "e" in flags:
            text = ansi_c(text)
        return (text + ("" if "n" in flags else "\n")).encode()
    if name == "printf" and args:
        if args[0] == "--":
            args = args[1:]
        text = _printf(args[0], args[1:]) if args else ""
        return text.encode() if text is not None else None
    if name == "cat":
        _, rest = _flags(args, "AbeEnstTuv")
        return files_or_stdin(rest)
    if name in ("base64", "base32"):
        flags, rest = _flags(args, "diDw0123456789")
        long = {a for a in rest if a.startswith("--")}
        if not ({"d", "D"} & flags or "--decode" in long):
            return None
        data = files_or_stdin([a for a in rest if not a.startswith("--")])
        if data is None:
            return None
        try:
            compact = re.sub(rb"\s+", b"", data)
            if name == "base64":
                return base64.b64decode(compact + b"=" * (-len(compact) % 4))
            return base64.b32decode(compact + b"=" * (-len(compact) % 8))
        except (binascii.Error, ValueError):
            return None
    if name == "xxd" and "-r" in args and ("-p" in args or "-ps" in args or "-plain" in args):
        data = files_or_stdin([a for a in args if not a.startswith("-")])
        try:
            return binascii.unhexlify(re.sub(rb"\s+", b"", data)) if data is not None else None
        except (binascii.Error, ValueError):
            return None
    decompressors = ("gunzip", "zcat", "gzip", "bunzip2", "bzcat", "bzip2", "unxz", "xzcat", "xz", "lzcat",
                     "unlzma")
    if name in decompressors:
        if name in ("gzip", "bzip2", "xz") and not any(a in ("-d", "-dc", "-cd", "--decompress") for a in args):
            return None
        data = files_or_stdin([a for a in args if not a.startswith("-")])
        return _decompress(name, data) if data is not None else None
    if name == "rev" and not args:
        data = stdin()
        if data is None:
            return None
        return b"\n".join(line[::-1] for line in data.split(b"\n"))
    if name == "tr":
        data = stdin()
        return _tr(args, data) if data is not None else None
    return None
