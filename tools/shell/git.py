"""git: what its subcommands throw away or rewrite, and everything through which git runs other programs.

git runs commands from settings (``-c``, ``--config-env``, ``git config``, config files: aliases with
``!``, pagers, editors, fsmonitor, filters, helpers...), from hooks, from ``submodule foreach``,
``bisect run`` and ``rebase --exec``. Settings given on the line are checked like any command. For every
git command the repository's own configuration and hooks (under the workspace) and the sandbox home's
``.gitconfig`` are read too, because the agent can write those files without asking (the file tools, an
earlier command): what they would run is checked as if it were on the line. A subcommand git does not
have (``git foo`` runs ``git-foo`` from PATH) asks; so does ``--git-dir`` (another repository's hooks).
"""

from __future__ import annotations

import os
import posixpath
import re
from typing import TYPE_CHECKING

from tools.shell.options import Opts, parse_opts
from tools.shell.parse import Word
from tools.shell.reading import open_inside, within
from tools.shell.tables_git import GIT, GIT_GLOBAL, NO_OPTIONS
from tools.shell.values import quote as sh_quote

if TYPE_CHECKING:
    from tools.shell.engine import Engine as _Base
else:
    _Base = object

_GIT_RUNS = re.compile(
    r"^(core\.(pager|editor|sshcommand|fsmonitor|askpass|gitproxy)|sequence\.editor|diff\.external|"
    r"diff\..+\.(textconv|command)|merge\..+\.driver|filter\..+\.(clean|smudge|process)|credential(\..+)?\.helper|"
    r"gpg(\..+)?\.program|pager\..+|alias\..+|uploadpack\.packobjectshook|remote\..+\.(uploadpack|receivepack|proxy)|"
    r"(merge|diff)tool\..+\.cmd|man\..+\.cmd|browser\..+\.cmd|web\.browser|sendemail\..+|interactive\.difffilter|"
    r"core\.hookspath|include(if\..+)?\.path|init\.templatedir|protocol\..*allow|instaweb\..+)$", re.IGNORECASE)
_GIT_PATHS = re.compile(r"^(core\.hookspath|include(if\..+)?\.path|init\.templatedir|protocol\..*allow)$", re.I)
# (``apply`` and ``am`` count their own links when their patch is read: ``apply_patch``)
_GIT_MUTATES = frozenset({"checkout", "switch", "pull", "merge", "reset", "restore", "stash",
                          "cherry-pick", "rebase", "revert", "clone", "worktree", "submodule", "read-tree"})


_STASH_VERBS = frozenset({"push", "save", "pop", "apply", "list", "show", "drop", "clear", "branch", "create",
                          "store"})
_FROM_FILE = "\0"  # marks an alias read from a config file
_GIT_SUBS = frozenset({
    "add", "am", "annotate", "apply", "archive", "bisect", "blame", "branch", "bundle", "cat-file", "check-attr",
    "check-ignore", "check-mailmap", "check-ref-format", "checkout", "checkout-index", "cherry", "cherry-pick",
    "citool", "clean", "clone", "commit", "commit-graph", "commit-tree", "config", "count-objects", "describe",
    "diff", "diff-files", "diff-index", "diff-tree", "fetch", "for-each-ref", "format-patch", "fsck", "gc",
    "grep", "hash-object", "help", "init", "log", "ls-files", "ls-remote", "ls-tree", "maintenance", "merge",
    "merge-base", "merge-file", "merge-tree", "mktag", "mktree", "mv", "name-rev", "notes", "pack-refs",
    "prune", "pull", "push", "range-diff", "read-tree", "rebase", "reflog", "remote", "repack", "replace",
    "rerere", "reset", "restore", "rev-list", "rev-parse", "revert", "rm", "shortlog", "show", "show-branch",
    "show-ref", "sparse-checkout", "stash", "status", "stripspace", "submodule", "switch", "symbolic-ref", "tag",
    "update-index", "update-ref", "var", "verify-commit", "verify-pack", "verify-tag", "version", "whatchanged",
    "worktree", "write-tree", "filter-branch", "difftool", "mergetool",
})
_CONFIG_FLAGS = ("--global", "--system", "--local", "--worktree", "--file", "--blob", "--type", "--default",
                 "--comment", "--unset", "--unset-all", "--get", "--get-all", "--get-regexp", "--list", "--edit",
                 "--add", "--replace-all", "--bool", "--int", "--path", "--null", "--name-only", "--show-origin",
                 "--show-scope", "--includes", "--no-includes")


