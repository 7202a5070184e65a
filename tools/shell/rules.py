"""The rules for one command by name: what it deletes, overwrites, stops or hands on to run.

Each ``cmd_<name>`` gets the argument words (``Word``: text plus whether it is only known at run time)
and reports through the engine (``tools/shell/check.py``): ``add`` a finding, ``write`` a target (the
workspace rule decides later), or hand code on (``run_argv``, ``run_text``, ``run_code``, ``run_sql``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tools.shell.options import Opts, parse_opts
from tools.shell.parse import Word
from tools.shell.paths import BLOCK_DEVICE, HARMLESS_SINKS, critical

if TYPE_CHECKING:
    from tools.shell.engine import Engine as _Base
else:
    _Base = object

_RM_LONG = ("--force", "--interactive", "--one-file-system", "--no-preserve-root", "--preserve-root",
            "--recursive", "--dir", "--verbose", "--help", "--version")
_CP_LONG = ("--archive", "--attributes-only", "--backup", "--copy-contents", "--dereference", "--force",
            "--interactive", "--link", "--no-clobber", "--no-dereference", "--preserve", "--no-preserve",
            "--parents", "--recursive", "--reflink", "--remove-destination", "--sparse", "--strip-trailing-slashes",
            "--symbolic-link", "--suffix", "--target-directory", "--no-target-directory", "--update", "--verbose",
            "--one-file-system", "--context", "--exchange", "--debug", "--keep-directory-symlink")
_CP_ARGS = ("--target-directory", "--suffix", "--backup", "--preserve", "--no-preserve", "--reflink",
            "--sparse", "--update", "--context")
_SED_LONG = ("--in-place", "--expression", "--file", "--quiet", "--silent", "--regexp-extended", "--separate",
             "--null-data", "--zero-terminated", "--line-length", "--posix", "--sandbox", "--debug",
             "--follow-symlinks", "--unbuffered", "--binary", "--help", "--version")
_PERM_LONG = ("--recursive", "--reference", "--changes", "--silent", "--quiet", "--verbose", "--no-dereference",
              "--dereference", "--from", "--preserve-root", "--no-preserve-root", "--help", "--version")
_GIT_RUNS = re.compile(
    r"^(core\.(pager|editor|sshcommand|fsmonitor|askpass|gitproxy)|sequence\.editor|diff\.external|"
    r"diff\..+\.(textconv|command)|merge\..+\.driver|filter\..+\.(clean|smudge|process)|credential(\..+)?\.helper|"
    r"gpg(\..+)?\.program|pager\..+|alias\..+|uploadpack\.packobjectshook|remote\..+\.(uploadpack|receivepack|proxy)|"
    r"(merge|diff)tool\..+\.cmd|man\..+\.cmd|browser\..+\.cmd|web\.browser|sendemail\..+|interactive\.difffilter|"
    r"core\.hookspath|include(if\..+)?\.path|init\.templatedir|protocol\..*allow|instaweb\..+)$", re.IGNORECASE)
_GIT_PATHS = re.compile(r"^(core\.hookspath|include(if\..+)?\.path|init\.templatedir|protocol\..*allow)$", re.I)
_GIT_MUTATES = frozenset({"checkout", "switch", "pull", "merge", "reset", "restore", "apply", "am", "stash",
                          "cherry-pick", "rebase", "revert", "clone", "worktree", "submodule", "read-tree"})


class Rules(_Base):
    # ---- deleting and overwriting ------------------------------------------------------------------

    def cmd_rm(self, args: list[Word]) -> None:
        o = parse_opts(args, longs=_RM_LONG)
        if o.has("--no-preserve-root"):
            self.add("hardline", "rm --no-preserve-root can wipe the whole filesystem")
            return
        recursive = o.has("-r", "-R", "--recursive")
        force = o.has("-f", "--force")
        for target in o.operands:
            why = critical(target)
            if why is not None and (recursive or why.startswith("the whole")):
                self.add("hardline", f"rm -r{'f' if force else ''} of {why}")
                return
        if recursive or o.has("-d", "--dir"):
            if o.operands or o.dynamic:
                self.add("dangerous", "rm -r/-f deletes files for good" if recursive else
                         "rm -d deletes directories")
            return
        if o.dynamic:
            self.add("dangerous", "rm with options only known at run time")
        for target in o.operands:
            self.write(target, "rm deletes", glob_ok=True)

    def cmd_unlink(self, args: list[Word]) -> None:
        for target in parse_opts(args).operands:
            self.write(target, "unlink deletes")

    def cmd_shred(self, args: list[Word]) -> None:
        if any(BLOCK_DEVICE.match(a.text) for a in args):
            self.add("hardline", "shred of a disk device")
        else:
            self.add("dangerous", "shred destroys file contents")

    def _copy(self, name: str, args: list[Word]) -> None:
        o = parse_opts(args, longs=_CP_LONG, short_args="tSmogZ" if name == "install" else "tS",
                       long_args=_CP_ARGS)
        links = o.has("-s", "-l", "--link", "--symbolic-link", "-r", "-R", "-a", "--recursive", "--archive", "-P",
                      "-d", "--no-dereference")
        self.ctx.links += links
        target_dir = o.value("-t", "--target-directory")
        if o.dynamic:
            self.add("dangerous", f"{name} with options only known at run time")
        if name == "mv":
            sources = o.operands if target_dir else o.operands[:-1]
            for src in sources:
                self.write(src, "mv moves away", glob_ok=True, own_link=links)
        if name == "install" and o.has("-d", "--directory"):
            return
        no_clobber = o.has("-n", "--no-clobber", "-i", "--interactive") or any(
            v.text == "none" for v in o.value("--update"))
        dests = target_dir or (o.operands[-1:] if len(o.operands) >= 2 else [])
        for dest in dests:
            if BLOCK_DEVICE.match(dest.text):
                self.add("hardline", f"{name} onto the disk device {dest.text}")
            elif not no_clobber:
                self.write(dest, f"{name} can overwrite", own_link=links)

    def cmd_cp(self, args: list[Word]) -> None:
        self._copy("cp", args)

    def cmd_mv(self, args: list[Word]) -> None:
        self._copy("mv", args)

    def cmd_install(self, args: list[Word]) -> None:
        self._copy("install", args)

    def cmd_ln(self, args: list[Word]) -> None:
        self.ctx.links += 1

    def cmd_rsync(self, args: list[Word]) -> None:
        o = parse_opts(args, short_args="efTB", long_args=("--rsh", "--rsync-path", "--filter", "--exclude",
                                                           "--include", "--temp-dir", "--backup-dir"))
        if any(a.text.startswith(("--delete", "--del", "--remove-source")) for a in args):
            self.add("dangerous", "rsync --delete removes files at the destination")
        for w in o.value("-e", "--rsh", "--rsync-path"):
            self.run_word(w, "rsync -e")
        self.ctx.links += 1

    def cmd_sed(self, args: list[Word]) -> None:
        scripts: list[Word] = []
        files: list[Word] = []
        in_place = sandbox = False
        i = 0
        operands: list[Word] = []
        while i < len(args):
            t = args[i].text
            i += 1
            if t == "--":
                operands.extend(args[i:])
                break
            if t.startswith("--"):
                name, eq, val = t.partition("=")
                full = next((f for f in _SED_LONG if f.startswith(name)), name) if name not in _SED_LONG else name
                if full == "--in-place":
                    in_place = True
                elif full == "--sandbox":
                    sandbox = True
                elif full in ("--expression", "--file", "--line-length"):
                    w = Word(val) if eq else (args[i] if i < len(args) else Word(""))
                    i += 0 if eq else 1
                    (scripts if full == "--expression" else files if full == "--file" else []).append(w)
                continue
            if t.startswith("-") and len(t) > 1:
                for j, ch in enumerate(t[1:], start=1):
                    if ch == "i":
                        in_place = True
                        break  # the rest of the cluster is the backup suffix
                    if ch in "efl":
                        rest = t[j + 1:]
                        w = Word(rest) if rest else (args[i] if i < len(args) else Word(""))
                        i += 0 if rest else 1
                        (scripts if ch == "e" else files if ch == "f" else []).append(w)
                        break
                continue
            operands.append(args[i - 1])
        if not scripts and not files and operands:
            scripts.append(operands.pop(0))
        for f in files:
            self.run_file(f, "sed", "sed -f")
        for s in scripts:
            if s.dynamic:
                self.add("dangerous", "the sed script is only known at run time")
            elif not sandbox:
                self.apply_effects(self.code_effects("sed", s.text), "sed")
        if in_place:
            if not operands:
                self.add("dangerous", "sed -i edits files in place")
            for f in operands:
                self.write(f, "sed -i edits in place", glob_ok=True)

    def cmd_truncate(self, args: list[Word]) -> None:
        o = parse_opts(args, short_args="sr", long_args=("--size", "--reference"),
                       longs=("--no-create", "--io-blocks", "--reference", "--size", "--help", "--version"))
        if not o.operands:
            self.add("dangerous", "truncate cuts files short")
        for f in o.operands:
            self.write(f, "truncate cuts short", glob_ok=True)

    def cmd_tee(self, args: list[Word]) -> None:
        o = parse_opts(args, longs=("--append", "--ignore-interrupts", "--output-error", "--help", "--version"))
        append = o.has("-a", "--append")
        for f in o.operands:
            if BLOCK_DEVICE.match(f.text):
                self.add("hardline", "tee writes straight onto a disk device")
            elif f.text not in HARMLESS_SINKS:
                self.write(f, "tee appends to" if append else "tee overwrites", append=append)

    def cmd_dd(self, args: list[Word]) -> None:
        for a in args:
            if a.text.startswith("of="):
                target = Word(a.text[3:], a.dynamic, a.glob)
                if BLOCK_DEVICE.match(target.text):
                    self.add("hardline", f"dd onto the disk device {target.text}")
                elif target.text not in HARMLESS_SINKS:
                    self.write(target, "dd overwrites")

    def cmd_find(self, args: list[Word]) -> None:
        i = 0
        while (i < len(args) and args[i].text in ("-H", "-L", "-P")) or (
                i < len(args) and args[i].text.startswith(("-O", "-D"))):
            i += 2 if args[i].text == "-D" else 1
        roots: list[Word] = []
        while i < len(args) and not args[i].text.startswith(("-", "(", "!", ")")):
            roots.append(args[i])
            i += 1
        roots = roots or [Word(".")]
        expr = args[i:]
        for j, a in enumerate(expr):
            t = a.text
            if t == "-delete":
                self.tree_delete(roots, "find -delete")
            elif t in ("-exec", "-execdir", "-ok", "-okdir"):
                inner: list[Word] = []
                for b in expr[j + 1:]:
                    if b.text in (";", "+"):
                        break
                    inner.append(b)
                for root in roots:
                    argv = [Word(b.text.replace("{}", root.text), b.dynamic or root.dynamic, b.glob)
                            if "{}" in b.text else b for b in inner]
                    self.run_argv(argv, f"find {t}")
            elif t in ("-fprint", "-fprint0", "-fls", "-fprintf") and j + 1 < len(expr):
                self.write(expr[j + 1], f"find {t} overwrites")

    def tree_delete(self, roots: list[Word], how: str) -> None:
        for root in roots:
            why = critical(root)
            if why is not None:
                self.add("hardline", f"{how} of {why}")
                return
        self.add("dangerous", f"{how} deletes files for good")

    # ---- permissions, power, processes, containers -------------------------------------------------

    def _recursive_perm(self, name: str, args: list[Word]) -> None:
        o = parse_opts(args, longs=_PERM_LONG, long_args=("--reference", "--from"))
        if not o.has("-R", "--recursive"):
            return
        for target in o.operands[1:] if not o.value("--reference") else o.operands:
            why = critical(target)
            if why is not None:
                self.add("hardline", f"{name} -R on {why}")
                return
        self.add("dangerous", f"{name} -R changes a whole tree")

    def cmd_chmod(self, args: list[Word]) -> None:
        self._recursive_perm("chmod", args)

    def cmd_chown(self, args: list[Word]) -> None:
        self._recursive_perm("chown", args)

    def cmd_chgrp(self, args: list[Word]) -> None:
        self._recursive_perm("chgrp", args)

    def _power(self, name: str) -> None:
        self.add("hardline", f"{name} takes the machine down")

    def cmd_shutdown(self, args: list[Word]) -> None:
        if "-c" not in [a.text for a in args]:
            self._power("shutdown")

    def cmd_reboot(self, args: list[Word]) -> None:
        self._power("reboot")

    def cmd_halt(self, args: list[Word]) -> None:
        self._power("halt")

    def cmd_poweroff(self, args: list[Word]) -> None:
        self._power("poweroff")

    def cmd_init(self, args: list[Word]) -> None:
        if args and args[0].text in ("0", "6"):
            self._power(f"init {args[0].text}")

    cmd_telinit = cmd_init

    def cmd_systemctl(self, args: list[Word]) -> None:
        verbs = [a.text for a in args if not a.text.startswith("-")]
        verb = verbs[0] if verbs else ""
        if verb in ("reboot", "poweroff", "halt", "kexec", "soft-reboot", "emergency", "rescue"):
            self._power(f"systemctl {verb}")
        elif verb in ("stop", "disable", "mask", "kill", "isolate"):
            self.add("dangerous", f"systemctl {verb} stops a service")
        elif any(a.dynamic for a in args):
            self.add("dangerous", "systemctl with arguments only known at run time")

    cmd_loginctl = cmd_systemctl

    def cmd_service(self, args: list[Word]) -> None:
        if len(args) >= 2 and args[1].text in ("stop", "restart"):
            self.add("dangerous", f"service {args[1].text} stops a service")

    def cmd_kill(self, args: list[Word]) -> None:
        rest = [a.text for a in args]
        if rest[:1] in (["-l"], ["-L"], ["--list"], ["--table"]):
            return
        if rest == ["-1"]:
            self.add("hardline", "kill -1 signals every process")
            return
        if rest and rest[0] in ("-s", "-n", "--signal") and len(rest) > 1:
            rest = rest[2:]
        elif rest and rest[0].startswith("-") and rest[0] != "--":
            rest = rest[1:]  # the signal (``kill -1 PID`` is SIGHUP to PID)
        if rest and rest[0] == "--":
            rest = rest[1:]
        if "-1" in rest:
            self.add("hardline", "kill -1 signals every process")
        else:
            self.add("dangerous", "kill stops processes")

    def cmd_pkill(self, args: list[Word]) -> None:
        self.add("dangerous", "pkill stops processes")

    def cmd_killall(self, args: list[Word]) -> None:
        self.add("dangerous", "killall stops processes")

    def cmd_killall5(self, args: list[Word]) -> None:
        self.add("hardline", "killall5 signals every process")

    def cmd_docker(self, args: list[Word]) -> None:
        words = [a.text for a in args if not a.text.startswith("-")]
        pair = " ".join(words[:2])
        if any(a.dynamic for a in args[:3]):
            self.add("dangerous", "docker with arguments only known at run time")
        if words[:1] in (["rm"], ["rmi"]) or pair in (
            "system prune", "container rm", "container prune", "image rm", "image prune", "volume rm",
            "volume prune", "network prune", "builder prune", "compose rm",
        ):
            what = words[0] if words[0] in ("rm", "rmi") else pair
            self.add("dangerous", f"docker {what} deletes containers or data")
        elif pair == "compose down" and any(a.text in ("-v", "--volumes") for a in args):
            self.add("dangerous", "docker compose down -v deletes volumes")
        texts = [a.text for a in args]
        for i, t in enumerate(texts):
            mount = texts[i + 1] if t in ("-v", "--volume", "--mount") and i + 1 < len(texts) else \
                t.split("=", 1)[1] if t.startswith(("--volume=", "--mount=")) else None
            if t in ("--privileged", "--pid=host", "--userns=host") or t.startswith("--cap-add"):
                self.add("dangerous", f"docker {t} gives the container power over the host")
            elif mount is not None:
                src = re.sub(r"^(type=\w+,)?(src|source)=", "", mount).split(":")[0].split(",")[0]
                if critical(src) is not None or "docker.sock" in src:
                    self.add("dangerous", f"docker mounts {src} from the host")

    cmd_podman = cmd_docker

    # ---- git -----------------------------------------------------------------------------------------

    def git_config_value(self, key: str, value: Word, how: str) -> None:
        if not _GIT_RUNS.match(key):
            return
        if value.dynamic:
            self.add("dangerous", f"{how} sets {key} to something only known at run time")
        elif _GIT_PATHS.match(key):
            self.add("dangerous", f"{how} sets {key}, which makes git run other programs")
        elif key.lower().startswith("alias."):
            if value.text.startswith("!"):
                self.run_text(value.text[1:], f"git alias {key[6:]}")
        elif key.lower().endswith(".helper") and not value.text.startswith(("!", "/")):
            return
        else:
            self.run_text(value.text.lstrip("!"), f"git {key}")

    def cmd_git(self, args: list[Word]) -> None:
        rest = list(args)
        aliases: dict[str, str] = {}
        while rest and rest[0].text.startswith("-"):
            opt = rest.pop(0)
            if opt.text in ("-c", "--config-env") and rest:
                pair = rest.pop(0)
                key, _, val = pair.text.partition("=")
                if opt.text == "--config-env":
                    self.add("dangerous", "git --config-env takes settings from the environment")
                self.git_config_value(key, Word(val, pair.dynamic), "git -c")
                if key.lower().startswith("alias."):
                    aliases[key[6:].lower()] = val
            elif opt.text in ("-C", "--git-dir", "--work-tree", "--namespace", "--exec-path") and rest:
                rest.pop(0)
            elif opt.text.startswith("--exec-path="):
                self.add("dangerous", "git --exec-path runs git commands from another directory")
        if not rest:
            return
        sub_word, sargs = rest[0], rest[1:]
        sub = sub_word.text
        if sub_word.dynamic:
            self.add("dangerous", "the git command is only known at run time")
            return
        alias = aliases.get(sub.lower(), self.ctx.git_aliases.get(sub.lower()))
        if alias is not None:
            if alias.startswith("!"):
                self.run_text(alias[1:] + "".join(" " + sh_quote(a.text) for a in sargs), f"git alias {sub}")
            elif self.depth < 8:
                self.run_argv([Word("git"), *[Word(x) for x in alias.split()], *sargs], f"git alias {sub}")
            return
        if sub in _GIT_MUTATES:
            self.ctx.links += 1
        self.git_sub(sub, sargs)

    def git_sub(self, sub: str, sargs: list[Word]) -> None:
        o: Opts = parse_opts(sargs, longs=_GIT_LONGS.get(sub, ()),
                             short_args="xm" if sub in ("rebase", "commit") else "",
                             long_args=("--exec", "--message", "--upload-pack", "--receive-pack"))
        texts = [a.text for a in sargs]
        operands = [w.text for w in o.operands]
        dyn = o.dynamic or any(w.dynamic for w in o.operands)
        if sub == "reset" and o.has("--hard", "--merge", "--keep"):
            self.add("dangerous", "git reset --hard throws away uncommitted work")
        elif sub == "clean" and o.has("-f", "--force"):
            self.add("dangerous", "git clean -f deletes untracked files")
        elif sub == "checkout" and ("--" in texts or "." in operands or o.has("-f", "--force")):
            self.add("dangerous", "git checkout -- throws away uncommitted changes")
        elif sub == "restore" and not o.has("--staged", "-S"):
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
        elif sub in ("reset", "clean", "checkout", "restore", "push", "branch", "stash") and dyn:
            self.add("dangerous", f"git {sub} with arguments only known at run time")
        for w in o.value("--exec", "-x", "--upload-pack", "--receive-pack", "-u"):
            self.run_word(w, f"git {sub} {w.text and '--exec'}")
        if sub == "rebase" and o.has("-x", "--exec") and not o.value("--exec", "-x"):
            self.add("dangerous", "git rebase --exec runs commands")
        if sub == "bisect" and operands[:1] == ["run"]:
            self.run_argv(o.operands[1:], "git bisect run")
        if sub == "submodule" and "foreach" in operands:
            idx = texts.index("foreach")
            cmd = [a for a in sargs[idx + 1:] if not a.text.startswith("--recursive")]
            self.run_text(" ".join(sh_quote(a.text) for a in cmd), "git submodule foreach")
        if sub in ("difftool", "mergetool") and any(t.startswith(("-x", "--extcmd")) for t in texts):
            self.add("dangerous", f"git {sub} --extcmd runs a command")
        if any("ext::" in t for t in texts):
            self.add("dangerous", "a git ext:: URL runs a command")

    def git_config(self, o: Opts) -> None:
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


def sh_quote(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'" if re.search(r"[^\w@%+=:,./-]", word) or not word else word
