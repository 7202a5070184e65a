"""The programs the classifier knows, and the builtins and variables through which bash runs other code.

Only what is listed here (or has a rule of its own elsewhere) can be safe: ``READ_ONLY`` programs only
read and print, whatever their options; the rules below cover the few options of otherwise harmless
tools that write or run something (``date -s``, ``man -P``, ``less +!cmd``, ``rg --pre``, ``fd -x``,
``systemctl restart``...). Everything else is unknown and asks (check.py).

bash itself runs code in a few less obvious places, each closed here as a class:

- arithmetic: a value bash evaluates as a number or a variable name (``let``, ``declare -i``, ``test
  -v``, ``printf -v``, ``read``, ``(( x ))`` of a variable...) runs the command substitutions in an array
  subscript (``a[$(cmd)]``). Any such subscript in a literal those builtins get, or in any assigned value,
  is checked as the command it runs;
- ``hash -p PATH NAME`` and ``enable -f LIB`` make a name run something else (asks; the name then reads
  as that path); ``PATH`` with a directory the agent can write runs programs planted there;
- variables that make programs load code or read other configuration (``LD_PRELOAD``, ``PYTHONPATH``,
  ``GIT_DIR``, ``HOME``...) ask; variables that name a program (``PAGER``, ``EDITOR``...) run it.
"""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING

from tools.shell.files import _COMPRESSORS
from tools.shell.options import parse_opts
from tools.shell.parse import Word
from tools.shell.reading import within
from tools.shell.tables import OPTIONS

if TYPE_CHECKING:
    from tools.shell.engine import Engine as _Base
else:
    _Base = object

READ_ONLY = frozenset({
    "ls", "dir", "vdir", "cat", "tac", "nl", "head", "tail", "wc", "cut", "paste", "join", "comm", "cmp", "diff",
    "column", "fold", "fmt", "expand", "unexpand", "rev", "strings", "od", "hexdump", "hd", "base64",
    "base32", "basenc", "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum", "cksum",
    "sum", "seq", "yes", "sleep", "true", "false", "echo", "pwd", "cal", "ncal", "whoami", "id", "groups", "users",
    "who", "w", "uptime", "uname", "nproc", "arch", "tty", "logname", "locale", "getconf", "printenv", "which",
    "whereis", "type", "file", "stat", "du", "df", "free", "ps", "pgrep", "pidof", "pstree", "lsblk", "lscpu",
    "lsmem", "lsof", "lspci", "lsusb", "findmnt", "ss", "netstat", "ping", "ping6", "dig", "nslookup", "host",
    "getent", "realpath", "readlink", "basename", "dirname", "pathchk", "expr", "factor", "bc", "numfmt", "tsort",
    "pr", "look", "grep", "egrep", "fgrep", "zgrep", "jq", "test", "[", "[[", ":", "tput", "clear", "wait", "jobs",
    "dirs", "times", "caller", "help", "umask", "shopt", "set", "shift", "return", "exit", "break", "continue",
    "bg", "fg", "disown", "complete", "compopt", "logout", "unalias", "zcat", "bzcat", "xzcat",
    "zstdcat", "lzcat", "whatis", "apropos", "tr", "env", "sync", "vmstat", "iostat", "mpstat", "last", "lastlog",
    "nice", "printf", "top", "htop", "watch", "time", "timeout", "nohup", "command", "builtin", "exec", "read",
    "mapfile", "readarray", "let", "getopts", "unset", "local", "export", "declare", "typeset", "readonly",
    "ulimit", "tldr", "lsattr", "wdiff", "dmesg", "journalctl",
})
# Arguments of these builtins that bash may evaluate as arithmetic or as a (subscripted) variable name.
_NAME_CONTEXTS = frozenset({"let", "test", "[", "[[", "read", "mapfile", "readarray", "unset", "getopts", "wait",
                            "declare", "typeset", "local", "export", "readonly", "printf"})
_SUBSCRIPT_CODE = re.compile(r"[A-Za-z_]\w*\[[^\]]*(\$\(|`)")
_PROMPT_EXPANSION = re.compile(r"\$\{(\w+)@P\}")
_PROGRAM_VARS = frozenset({"PAGER", "GIT_PAGER", "MANPAGER", "SYSTEMD_PAGER", "EDITOR", "VISUAL", "GIT_EDITOR",
                           "GIT_SEQUENCE_EDITOR", "GIT_SSH_COMMAND", "GIT_SSH", "GIT_ASKPASS", "SSH_ASKPASS",
                           "SUDO_ASKPASS", "GIT_EXTERNAL_DIFF", "PROMPT_COMMAND", "GIT_PROXY_COMMAND",
                           "RSYNC_RSH", "BROWSER", "LESSOPEN", "LESSCLOSE", "PS1", "PS2", "PS4", "PS0",
                           "SYSTEMD_EDITOR", "FCEDIT", "LESSEDIT", "TAR_RSH", "RSH", "PSQL_PAGER",
                           "PSQL_EDITOR"})