class Git(_Base):
    def git_config_value(self, key: str, value: Word, how: str, *, quiet: bool = False) -> None:
        if not _GIT_RUNS.match(key):
            return
        shown = how if quiet else f"git {key}"
        if value.dynamic:
            self.add("dangerous", f"{how} sets {key if not quiet else 'a setting'} to something only known at run "
                                  "time", own=False)
        elif _GIT_PATHS.match(key):
            self.add("dangerous", f"{how} sets {key if not quiet else 'a setting'}, which makes git run other "
                                  "programs", own=False)
        elif key.lower().startswith("alias."):
            if value.text.startswith("!"):
                self.run_text(value.text[1:], shown if quiet else f"git alias {key[6:]}", quiet=quiet)
        elif key.lower().endswith(".helper") and not value.text.startswith(("!", "/")):
            return
        else:
            self.run_text(value.text.lstrip("!"), shown, quiet=quiet)

    def cmd_git(self, args: list[Word]) -> None:
        rest = list(args)
        aliases: dict[str, str] = {}
        repo_dirs: list[Word | None] = []
        while rest and rest[0].text.startswith("-"):
            opt = rest.pop(0)
            name, eq, attached = opt.text.partition("=")
            if name in ("-c", "--config-env") and (eq or rest):
                pair = Word(attached, opt.dynamic) if eq else rest.pop(0)
                key, _, val = pair.text.partition("=")
                value = Word(val, pair.dynamic)
                if name == "--config-env":
                    value = self.env_value(val, pair.dynamic)
                self.git_config_value(key, value, f"git {name}")
                if key.lower().startswith("alias."):
                    aliases[key[6:].lower()] = value.text
            elif name == "-C" and rest:
                repo_dirs.append(rest.pop(0))
            elif name == "--exec-path":
                if eq:
                    self.add("dangerous", "git --exec-path runs git commands from another directory")
            elif name in ("--git-dir", "--work-tree", "--namespace", "--super-prefix", "--list-cmds",
                          "--attr-source") and (eq or rest):
                if not eq:
                    rest.pop(0)
                if name == "--git-dir":
                    self.add("dangerous", "git --git-dir uses another repository's configuration and hooks")
            elif not GIT_GLOBAL.known(name) and not opt.dynamic:
                self.add("dangerous", f"git {name} is not an option this classifier knows to be harmless")
            elif opt.dynamic:
                self.add("dangerous", "git with options only known at run time")
        self.repo_code(repo_dirs)
        if not rest:
            return
        sub_word, sargs = rest[0], rest[1:]
        sub = sub_word.text
        if sub_word.dynamic:
            self.add("dangerous", "the git command is only known at run time")
            return
        alias = aliases.get(sub.lower(), self.ctx.git_aliases.get(sub.lower()))
        if alias is not None and sub not in _GIT_SUBS:
            quiet = alias.startswith(_FROM_FILE)  # defined in a config file: never quoted
            alias = alias.removeprefix(_FROM_FILE)
            if alias.startswith("!"):
                self.run_text(alias[1:] + "".join(" " + sh_quote(a.text) for a in sargs), f"git alias {sub}",
                              quiet=quiet)
            elif self.depth < 8:
                self.run_text(" ".join(["git", alias, *(sh_quote(a.text) for a in sargs)]), f"git alias {sub}",
                              quiet=quiet)
            return
        if sub in _GIT_MUTATES:
            self.ctx.links += 1
        self.git_sub(sub, sargs)

    def env_value(self, name: str, dynamic: bool) -> Word:
        """The value of an environment variable named on the line (``X=... git --config-env=k=X``)."""
        for key, value in reversed(self.env_assigns):
            if key == name:
                return value
        known = self.ctx.vars.get(name) if not dynamic else None
        if known is not None and len(known) == 1:
            return Word(known[0])
        return Word(f"${name}", dynamic=True)

    def git_sub(self, sub: str, sargs: list[Word]) -> None:
        if sub in _GIT_SUBS:
            self.check_options(f"git {sub}", sargs, GIT.get(sub, NO_OPTIONS))
            self.git_discards(sub, sargs)
        o: Opts = parse_opts(sargs, longs=_GIT_LONGS.get(sub, ()),
                             short_args={"rebase": "xm", "commit": "mFCc", "format-patch": "o", "archive": "o",
                                         "clone": "obuc", "config": "f"}.get(sub, ""),
                             long_args=("--exec", "--message", "--upload-pack", "--receive-pack", "--output",
                                        "--output-directory", "--file", "--blob", "--type", "--default", "--comment",
                                        "--template", "--separate-git-dir", "--reference", "--origin", "--branch",
                                        "--config", "--open-files-in-pager", "--extcmd", "--tool"))
        texts = [a.text for a in sargs]
        operands = [w.text for w in o.operands]
        dyn = o.dynamic or any(w.dynamic for w in o.operands)
        if sub == "reset" and o.has("--hard", "--merge", "--keep"):
            self.add("dangerous", "git reset --hard throws away uncommitted work")
        elif sub == "clean" and not o.has("-n", "--dry-run"):
            self.add("dangerous", "git clean deletes untracked files")
        elif sub == "checkout" and ("--" in texts or "." in operands or o.has("-f", "--force")):
            self.add("dangerous", "git checkout -- throws away uncommitted changes")
        elif sub == "restore" and (not o.has("--staged", "-S") or o.has("--worktree", "-W")):
            self.add("dangerous", "git restore throws away uncommitted changes")
        elif sub == "push" and (o.has("-f", "--force", "--force-with-lease", "--force-if-includes", "--mirror",
                                      "--delete", "-d", "--prune") or any(x.startswith("+") for x in operands)
                                or any(x.startswith(":") for x in operands[1:])):
            self.add("dangerous", "git push --force rewrites the remote's history")
        elif sub == "branch" and (o.has("-D") or (o.has("-d", "--delete") and o.has("-f", "--force"))):
            self.add("dangerous", "git branch -D deletes a branch that may not be merged")
        elif sub == "stash" and operands[:1] in (["clear"], ["drop"]):
            self.add("dangerous", "git stash clear/drop throws away stashed work")
        elif sub == "filter-branch":
            self.add("dangerous", "git filter-branch rewrites history and runs its filters")
        elif sub == "config":
            self.git_config(o)
        elif sub not in _GIT_SUBS:
            self.add("dangerous", f"git {sub} is not a git command this classifier knows (it may run git-{sub})")
        elif sub in ("reset", "clean", "checkout", "restore", "push", "branch", "stash") and dyn:
            self.add("dangerous", f"git {sub} with arguments only known at run time")
        for w in o.value("--exec", "-x", "--upload-pack", "--receive-pack") + (o.value("-u") if sub == "clone" else []):
            self.run_word(w, f"git {sub} {w.text and '--exec'}")
        if sub == "rebase" and o.has("-x", "--exec") and not o.value("--exec", "-x"):
            self.add("dangerous", "git rebase --exec runs commands")
        if sub == "bisect" and operands[:1] == ["run"]:
            self.run_argv(o.operands[1:], "git bisect run")
        if sub == "submodule" and "foreach" in operands:
            idx = texts.index("foreach")
            cmd = [a for a in sargs[idx + 1:] if a.text not in ("--recursive", "-q", "--quiet")]
            if len(cmd) == 1:  # one argument is a shell script; several are the command's own words
                self.run_word(cmd[0], "git submodule foreach")
            elif cmd:
                self.run_argv(cmd, "git submodule foreach")
        for w in o.value("--output", "--output-directory") + (o.value("-o") if sub in ("format-patch", "archive")
                                                                 else []):
            self.write(w, f"git {sub} --output writes")
        if sub == "bundle" and operands[:1] == ["create"] and len(o.operands) > 1:
            self.write(o.operands[1], "git bundle create writes")
        if sub in ("clone", "init", "worktree") and o.operands:
            dest = o.operands[-1] if sub != "clone" or len(o.operands) > 1 else \
                Word(re.sub(r"\.git$", "", o.operands[0].text.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]),
                     o.operands[0].dynamic)
            if not (sub == "worktree" and operands[:1] != ["add"]):
                self.write(dest, f"git {sub} creates")
        if o.value("--template", "--separate-git-dir", "--config", "-c", "--open-files-in-pager", "--extcmd",
                   "--tool") or o.has("-O", "--open-files-in-pager"):
            self.add("dangerous", f"git {sub} is given a template, a config or a program to run")
        if sub in ("difftool", "mergetool") and any(t.startswith(("-x", "--extcmd")) for t in texts):
            self.add("dangerous", f"git {sub} --extcmd runs a command")
        if any("ext::" in t for t in texts):
            self.add("dangerous", "a git ext:: URL runs a command")

    def git_discards(self, sub: str, sargs: list[Word]) -> None:
        """Subcommands that delete files of the work tree or the records that recover them."""
        o = parse_opts(sargs, spec=GIT.get(sub, NO_OPTIONS))
        verb = o.operands[0].text if o.operands else ""
        if sub == "stash" and (verb in ("push", "save") or verb not in _STASH_VERBS):
            if o.has("-u", "--include-untracked", "-a", "--all", "--only-untracked"):
                self.add("dangerous", "git stash -u takes untracked files out of the work tree (and -a ignored "
                                      "ones too)")
        elif sub == "rm" and not o.has("--cached"):
            self.git_rm(o)
        elif sub == "checkout" and not o.has("-b", "-B", "--orphan", "--detach", "-p", "--patch"):
            paths = o.operands[1:] if len(o.operands) > 1 else [w for w in o.operands if self.names_a_path(w)]
            if paths:
                self.add("dangerous", f"git checkout {paths[0].text[:40]} throws away uncommitted changes to it")
        elif sub == "sparse-checkout" and verb not in ("", "list"):
            self.add("dangerous", f"git sparse-checkout {verb} takes files out of the work tree")
        elif sub == "worktree" and verb in ("remove", "prune", "move"):
            self.add("dangerous", f"git worktree {verb} deletes or moves a work tree")
        elif sub == "submodule" and (verb == "deinit" or (verb == "update" and o.has("-f", "--force"))):
            self.add("dangerous", f"git submodule {verb} deletes or overwrites a submodule's files")
        elif sub == "reflog" and verb in ("expire", "delete"):
            self.add("dangerous", f"git reflog {verb} throws away git's record of where branches were")
        elif sub == "prune":
            self.add("dangerous", "git prune deletes the unreachable objects lost work is recovered from")
        elif sub == "maintenance" and verb in ("start", "register"):
            self.add("dangerous", f"git maintenance {verb} schedules git to run later")
        elif sub in ("apply", "am") and not o.has("--cached", "--abort", "--continue", "--skip", "--quit",
                                                 "--show-current-patch", "--resolved") and (
                sub == "am" or o.has("--apply") or not o.has("--check", "--stat", "--numstat", "--summary")):
            strip = [w.text for w in o.value("-p")]
            base = (o.value("--directory") or [Word(".")])[-1]
            self.apply_patch(o.operands, f"git {sub}", base, int(strip[-1]) if strip and strip[-1].isdigit() else 1)

    def git_rm(self, o: Opts) -> None:
        if o.has("-r"):
            self.add("dangerous", "git rm -r deletes whole directories")
        if o.has("-f", "--force"):
            self.add("dangerous", "git rm -f deletes files with uncommitted changes")
        if o.has("--pathspec-from-file"):
            self.add("dangerous", "git rm deletes the files a list names")
        if o.has("-n", "--dry-run"):
            return
        # git matches a pathspec itself: ``git rm '*.py'`` is a pattern even quoted.
        self.deletes([Word(w.text, w.dynamic, w.glob or bool(re.search(r"[*?\[]", w.text)) or self.is_dir(w))
                      for w in o.operands], "git rm")

    def names_a_path(self, w: Word) -> bool:
        """Whether ``git checkout X`` names a path (it throws away the changes to it) rather than a branch."""
        if w.dynamic or w.glob or w.text in (".", "..") or w.text.startswith(":"):
            return True
        return any(d is not None and os.path.lexists(posixpath.join(d, w.text)) for d in self.here())

    def is_dir(self, w: Word) -> bool:
        return w.text in (".", "..") or any(d is not None and os.path.isdir(posixpath.join(d, w.text))
                                            for d in self.here())

    def git_config(self, o: Opts) -> None:
        for f in o.value("--file", "-f"):
            self.write(f, "git config writes")
        if o.has("--global"):
            self.write(Word("~/.gitconfig"), "git config --global writes")
        ops = [w for w in o.operands]
        if ops and ops[0].text in ("set", "get", "unset", "list", "edit", "rename-section", "remove-section"):
            verb = ops.pop(0).text
            if verb != "set":
                return
        if o.has("--unset", "--unset-all", "--get", "--get-all", "--get-regexp", "--list", "-l", "--edit", "-e"):
            return
        if len(ops) >= 2:
            key, value = ops[0], ops[1]
            if key.dynamic:
                self.add("dangerous", "git config of a key only known at run time")
            self.git_config_value(key.text, value, "git config")
            if key.text.lower().startswith("alias."):
                self.ctx.git_aliases[key.text[6:].lower()] = value.text

    # ---- what the repository itself makes git run ----------------------------------------------------

    def repo_code(self, repo_dirs: list[Word | None]) -> None:
        ctx = self.ctx
        ctx.git_seen = True
        root = ctx.read_root
        if root is None or ctx.cwd is None:
            return
        start = ctx.cwd
        for d in repo_dirs:
            if d is None or d.dynamic:
                self.add("dangerous", "git -C runs in a directory only known at run time", own=False)
                return
            start = posixpath.normpath(posixpath.join(start, d.text))
        files: list[tuple[str, str]] = []
        gitdir = _find_gitdir(start, root)
        if gitdir is not None:
            files += [(posixpath.join(gitdir, "config"), "the repository's git configuration"),
                      (posixpath.join(gitdir, "config.worktree"), "the repository's git configuration")]
        if ctx.workspace is not None:  # the sandbox's $HOME
            files += [(posixpath.join(ctx.workspace, ".gitconfig"), "the home's .gitconfig"),
                      (posixpath.join(ctx.workspace, ".config", "git", "config"), "the home's git configuration")]
        for path, shown in files:
            if path in ctx.modules or not os.path.lexists(path):
                continue
            ctx.modules.add(path)
            data, _real, why = open_inside(path, root)
            if data is None:
                self.add("dangerous", f"git reads {shown}, which {why}", own=False)
                continue
            entries = _parse_config(data.decode("utf-8", "replace"))
            if entries is None:
                self.add("dangerous", f"{shown} could not be read", own=False)
                continue
            for key, value in entries:
                if key.lower().startswith("alias."):  # an alias runs when it is used (cmd_git)
                    ctx.git_aliases.setdefault(key[6:].lower(), _FROM_FILE + value)
                else:
                    self.git_config_value(key, Word(value), shown, quiet=True)
        if gitdir is not None:
            hooks = posixpath.join(gitdir, "hooks")
            if hooks in ctx.modules or not os.path.isdir(hooks):
                return
            ctx.modules.add(hooks)
            for name in sorted(os.listdir(hooks))[:64]:
                path = posixpath.join(hooks, name)
                if not name.endswith(".sample") and os.path.isfile(path):
                    self.run_file(Word(path), None, f"git hook {name}", feed=None)


