"""Which shell commands are dangerous: normalise, parse shell-ish, then check two lists.

- **hardline**: never runs, whatever the approval settings (wiping /, system directories or the home
  directory; mkfs; dd onto a disk; fork bombs; shutdown/reboot/halt; ``kill -1``; ``chmod -R 777 /``).
- **dangerous**: runs only after a person approves it in the chat.

Matching works on parsed simple commands, not on raw text, so ``grep rm file`` and ``echo "rm -rf /"``
are harmless while ``r\\m -rf /``, ``'rm' -rf /``, ``$'\\x72m' -rf /``, full-width letters, ANSI escapes,
``sudo``/``env``/``xargs`` wrappers and ``bash -c``/``sh -c``/``python -c``/``eval`` strings are seen
through. Every match carries a short human reason. This module imports nothing from the gateway.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

Level = Literal["safe", "dangerous", "hardline"]
_RANK = {"safe": 0, "dangerous": 1, "hardline": 2}


@dataclass(frozen=True)
class Verdict:
    level: Level
    reason: str | None
    command: str  # the normalised command text

    @property
    def needs_approval(self) -> bool:
        return self.level == "dangerous"

    @property
    def forbidden(self) -> bool:
        return self.level == "hardline"


@dataclass(frozen=True)
class Decision:
    """What the approval hook answers; ``message`` is the plain statement the model gets."""

    outcome: Literal["approved", "denied", "expired", "forbidden"]
    message: str

    @property
    def approved(self) -> bool:
        return self.outcome == "approved"

    @classmethod
    def forbidden(cls, reason: str) -> Decision:
        return cls("forbidden", f"Not run: forbidden — {reason}. This command is never allowed, with or "
                                "without approval; do not try to work around it.")


# ---------------------------------------------------------------------------------------- normalise

_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC
    r"|\x1b[PX^_][^\x1b]*\x1b\\"  # DCS/SOS/PM/APC
    r"|\x1b[@-Z\\-_]"  # two-byte sequences
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
)
_HSPACE = re.compile(r"[^\S\n]+")


def normalize(command: str) -> str:
    """ANSI escapes out, NFKC (full-width letters become ASCII), invisible characters out, whitespace
    collapsed (newlines kept: they separate commands), line continuations joined."""
    text = _ANSI.sub("", command)
    text = unicodedata.normalize("NFKC", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    # Format characters (zero-width space/joiner, bidi controls, soft hyphen) and other controls hide
    # letters from a reader; the shell sees them as part of words, but they only ever obscure.
    text = "".join(
        ch for ch in text
        if ch in "\n\t" or not unicodedata.category(ch).startswith("C")
    )
    text = text.replace("\\\n", "")
    text = _HSPACE.sub(" ", text)
    lines = [line.strip() for line in text.split("\n")]
    return "\n".join(line for line in lines if line)


_OPERATOR_CHARS = frozenset(";&|<>()`$\n")


def has_shell_operators(command: str) -> bool:
    """Pipes, lists, redirects, substitutions, subshells, newlines: anything that makes more than one
    plain command out of the text (or computes one). Such commands never match ``approvals.allow``."""
    return any(ch in _OPERATOR_CHARS for ch in normalize(command))


def matches_allowlist(command: str, patterns: Iterable[str]) -> bool:
    """``approvals.allow``: exact commands or globs, only for commands without shell operators."""
    text = normalize(command)
    if has_shell_operators(text):
        return False
    for pattern in patterns:
        pattern = normalize(pattern)
        if pattern and (text == pattern or fnmatch.fnmatchcase(text, pattern)):
            return True
    return False


# ------------------------------------------------------------------------------------------ lexing


@dataclass
class Word:
    text: str  # quotes removed, escapes undone
    dynamic: bool = False  # contains $var, $(...) or `...` outside single quotes
    quoted: bool = False


@dataclass
class Simple:
    words: list[Word] = field(default_factory=list)
    redirects: list[tuple[str, Word]] = field(default_factory=list)
    heredocs: list[str] = field(default_factory=list)
    sep: str = ""  # the operator after this command: | |& && || ; & \n or ""


@dataclass
class Parsed:
    commands: list[Simple]
    nested: list[str]  # scripts inside $(...), `...`, <(...), >(...)


_REDIRECT_OPS = (">>", ">|", ">&", "&>>", "&>", "<<<", "<<-", "<<", "<>", "<&", ">", "<")
_CONTROL_OPS = ("||", "|&", "&&", ";;", "|", "&", ";", "\n", "(", ")")


def _ansi_c(body: str) -> str:
    """Decode the body of $'...'."""
    out: list[str] = []
    i = 0
    simple = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f",
              "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}
    while i < len(body):
        ch = body[i]
        if ch != "\\" or i + 1 >= len(body):
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in simple:
            out.append(simple[nxt])
            i += 2
        elif nxt == "x":
            m = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2:])
            if m:
                out.append(chr(int(m.group(), 16)))
                i += 2 + len(m.group())
            else:
                out.append("\\x")
                i += 2
        elif nxt in "uU":
            m = re.match(r"[0-9a-fA-F]{1,8}" if nxt == "U" else r"[0-9a-fA-F]{1,4}", body[i + 2:])
            if m:
                out.append(chr(min(int(m.group(), 16), 0x10FFFF)))
                i += 2 + len(m.group())
            else:
                out.append("\\" + nxt)
                i += 2
        elif nxt in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1:])
            assert m
            out.append(chr(int(m.group(), 8) & 0xFF))
            i += 1 + len(m.group())
        else:
            out.append("\\" + nxt)
            i += 2
    return unicodedata.normalize("NFKC", "".join(out))


def _matching(text: str, start: int, open_ch: str, close_ch: str) -> int:
    """Index of the bracket closing the one just before ``start`` (quotes respected); len(text) if none."""
    depth = 1
    i = start
    quote: str | None = None
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch == "\\":
            i += 2
            continue
        elif ch in "'\"":
            quote = ch
        elif ch == open_ch:
            depth += 1
        elif ch == close_ch:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(text)


def parse(script: str) -> Parsed:
    """A forgiving shell lexer: simple commands with their words and redirects, plus nested scripts.

    It never raises: unbalanced quotes run to the end of the text, which is the safe reading.
    """
    text = script
    commands: list[Simple] = []
    nested: list[str] = []
    cur = Simple()
    word: list[str] | None = None
    dynamic = quoted = False
    pending_redirect: str | None = None
    pending_heredocs: list[tuple[str, bool]] = []
    i = 0
    n = len(text)

    def finish_word() -> None:
        nonlocal word, dynamic, quoted, pending_redirect
        if word is None:
            return
        w = Word("".join(word), dynamic, quoted)
        if pending_redirect is not None:
            if pending_redirect in ("<<", "<<-"):
                pending_heredocs.append((w.text, pending_redirect == "<<-"))
            cur.redirects.append((pending_redirect, w))
            pending_redirect = None
        else:
            cur.words.append(w)
        word, dynamic, quoted = None, False, False

    def finish_command(sep: str) -> None:
        nonlocal cur
        finish_word()
        if cur.words or cur.redirects:
            cur.sep = sep
            commands.append(cur)
        elif commands and sep and not commands[-1].sep:
            commands[-1].sep = sep
        cur = Simple()

    def read_heredocs(pos: int) -> int:
        """At a newline: consume the bodies of pending here-documents; returns the new position."""
        for delim, strip_tabs in pending_heredocs:
            body: list[str] = []
            while pos < n:
                end = text.find("\n", pos)
                end = n if end < 0 else end
                line = text[pos:end]
                pos = end + 1
                if (line.lstrip("\t") if strip_tabs else line).strip() == delim:
                    break
                body.append(line)
            target = commands[-1] if commands else cur
            target.heredocs.append("\n".join(body))
        pending_heredocs.clear()
        return pos

    while i < n:
        ch = text[i]
        if ch == "\\":
            if i + 1 < n:
                if word is None:
                    word = []
                word.append(text[i + 1])
                i += 2
            else:
                i += 1
            continue
        if ch == "'":
            end = text.find("'", i + 1)
            end = n if end < 0 else end
            word = (word or []) + [text[i + 1:end]]
            quoted = True
            i = end + 1
            continue
        if ch == "$" and text.startswith("$'", i):
            end = i + 2
            while end < n and text[end] != "'":
                end += 2 if text[end] == "\\" else 1
            word = (word or []) + [_ansi_c(text[i + 2:min(end, n)])]
            quoted = True
            i = end + 1
            continue
        if ch == '"':
            j = i + 1
            buf: list[str] = []
            while j < n and text[j] != '"':
                c = text[j]
                if c == "\\" and j + 1 < n:
                    if text[j + 1] in '$`"\\':
                        buf.append(text[j + 1])
                    else:
                        buf.append("\\" + text[j + 1])
                    j += 2
                    continue
                if c == "$" and text.startswith("$(", j):
                    close = _matching(text, j + 2, "(", ")")
                    nested.append(text[j + 2:close])
                    buf.append(text[j:close + 1])
                    dynamic = True
                    j = close + 1
                    continue
                if c == "`":
                    close = text.find("`", j + 1)
                    close = n if close < 0 else close
                    nested.append(text[j + 1:close])
                    buf.append(text[j:close + 1])
                    dynamic = True
                    j = close + 1
                    continue
                if c == "$" and j + 1 < n and (text[j + 1].isalnum() or text[j + 1] in "_{@*#?!-"):
                    dynamic = True
                buf.append(c)
                j += 1
            word = (word or []) + ["".join(buf)]
            quoted = True
            i = j + 1
            continue
        if ch == "$" and text.startswith("$(", i):
            close = _matching(text, i + 2, "(", ")")
            nested.append(text[i + 2:close])
            word = (word or []) + [text[i:close + 1]]
            dynamic = True
            i = close + 1
            continue
        if ch == "`":
            close = text.find("`", i + 1)
            close = n if close < 0 else close
            nested.append(text[i + 1:close])
            word = (word or []) + [text[i:close + 1]]
            dynamic = True
            i = close + 1
            continue
        if ch in "<>" and word is None and text.startswith("(", i + 1):
            close = _matching(text, i + 2, "(", ")")
            nested.append(text[i + 2:close])
            cur.words.append(Word(text[i:close + 1], dynamic=True))
            i = close + 1
            continue
        if ch == "#" and word is None:
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if ch == " " or ch == "\t":
            finish_word()
            i += 1
            continue
        if ch == "$":
            if i + 1 < n and (text[i + 1].isalnum() or text[i + 1] in "_{@*#?!-"):
                dynamic = True
            word = (word or []) + ["$"]
            i += 1
            continue
        # A file-descriptor number right before a redirect belongs to the redirect.
        if ch in "<>" or (ch == "&" and text.startswith(("&>",), i)):
            op = next(o for o in _REDIRECT_OPS if text.startswith(o, i))
            if word is not None and "".join(word).isdigit() and not quoted:
                word, dynamic, quoted = None, False, False
            else:
                finish_word()
            pending_redirect = op
            i += len(op)
            continue
        op = next((o for o in _CONTROL_OPS if text.startswith(o, i)), None)
        if op is not None:
            finish_command(op)
            i += len(op)
            if op == "\n" and pending_heredocs:
                i = read_heredocs(i)
            continue
        if word is None:
            word = []
        word.append(ch)
        i += 1
    finish_command("")
    return Parsed(commands, nested)


# --------------------------------------------------------------------------------------- checking


@dataclass
class _Finding:
    level: Level
    reason: str


_SYSTEM_DIRS = frozenset({
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media", "/mnt",
    "/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var", "/snap",
    "/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib64", "/usr/local", "/usr/share", "/usr/include",
    "/usr/local/bin", "/var/lib", "/var/log", "/var/cache", "/var/spool", "/var/mail", "/var/www",
    "/System", "/Library", "/Applications", "/Users", "/private",
})
_HOME_RE = re.compile(r"^(?:~[A-Za-z0-9._-]*|\$HOME|\$\{HOME\}|/home/[^/]+|/Users/[^/]+|/root)$")
_BLOCK_DEVICE = re.compile(
    r"^/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d|rdisk\d|md\d|dm-\d|loop\d|"
    r"mapper/|sr\d|fd\d|mtdblock)"
)
_HARMLESS_SINKS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "ash", "csh", "tcsh"})
_INTERPRETERS = frozenset({"python", "python2", "python3", "perl", "ruby", "node", "nodejs", "php", "lua"})
_DB_CLIENTS = frozenset({"psql", "mysql", "mariadb", "sqlite3", "sqlite", "sqlcmd", "duckdb",
                         "clickhouse-client", "clickhouse", "cockroach", "pgcli", "mycli", "litecli"})
_DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c"})


def _interpreter_name(name: str) -> str | None:
    base = re.sub(r"[\d.]+$", "", name)
    if name in _SHELLS or base in _SHELLS:
        return "shell"
    if name in _INTERPRETERS or base in _INTERPRETERS:
        return "interpreter"
    return None


def _clean_path(path: str) -> str:
    """``/etc/../`` -> ``/``; ``/usr/*`` -> ``/usr``; ``~/`` -> ``~``."""
    p = path.strip()
    if p.endswith(("/*", "/.*", "/{*,.*}")):
        p = p[: p.rfind("/")] or "/"
    if p in ("*", ".*"):
        return p
    if p.startswith("/"):
        p = posixpath.normpath(p)
        if p.startswith("//"):
            p = "/" + p.lstrip("/")
    elif p.startswith(("~", "$HOME", "${HOME}")):
        p = p.rstrip("/") or p
        p = posixpath.normpath(p) if "/" in p else p
    return p


def _critical_target(path: str) -> str | None:
    """Why deleting (or chmod'ing) this path wholesale is out of the question, or None."""
    p = _clean_path(path)
    if p == "/":
        return "the whole filesystem (/)"
    if p in _SYSTEM_DIRS:
        return f"the system directory {p}"
    if _HOME_RE.match(p):
        return "the home directory"
    return None


def _short_flags(words: list[str]) -> tuple[set[str], set[str], list[str]]:
    """(short flag letters, long flags, operands); everything after ``--`` is an operand."""
    short: set[str] = set()
    long: set[str] = set()
    operands: list[str] = []
    ended = False
    for w in words:
        if ended or not w.startswith("-") or w == "-":
            operands.append(w)
        elif w == "--":
            ended = True
        elif w.startswith("--"):
            long.add(w.split("=", 1)[0])
        else:
            short.update(w[1:])
    return short, long, operands


_WRAPPER_ARGS: dict[str, frozenset[str]] = {
    # options that take a separate argument, per wrapper
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "-R"}),
    "doas": frozenset({"-u", "-C"}),
    "env": frozenset({"-u", "-C", "-S", "--unset", "--chdir", "--split-string"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "stdbuf": frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}),
    "xargs": frozenset({"-n", "-I", "-i", "-P", "-d", "-L", "-l", "-s", "-E", "-e", "-a", "--max-args",
                        "--replace", "--max-procs", "--delimiter", "--max-lines", "--arg-file"}),
    "nohup": frozenset(),
    "time": frozenset({"-f", "-o", "--format", "--output"}),
    "exec": frozenset({"-a"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "setsid": frozenset(),
    "chrt": frozenset(),
    "taskset": frozenset(),
    "unbuffer": frozenset(),
    "caffeinate": frozenset(),
    "busybox": frozenset(),
    "watch": frozenset({"-n", "--interval", "-d"}),
    "strace": frozenset({"-e", "-o", "-p", "-s", "-u"}),
    "flock": frozenset({"-w", "-E", "--timeout", "--conflict-exit-code"}),
    "systemd-run": frozenset({"-p", "-u", "--unit", "--property"}),
    "su": frozenset(),
    "run0": frozenset({"-u", "--user"}),
}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=")
_KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}",
                       "case", "esac", "function", "select", "coproc"})


class _Checker:
    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.findings: list[_Finding] = []

    def add(self, level: Level, reason: str) -> None:
        self.findings.append(_Finding(level, reason))

    def nested(self, script: str, how: str) -> None:
        if self.depth >= 6:
            self.add("dangerous", f"{how} nests commands too deeply to check")
            return
        inner = _classify(script, self.depth + 1)
        if inner.level != "safe":
            self.add(inner.level, f"{how}: {inner.reason}")

    # ---- one simple command ----------------------------------------------------------------------

    def simple(self, cmd: Simple, pipe_in: Simple | None) -> None:
        for op, target in cmd.redirects:
            self.redirect(op, target)
        words = list(cmd.words)
        # Leading assignments, reserved words and wrappers (sudo, env, xargs, nohup, timeout...).
        while words:
            first = words[0].text
            if _ASSIGNMENT.match(first) and not words[0].quoted:
                words.pop(0)
                continue
            if first in _KEYWORDS:
                words.pop(0)
                continue
            name = posixpath.basename(first)
            if name in _WRAPPER_ARGS:
                if name in ("sudo", "doas", "su", "run0"):
                    if name == "su":
                        rest = [w.text for w in words[1:]]
                        if "-c" in rest and rest.index("-c") + 1 < len(rest):
                            self.add("dangerous", "runs a command as another user (su)")
                            self.nested(rest[rest.index("-c") + 1], "su -c")
                            return
                    self.add("dangerous", f"runs a command as root ({name})")
                if name == "command" and len(words) > 1 and words[1].text in ("-v", "-V"):
                    return
                takes_arg = _WRAPPER_ARGS[name]
                words.pop(0)
                while words and words[0].text.startswith("-") and words[0].text != "-":
                    opt = words.pop(0).text
                    if opt == "--":
                        break
                    if opt in takes_arg and words:
                        words.pop(0)
                    if name == "env" and opt in ("-S", "--split-string") and words:
                        self.nested(words[0].text, "env -S")
                while name == "env" and words and _ASSIGNMENT.match(words[0].text):
                    words.pop(0)
                if name == "timeout" and words:
                    words.pop(0)  # the duration
                if name == "chrt" and words and words[0].text.isdigit():
                    words.pop(0)
                if name == "taskset" and words:
                    words.pop(0)
                continue
            break
        if not words:
            return
        head = words[0]
        if head.dynamic or head.text.startswith("$"):
            self.add("dangerous", "the command to run is only known at run time")
            return
        name = posixpath.basename(head.text)
        args = [w.text for w in words[1:]]
        check = getattr(self, "cmd_" + re.sub(r"\W", "_", name), None)
        if check is not None:
            check(args, cmd)
        if name.startswith("mkfs") or name in ("mke2fs", "mkswap", "wipefs", "mkdosfs", "mkntfs"):
            self.add("hardline", f"{name} formats a disk")
        kind = _interpreter_name(name)
        if kind is not None:
            self.interpreter(name, kind, args, cmd, pipe_in)
        if name in _DB_CLIENTS:
            piped = [w.text for w in pipe_in.words] if pipe_in is not None else []
            self.sql(" ".join([*args, *cmd.heredocs, *(t.text for op, t in cmd.redirects if op == "<<<"), *piped]))

    def redirect(self, op: str, target: Word) -> None:
        t = target.text
        if op in (">&", "<&") and (t.isdigit() or t == "-"):
            return
        if op not in (">", ">|", "&>", ">>", "&>>", ">&"):
            return
        if _BLOCK_DEVICE.match(t):
            self.add("hardline", f"writes straight onto the disk device {t}")
        elif op in (">", ">|", "&>", ">&") and t not in _HARMLESS_SINKS and not t.startswith("/dev/fd/"):
            self.add("dangerous", f"> overwrites {t or 'a file'}")

    # ---- rules by command name -------------------------------------------------------------------

    def cmd_rm(self, args: list[str], _cmd: Simple) -> None:
        short, long, operands = _short_flags(args)
        recursive = bool({"r", "R"} & short) or "--recursive" in long
        force = "f" in short or "--force" in long
        if "--no-preserve-root" in long:
            self.add("hardline", "rm --no-preserve-root can wipe the whole filesystem")
            return
        if recursive or force:
            for target in operands:
                why = _critical_target(target)
                if why is not None and (recursive or why.startswith("the whole")):
                    self.add("hardline", f"rm -r{'f' if force else ''} of {why}")
                    return
            self.add("dangerous", "rm -r/-f deletes files for good")

    def cmd_unlink(self, args: list[str], _cmd: Simple) -> None:
        return None

    def cmd_shred(self, args: list[str], _cmd: Simple) -> None:
        if any(_BLOCK_DEVICE.match(a) for a in args):
            self.add("hardline", "shred of a disk device")
        else:
            self.add("dangerous", "shred destroys file contents")

    def cmd_find(self, args: list[str], _cmd: Simple) -> None:
        if "-delete" in args:
            self.add("dangerous", "find -delete deletes files")
        for i, a in enumerate(args):
            if a in ("-exec", "-execdir", "-ok", "-okdir"):
                inner: list[str] = []
                for b in args[i + 1:]:
                    if b in (";", "+", "\\;"):
                        break
                    inner.append(b)
                if inner:
                    self.nested(" ".join(_quote(w) for w in inner if w != "{}"), f"find {a}")

    def _overwrite(self, name: str, args: list[str]) -> None:
        short, long, operands = _short_flags(args)
        if "n" in short or "--no-clobber" in long or "--update=none" in args or "i" in short:
            return
        if len(operands) >= 2 or "t" in short or "--target-directory" in long:
            self.add("dangerous", f"{name} can overwrite existing files")

    def cmd_mv(self, args: list[str], _cmd: Simple) -> None:
        self._overwrite("mv", args)

    def cmd_cp(self, args: list[str], _cmd: Simple) -> None:
        self._overwrite("cp", args)

    def cmd_install(self, args: list[str], _cmd: Simple) -> None:
        self._overwrite("install", args)

    def cmd_rsync(self, args: list[str], _cmd: Simple) -> None:
        if any(a.startswith("--delete") or a.startswith("--remove-source") for a in args):
            self.add("dangerous", "rsync --delete removes files at the destination")

    def cmd_sed(self, args: list[str], _cmd: Simple) -> None:
        for a in args:
            if a.startswith("--in-place"):
                break
            if a.startswith("-") and not a.startswith("--"):
                letters = re.split(r"[ef]", a[1:], maxsplit=1)[0]
                if "i" in letters:
                    break
        else:
            return
        self.add("dangerous", "sed -i edits files in place")

    def cmd_perl(self, args: list[str], _cmd: Simple) -> None:
        if any(a.startswith("-") and not a.startswith("--") and "i" in a.split("e")[0] for a in args):
            self.add("dangerous", "perl -i edits files in place")

    def cmd_truncate(self, args: list[str], _cmd: Simple) -> None:
        self.add("dangerous", "truncate cuts files short")

    def cmd_tee(self, args: list[str], _cmd: Simple) -> None:
        short, long, operands = _short_flags(args)
        if any(_BLOCK_DEVICE.match(a) for a in operands):
            self.add("hardline", "writes straight onto a disk device")
        elif "a" not in short and "--append" not in long and any(o not in _HARMLESS_SINKS for o in operands):
            self.add("dangerous", "tee overwrites files")

    def cmd_dd(self, args: list[str], _cmd: Simple) -> None:
        for a in args:
            if a.startswith("of="):
                target = a[3:]
                if _BLOCK_DEVICE.match(target):
                    self.add("hardline", f"dd onto the disk device {target}")
                elif target not in _HARMLESS_SINKS:
                    self.add("dangerous", f"dd overwrites {target}")

    def cmd_git(self, args: list[str], _cmd: Simple) -> None:
        rest = list(args)
        while rest and rest[0].startswith("-"):
            opt = rest.pop(0)
            if opt in ("-C", "-c", "--git-dir", "--work-tree", "--namespace") and rest:
                rest.pop(0)
        if not rest:
            return
        sub, sargs = rest[0], rest[1:]
        short, long, operands = _short_flags(sargs)
        if sub == "reset" and "--hard" in long:
            self.add("dangerous", "git reset --hard throws away uncommitted work")
        elif sub == "clean" and ("f" in short or "--force" in long):
            self.add("dangerous", "git clean -f deletes untracked files")
        elif sub == "checkout" and ("--" in sargs or "." in operands or "f" in short or "--force" in long):
            self.add("dangerous", "git checkout -- throws away uncommitted changes")
        elif sub == "restore" and "--staged" not in long and "S" not in short:
            self.add("dangerous", "git restore throws away uncommitted changes")
        elif sub == "push" and ("f" in short or any(x.startswith("--force") for x in long)
                                or any(o.startswith("+") for o in operands)):
            self.add("dangerous", "git push --force rewrites the remote's history")
        elif sub == "branch" and ("D" in short or ("d" in short and "f" in short)):
            self.add("dangerous", "git branch -D deletes a branch that may not be merged")
        elif sub == "stash" and sargs[:1] in (["clear"], ["drop"]):
            self.add("dangerous", "git stash clear/drop throws away stashed work")

    def _recursive_perm(self, name: str, args: list[str]) -> None:
        short, long, operands = _short_flags(args)
        if "R" not in short and "--recursive" not in long:
            return
        for target in operands[1:]:
            why = _critical_target(target)
            if why is not None:
                self.add("hardline", f"{name} -R on {why}")
                return
        self.add("dangerous", f"{name} -R changes a whole tree")

    def cmd_chmod(self, args: list[str], _cmd: Simple) -> None:
        self._recursive_perm("chmod", args)

    def cmd_chown(self, args: list[str], _cmd: Simple) -> None:
        self._recursive_perm("chown", args)

    def cmd_chgrp(self, args: list[str], _cmd: Simple) -> None:
        self._recursive_perm("chgrp", args)

    def _power(self, name: str) -> None:
        self.add("hardline", f"{name} takes the machine down")

    def cmd_shutdown(self, args: list[str], _cmd: Simple) -> None:
        if "-c" not in args:
            self._power("shutdown")

    def cmd_reboot(self, args: list[str], _cmd: Simple) -> None:
        self._power("reboot")

    def cmd_halt(self, args: list[str], _cmd: Simple) -> None:
        self._power("halt")

    def cmd_poweroff(self, args: list[str], _cmd: Simple) -> None:
        self._power("poweroff")

    def cmd_init(self, args: list[str], _cmd: Simple) -> None:
        if args[:1] in (["0"], ["6"]):
            self._power(f"init {args[0]}")

    cmd_telinit = cmd_init

    def cmd_systemctl(self, args: list[str], _cmd: Simple) -> None:
        verbs = [a for a in args if not a.startswith("-")]
        verb = verbs[0] if verbs else ""
        if verb in ("reboot", "poweroff", "halt", "kexec", "soft-reboot", "emergency", "rescue"):
            self._power(f"systemctl {verb}")
        elif verb in ("stop", "disable", "mask", "kill", "isolate"):
            self.add("dangerous", f"systemctl {verb} stops a service")

    def cmd_service(self, args: list[str], _cmd: Simple) -> None:
        if len(args) >= 2 and args[1] in ("stop", "restart"):
            self.add("dangerous", f"service {args[1]} stops a service")

    def cmd_kill(self, args: list[str], _cmd: Simple) -> None:
        rest = list(args)
        if rest[:1] in (["-l"], ["-L"], ["--list"], ["--table"]):
            return
        if rest == ["-1"]:
            self.add("hardline", "kill -1 signals every process")
            return
        if rest and rest[0] in ("-s", "-n") and len(rest) > 1:
            rest = rest[2:]
        elif rest and rest[0].startswith("-") and rest[0] != "--":
            rest = rest[1:]  # the signal (``kill -1 PID`` is SIGHUP to PID)
        if rest and rest[0] == "--":
            rest = rest[1:]
        if "-1" in rest:
            self.add("hardline", "kill -1 signals every process")
        else:
            self.add("dangerous", "kill stops processes")

    def cmd_pkill(self, args: list[str], _cmd: Simple) -> None:
        self.add("dangerous", "pkill stops processes")

    def cmd_killall(self, args: list[str], _cmd: Simple) -> None:
        self.add("dangerous", "killall stops processes")

    def cmd_killall5(self, args: list[str], _cmd: Simple) -> None:
        self.add("hardline", "killall5 signals every process")

    def cmd_docker(self, args: list[str], _cmd: Simple) -> None:
        words = [a for a in args if not a.startswith("-")]
        pair = " ".join(words[:2])
        if words[:1] in (["rm"], ["rmi"]) or pair in (
            "system prune", "container rm", "container prune", "image rm", "image prune", "volume rm",
            "volume prune", "network prune", "builder prune", "compose rm",
        ):
            what = words[0] if words[0] in ("rm", "rmi") else pair
            self.add("dangerous", f"docker {what} deletes containers or data")
        elif pair == "compose down" and ("-v" in args or "--volumes" in args):
            self.add("dangerous", "docker compose down -v deletes volumes")

    cmd_podman = cmd_docker

    def cmd_eval(self, args: list[str], _cmd: Simple) -> None:
        if args:
            self.nested(" ".join(args), "eval")

    def cmd_source(self, args: list[str], cmd: Simple) -> None:
        if any(a.startswith("<(") for a in args):
            self.add("dangerous", "sources a script that is only known at run time")

    cmd__ = cmd_source  # `.` becomes "_" in the method name

    # ---- interpreters, SQL -----------------------------------------------------------------------

    def interpreter(self, name: str, kind: str, args: list[str], cmd: Simple, pipe_in: Simple | None) -> None:
        code: str | None = None
        flag = "c" if kind == "shell" else "e"
        for i, a in enumerate(args):
            if a.startswith("-") and not a.startswith("--") and (flag in a[1:] or (kind == "interpreter" and
                                                                                    "c" in a[1:])):
                if i + 1 < len(args):
                    code = args[i + 1]
                break
            if not a.startswith("-"):
                break
        if code is not None:
            if kind == "shell":
                self.nested(code, f"{name} -c")
            else:
                self.interpreted_code(name, code)
            return
        for a in args:
            if a.startswith("<("):
                self.add("dangerous", f"{name} runs a script that is only known at run time")
                return
        for body in cmd.heredocs:
            if kind == "shell":
                self.nested(body, f"{name} here-document")
            else:
                self.interpreted_code(name, body)
        if pipe_in is not None and not [a for a in args if not a.startswith("-")]:
            self.piped_script(name, kind, pipe_in)

    def piped_script(self, name: str, kind: str, source: Simple) -> None:
        words = [w.text for w in source.words]
        src = posixpath.basename(words[0]) if words else ""
        if src in _DOWNLOADERS:
            self.add("dangerous", f"pipes a download straight into {name}")
        elif src in ("echo", "printf") and not any(w.dynamic for w in source.words[1:]):
            text = " ".join(w for w in words[1:] if not (src == "echo" and w in ("-e", "-n", "-E")))
            if kind == "shell":
                self.nested(text, f"piped into {name}")
            else:
                self.interpreted_code(name, text)
        elif src in ("cat",) and not source.words[1:]:
            self.add("dangerous", f"{name} runs whatever comes down the pipe")
        else:
            self.add("dangerous", f"{name} runs a script that comes down a pipe")

    def interpreted_code(self, name: str, code: str) -> None:
        if re.search(r"\brmtree\b|\bremove_tree\b|\bFileUtils\.rm_r", code):
            self.add("dangerous", f"{name} code deletes a directory tree")
        if re.search(r"\b(?:os\.(?:system|popen|exec\w*|spawn\w*)|subprocess|system|exec|popen|`)", code):
            for literal in _string_literals(code):
                self.nested(literal, f"{name} code")
        if re.search(r"\bos\.kill\s*\(\s*-1\b", code):
            self.add("hardline", "kill -1 signals every process")

    def sql(self, text: str) -> None:
        lowered = text.lower()
        if re.search(r"\bdrop\s+(?:table|database|schema|view|index|user|role|owned)\b", lowered):
            self.add("dangerous", "SQL DROP deletes data")
        if re.search(r"\btruncate\s+(?:table\s+)?[\w\"`\[]", lowered):
            self.add("dangerous", "SQL TRUNCATE deletes every row")
        for m in re.finditer(r"\bdelete\s+from\s+[^;]*", lowered):
            if not re.search(r"\bwhere\b", m.group()):
                self.add("dangerous", "SQL DELETE without WHERE deletes every row")
                break


def _quote(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'" if re.search(r"[^\w@%+=:,./~{}-]", word) else word


_STRING_LITERAL = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")


def _string_literals(code: str) -> list[str]:
    return [m.group(1) if m.group(1) is not None else m.group(2) for m in _STRING_LITERAL.finditer(code)]


_FORK_BOMB = re.compile(r"([\w:.]+)\s*\(\s*\)\s*\{[^}]*\1\s*\|\s*\1\s*&")
_FORK_BOMB_FN = re.compile(r"\bfunction\s+([\w:.]+)\s*(?:\(\s*\))?\s*\{[^}]*\1\s*\|\s*\1\s*&")


def _classify(command: str, depth: int) -> Verdict:
    text = normalize(command)
    checker = _Checker(depth)
    compact = text.replace("\n", ";")
    if _FORK_BOMB.search(compact) or _FORK_BOMB_FN.search(compact):
        checker.add("hardline", "a fork bomb")
    parsed = parse(text)
    prev: Simple | None = None
    for cmd in parsed.commands:
        piped_from = prev if prev is not None and prev.sep in ("|", "|&") else None
        checker.simple(cmd, piped_from)
        prev = cmd
    for inner in parsed.nested:
        checker.nested(inner, "a command substitution")
    worst: _Finding | None = None
    for f in checker.findings:
        if worst is None or _RANK[f.level] > _RANK[worst.level]:
            worst = f
    if worst is None:
        return Verdict("safe", None, text)
    return Verdict(worst.level, worst.reason, text)


def classify(command: str) -> Verdict:
    """The verdict for one command line: safe, dangerous (needs approval) or hardline (never runs)."""
    return _classify(command, 0)