_OPAQUE_VARS = frozenset({"LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "PERL5OPT", "PERL5DB", "PERL5LIB", "PERLLIB",
                          "RUBYOPT", "RUBYLIB", "NODE_OPTIONS", "NODE_PATH", "LUA_PATH", "LUA_CPATH", "LUA_INIT",
                          "PHPRC", "PHP_INI_SCAN_DIR", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONSTARTUP",
                          "PYTHONINSPECT", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG_GLOBAL",
                          "GIT_CONFIG_SYSTEM", "GIT_CONFIG", "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR", "GIT_DIR",
                          "GIT_COMMON_DIR", "SHELLOPTS", "BASHOPTS", "HOME", "XDG_CONFIG_HOME", "ZDOTDIR",
                          "GCONV_PATH", "MANOPT", "LESS", "LESSKEY", "LESSKEYIN", "GIT_CONFIG_NOSYSTEM",
                          "INPUTRC", "MAKEFLAGS", "MFLAGS", "GNUMAKEFLAGS", "MAKEFILES", "NPM_CONFIG_USERCONFIG",
                          "PIP_CONFIG_FILE", "CURL_HOME", "WGETRC", "TAR_OPTIONS", "ZIPOPT", "UNZIP",
                          "UNZIPOPT", "GREP_OPTIONS", "SYSTEMD_LESS", "PSQLRC", "SQLITE_HISTORY", "MYSQL_HOME",
                          # options by another name: they reach the programs whose option tables are checked
                          "SIMPLE_BACKUP_SUFFIX", "RIPGREP_CONFIG_PATH", "PARALLEL", "GZIP", "BZIP", "BZIP2",
                          "XZ_OPT", "XZ_DEFAULTS", "GOFLAGS", "GOTOOLCHAIN", "GOENV",
                          "RUSTUP_TOOLCHAIN", "RUSTC_WRAPPER", "RUSTC", "CARGO_HOME", "CARGO_BUILD_RUSTC_WRAPPER",
                          "YARN_RC_FILENAME", "PIP_PYTHON", "PIP_LOG", "NPM_CONFIG_GLOBALCONFIG",
                          "npm_config_userconfig", "npm_config_globalconfig", "PYTHONWARNINGS",
                          "LESSKEY_CONTENT", "LESSKEYIN_SYSTEM", "LESSKEY_SYSTEM"})
_SYSTEMCTL_READS = frozenset({"status", "show", "cat", "list-units", "list-unit-files", "list-timers",
                              "list-sockets", "list-jobs", "list-dependencies", "list-machines", "list-sessions",
                              "list-users", "list-seats", "is-active", "is-enabled", "is-failed", "is-system-running",
                              "get-default", "help", "show-environment", "show-session", "show-user",
                              "session-status", "user-status", "seat-status", "--version", ""})
_POWER = frozenset({"reboot", "poweroff", "halt", "kexec", "soft-reboot", "emergency", "rescue", "suspend",
                    "hibernate", "hybrid-sleep"})
_TMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm")