def _find_gitdir(start: str, root: str) -> str | None:
    d = start
    while within(d, root):
        dot = posixpath.join(d, ".git")
        if os.path.isdir(dot):
            return dot
        if os.path.isfile(dot):
            data, _real, _why = open_inside(dot, root)
            m = re.match(rb"gitdir:\s*(\S+)", data or b"")
            if m:
                target = posixpath.normpath(posixpath.join(d, m.group(1).decode("utf-8", "replace")))
                return target if within(os.path.realpath(target), root) else None
            return None
        if d == root:
            break
        d = posixpath.dirname(d)
    return None


def _parse_config(text: str) -> list[tuple[str, str]] | None:
    """``(section[.subsection].key, value)`` pairs of a git config file; None when it cannot be read."""
    out: list[tuple[str, str]] = []
    section = ""
    lines = text.replace("\\\n", "").split("\n")
    for raw in lines:
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            m = re.match(r'\[\s*([\w.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\](.*)$', line)
            if not m:
                return None
            section = m.group(1).lower() + (f".{m.group(2)}" if m.group(2) is not None else "")
            line = m.group(3).strip()
            if not line or line[0] in "#;":
                continue
        m = re.match(r"([A-Za-z][\w-]*)\s*(?:=\s*(.*))?$", line)
        if not m or not section:
            return None
        out.append((f"{section}.{m.group(1).lower()}", _config_value(m.group(2) or "")))
    return out


def _config_value(raw: str) -> str:
    out: list[str] = []
    quoted = False
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw):
            out.append({"n": "\n", "t": "\t", "b": "\b"}.get(raw[i + 1], raw[i + 1]))
            i += 2
            continue
        if ch == '"':
            quoted = not quoted
        elif ch in "#;" and not quoted:
            break
        else:
            out.append(ch)
        i += 1
    return "".join(out).strip()


_GIT_LONGS: dict[str, tuple[str, ...]] = {
    "reset": ("--hard", "--soft", "--mixed", "--merge", "--keep", "--quiet", "--patch", "--recurse-submodules"),
    "clean": ("--force", "--dry-run", "--quiet", "--interactive", "--exclude"),
    "checkout": ("--force", "--quiet", "--detach", "--track", "--orphan", "--ours", "--theirs", "--merge",
                 "--patch", "--progress", "--overwrite-ignore", "--ignore-other-worktrees"),
    "restore": ("--staged", "--worktree", "--source", "--patch", "--ours", "--theirs", "--merge", "--quiet"),
    "push": ("--force", "--force-with-lease", "--force-if-includes", "--mirror", "--delete", "--prune",
             "--all", "--tags", "--follow-tags", "--set-upstream", "--dry-run", "--quiet", "--verbose",
             "--no-verify", "--atomic", "--receive-pack", "--exec", "--porcelain", "--progress", "--signed"),
    "branch": ("--delete", "--force", "--move", "--copy", "--list", "--all", "--remotes", "--verbose",
               "--set-upstream-to", "--unset-upstream", "--contains", "--merged", "--no-merged", "--show-current"),
    "rebase": ("--exec", "--interactive", "--onto", "--continue", "--abort", "--skip", "--root", "--autosquash"),
}