class Known(_Base):
    def known(self, name: str, args: list[Word]) -> bool:
        if name in _COMPRESSORS:
            self.compressor(name, args)
            return True
        if name in _NAME_CONTEXTS:
            self.name_context(name, args)
        if name == "set" and any(a.text == "--" for a in args) and self.positional is not None:
            rest = args[[a.text for a in args].index("--") + 1:]
            self.positional = [self.positional[0] if self.positional else Word("bash"), *rest]
        return name in READ_ONLY

    # ---- bash: arithmetic, names, hashing -----------------------------------------------------------

    def subscript_code(self, word: Word, how: str) -> None:
        """A literal bash may evaluate as a subscripted name runs the command substitutions in it."""
        if _SUBSCRIPT_CODE.search(word.text) and not word.text.startswith("$(("):
            self.run_text(": " + word.text, f"{how} (an array subscript runs commands)")

    def prompt_expansions(self, words: list[Word]) -> None:
        """``${x@P}`` expands x like a prompt string, which runs the command substitutions in its value."""
        for w in words:
            for d in w.dyns:
                m = _PROMPT_EXPANSION.fullmatch(d)
                if m is None:
                    continue
                values = self.ctx.vars.get(m.group(1))
                if values is None:
                    self.add("dangerous", f"${{{m.group(1)}@P}} runs what a value only known at run time says",
                             own=False)
                for v in values or []:
                    self.run_text(": " + v, f"${{{m.group(1)}@P}}")

    def name_context(self, name: str, args: list[Word]) -> None:
        for w in args:
            self.subscript_code(w, name)
        if name in ("read", "mapfile", "readarray"):
            o = parse_opts(args, short_args="adDnNptuCcOs")
            for w in o.operands:
                self.ctx.vars[w.text] = None
            for w in o.value("-C"):  # mapfile -C CALLBACK evaluates it every few lines
                self.run_word(w, f"{name} -C")

    def declaration(self, words: list[Word]) -> None:
        for w in words[1:]:
            self.subscript_code(w, words[0].text if words else "declare")
        if words and words[0].text in ("declare", "typeset", "local", "export", "readonly") and any(
                w.text.startswith("-") and "f" in w.text for w in words[1:]):
            return  # printing or exporting functions

    def cmd_printf(self, args: list[Word]) -> None:
        o = parse_opts(args[:2], short_args="v")
        for w in o.value("-v"):
            self.subscript_code(w, "printf -v")

    def cmd_hash(self, args: list[Word]) -> None:
        o = parse_opts(args, short_args="pt")
        for path in o.value("-p"):
            self.add("dangerous", "hash -p makes a command name run another program")
            for name in o.operands:
                if not path.dynamic and not name.dynamic:
                    self.ctx.aliases[name.text] = path.text

    def cmd_enable(self, args: list[Word]) -> None:
        if any(a.text.startswith("-") and "f" in a.text for a in args):
            self.add("dangerous", "enable -f loads a shared library into the shell")

    def cmd_compgen(self, args: list[Word]) -> None:
        o = parse_opts(args, spec=OPTIONS["compgen"])
        for w in o.value("-C"):
            self.run_word(w, "compgen -C")
        for w in o.value("-W"):  # the word list is expanded: its substitutions run
            self.run_text(": " + w.text, "compgen -W")
        if o.value("-F"):
            self.add("dangerous", "compgen -F runs a shell function")

    def cmd_history(self, args: list[Word]) -> None:
        o = parse_opts(args, short_args="d")
        if o.has("w", "a", "r", "n", "s", "p"):
            for f in o.operands or [Word("~/.bash_history")]:
                self.write(f, "history writes")

    def cmd_diff3(self, args: list[Word]) -> None:
        o = parse_opts(args, short_args="oLIwW", long_args=("--diff-program", "--output", "--label", "--width"))
        for w in o.value("--diff-program"):
            self.run_program(w, "--diff-program")
        for f in o.value("-o", "--output"):
            self.write(f, "sdiff -o writes")

    cmd_sdiff = cmd_diff3

    def cmd_fc(self, args: list[Word]) -> None:
        if not (args and all(a.text.startswith("-l") or a.text.lstrip("-").isdigit() for a in args)):
            self.add("dangerous", "fc runs commands from the history through an editor")

    # ---- variables ---------------------------------------------------------------------------------

    def assignment(self, key: str, value: Word) -> None:
        if key in _PROGRAM_VARS:
            self.run_word(value, key)
        elif key in ("BASH_ENV", "ENV"):
            self.run_file(value, "shell", key)
        elif key in _OPAQUE_VARS:
            self.add("dangerous", f"{key} makes programs load other code or configuration", own=False)
        elif key == "CDPATH":
            self.ctx.cds.append(None)
        elif key == "PATH":
            self.path_value(value)
        elif key == "PYTHONPATH":
            if value.dynamic:
                self.add("dangerous", "PYTHONPATH is only known at run time", own=False)
            else:
                base = self.ctx.cwd or ""
                dirs = [posixpath.normpath(posixpath.join(base, p)) for p in value.text.split(":") if p]
                self.ctx.vars["PYTHONPATH"] = [":".join(dirs)]

    def path_value(self, value: Word) -> None:
        """PATH may only add directories the agent cannot write: else a planted ``ls`` runs instead."""
        ws = self.ctx.workspace
        for part in (value.template or value.text).split(":"):
            src = part
            for i, dyn in enumerate(value.dyns):
                src = src.replace(chr(0xF0000 + i), dyn)
            if src in ("$PATH", "${PATH}"):
                continue
            bad = (not src.startswith("/") or "$" in src or src.startswith(_TMP_DIRS)
                   or (ws is not None and within(posixpath.normpath(src), ws)))
            if bad:
                self.add("dangerous", "PATH with a directory the agent can write runs programs planted there",
                         own=False)
                return

    # ---- system tools with a few harmful options ---------------------------------------------------

    def cmd_date(self, args: list[Word]) -> None:
        o = parse_opts(args, spec=OPTIONS["date"])
        if o.has("-s", "--set") or any(not w.text.startswith("+") for w in o.operands):
            self.add("dangerous", "date -s (or a date without +) sets the system clock")

    def cmd_hostname(self, args: list[Word]) -> None:
        o = parse_opts(args, short_args="F", long_args=("--file",))
        if o.operands or o.value("-F", "--file"):
            self.add("dangerous", "hostname NAME renames the machine")

    def cmd_systemctl(self, args: list[Word]) -> None:
        verbs = [a.text for a in args if not a.text.startswith("-")]
        verb = verbs[0] if verbs else ""
        if verb in _POWER:
            self.add("hardline", f"systemctl {verb} takes the machine down")
        elif any(a.dynamic for a in args):
            self.add("dangerous", "systemctl with arguments only known at run time")
        elif verb not in _SYSTEMCTL_READS:
            self.add("dangerous", f"systemctl {verb} changes services or the system")

    cmd_loginctl = cmd_systemctl

    def cmd_timedatectl(self, args: list[Word]) -> None:
        verbs = [a.text for a in args if not a.text.startswith("-")]
        if verbs[:1] not in ([], ["status"], ["show"], ["list-timezones"], ["timesync-status"]):
            self.add("dangerous", f"{verbs[0]} changes system settings")

    cmd_hostnamectl = cmd_localectl = cmd_timedatectl

    def cmd_service(self, args: list[Word]) -> None:
        if not (len(args) >= 2 and args[1].text == "status") and [a.text for a in args] != ["--status-all"]:
            self.add("dangerous", "service changes a service")

    def cmd_man(self, args: list[Word]) -> None:
        o = parse_opts(args, spec=OPTIONS["man"])
        for w in o.value("-P", "--pager"):
            self.run_program(w, "man --pager")
        if o.has("-H", "--html") or o.value("-H", "--html", "-C", "--config-file", "-p", "--preprocessor"):
            self.add("dangerous", "man -H/-C/-p runs a browser, a preprocessor or another configuration")

    def cmd_less(self, args: list[Word]) -> None:
        for a in args:
            if a.text.startswith("+") or a.dynamic:
                self.add("dangerous", "less +CMD runs a command of its own (! runs a shell)")
                return
        o = parse_opts(args, spec=OPTIONS["less"])
        for f in o.value("-o", "-O", "--log-file", "--LOG-FILE"):
            self.write(f, "less -o writes")
        if o.value("-k", "--lesskey-file", "--lesskey-src"):
            self.add("dangerous", "less -k reads key bindings that can run commands")
        self.home_rc("less", ".lesskey")
        self.home_rc("less", ".config/lesskey")

    cmd_more = cmd_less

    def cmd_colordiff(self, args: list[Word]) -> None:
        self.home_rc("colordiff", ".colordiffrc")  # it names the diff program to run

    def cmd_jobs(self, args: list[Word]) -> None:
        o = parse_opts(args, spec=OPTIONS["jobs"])
        if o.has("-x") and o.operands:  # jobs -x CMD ARGS runs CMD
            self.run_argv(o.operands, "jobs -x")

    def cmd_rg(self, args: list[Word]) -> None:
        o = parse_opts(args, spec=OPTIONS["rg"])
        for w in o.value("--pre"):
            self.run_program(w, "rg --pre")

    def cmd_ruff(self, args: list[Word]) -> None:
        """ruff reads its settings but runs no project code; fixing and formatting rewrite the files named."""
        sub, o = self.sub_options("ruff", args)
        if (sub == "format" and not o.has("--check", "--diff")) or (sub == "check" and o.has(
                "--fix", "--unsafe-fixes", "--fix-only", "--add-noqa")):
            for p in o.operands or [Word(".")]:
                self.write(p, "ruff rewrites", glob_ok=True)
        for f in o.value("-o", "--output-file"):
            self.write(f, "ruff --output-file writes")

    def cmd_black(self, args: list[Word]) -> None:
        if not any(a.text in ("--check", "--diff", "--version", "-h", "--help") for a in args):
            for p in [a for a in args if not a.text.startswith("-")] or [Word(".")]:
                self.write(p, "black rewrites", glob_ok=True)

    def cmd_fd(self, args: list[Word]) -> None:
        for i, a in enumerate(args):
            if a.text in ("-x", "--exec", "-X", "--exec-batch") or a.text.startswith(("--exec=", "--exec-batch=")):
                inner = [w for w in args[i + 1:] if w.text != ";"]
                if not any("{" in w.text for w in inner):  # without a placeholder, the path goes last
                    inner.append(Word("{}"))
                self.run_argv([Word(w.text, w.dynamic or "{" in w.text, w.glob) for w in inner], f"fd {a.text}")
                return

    cmd_fdfind = cmd_fd
