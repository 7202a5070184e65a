"""The rules for one command by name: what it deletes, overwrites, stops or hands on to run.

Each ``cmd_<name>`` gets the argument words (``Word``: text plus whether it is only known at run time)
and reports through the engine (``tools/shell/check.py``): ``add`` a finding, ``write`` a target (the
workspace rule decides later), or hand code on (``run_argv``, ``run_text``, ``run_code``, ``run_sql``).
A relative target is also resolved from every directory the line may have ``cd``'d to, so ``cd / && rm
-rf *`` is the whole filesystem. Moving the system or the home directory away is as final as deleting it.
"""

from __future__ import annotations

import posixpath
import re
from typing import TYPE_CHECKING

from tools.shell.options import parse_opts
from tools.shell.parse import Word
from tools.shell.paths import BLOCK_DEVICE, HARMLESS_SINKS, critical
from tools.shell.tables import OPTIONS
from tools.shell.tables_files import DD_KEYS, FIND_PRIMARIES, FIND_RULED, newer_primary
from tools.shell.tables_run import DOCKER_READ
from tools.shell.values import quote

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
_DOCKER_READS = frozenset({
    "ps", "images", "inspect", "logs", "version", "info", "stats", "top", "port", "history", "diff", "search",
    "container ls", "container ps", "container inspect", "container logs", "container top", "container port",
    "image ls", "image inspect", "image history", "volume ls", "volume inspect", "network ls", "network inspect",
    "compose ps", "compose logs", "compose config", "compose ls", "compose images", "compose version",
    "system df", "system info", "context ls", "context show", "buildx ls", "manifest inspect", "pull",
})
_DOCKER_RUN_FLAGS = frozenset({"--rm", "--interactive", "--tty", "--detach", "--init", "--read-only", "--quiet",
                               "--no-healthcheck", "--sig-proxy"})
_DOCKER_RUN_VALUES = frozenset({"--name", "-e", "--env", "--env-file", "-w", "--workdir", "--entrypoint", "--pull",
                                "--platform", "-u", "--user", "--label", "-l", "--hostname", "-h", "--memory", "-m",
                                "--cpus", "--stop-timeout", "--stop-signal", "--restart", "--log-driver",
                                "--memory-swap", "--pids-limit", "--shm-size", "--ulimit", "--tmpfs", "-a", "--attach"})


class Rules(_Base):
    # ---- deleting and overwriting ------------------------------------------------------------------

    def critical_here(self, target: Word) -> str | None:
        """``critical`` of the target as written, and as resolved from each directory the line may be in."""
        why = critical(target)
        if why is not None or target.text.startswith(("/", "~", "$")) or target.dynamic:
            return why
        for d in self.here():
            if d is not None:
                why = critical(Word(posixpath.join(d, target.text), glob=target.glob))
                if why is not None:
                    return why
        return None

    def cmd_rm(self, args: list[Word]) -> None:
        o = parse_opts(args, longs=_RM_LONG)
        if o.has("--no-preserve-root"):
            self.add("hardline", "rm --no-preserve-root can wipe the whole filesystem")
            return
        recursive = o.has("-r", "-R", "--recursive")
        force = o.has("-f", "--force")
        for target in o.operands:
            why = self.critical_here(target)
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
        self.deletes(o.operands, "rm")

    def cmd_unlink(self, args: list[Word]) -> None:
        self.deletes(parse_opts(args).operands, "unlink")

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
                why = self.critical_here(src)
                if why is not None:
                    self.add("hardline", f"mv moves {why} away")
                    return
                self.write(src, "mv moves away", glob_ok=True, own_link=links)
            if o.operands[-1:] and o.operands[-1].text in HARMLESS_SINKS and not target_dir:
                self.deletes(sources, "mv … /dev/null")
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
        o = parse_opts(args, short_args="tS", long_args=("--target-directory", "--suffix", "--backup"))
        if o.value("-t", "--target-directory"):
            dests = o.value("-t", "--target-directory")
        elif len(o.operands) >= 2:
            dests = o.operands[-1:]
        else:
            dests = [Word(posixpath.basename(w.text) or w.text, w.dynamic) for w in o.operands]
        for dest in dests:
            self.write(dest, "ln makes a link at", own_link=True)

    def cmd_rsync(self, args: list[Word]) -> None:
        o = parse_opts(args, spec=OPTIONS["rsync"])  # --delete and --remove-source-files are risky there
        for w in o.value("-e", "--rsh", "--rsync-path"):
            self.run_word(w, "rsync -e")
        for w in o.value("--log-file", "--write-batch", "--only-write-batch"):
            self.write(w, "rsync writes")
        if len(o.operands) >= 2:
            dest = o.operands[-1]
            if re.match(r"^[^/]*:", dest.text) or dest.text.startswith("rsync://"):
                self.add("dangerous", "rsync copies to another host")
            else:
                self.write(dest, "rsync writes into", own_link=True)
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
        if all(s.text.startswith(("+", ">")) for s in o.value("-s", "--size")) and o.value("-s", "--size"):
            for f in o.operands:  # it only grows them
                self.write(f, "truncate changes", glob_ok=True)
        else:  # emptying a file destroys what is in it like deleting it
            self.deletes(o.operands, "truncate", verb="empties")

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
            key = a.text.partition("=")[0]
            if key not in DD_KEYS and a.text not in ("--help", "--version"):
                self.add("dangerous", f"dd {a.text[:30]} is not an operand this classifier knows to be harmless")
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
        self.loose_words("find", [r for r in roots if r.dynamic])  # a root only known at run time may be -delete
        expr = args[i:]
        skip = 0
        for j, a in enumerate(expr):
            t = a.text
            if skip:
                skip = -1 if skip < 0 and t not in (";", "+") else max(skip - 1, 0)
                continue
            if t in FIND_PRIMARIES or newer_primary(t):
                skip = FIND_PRIMARIES.get(t, 1)
            elif a.dynamic or a.glob:
                self.add("dangerous", f"find {t[:30]}: a part of the expression is only known at run time")
            elif t not in FIND_RULED:
                self.add("dangerous", f"find {t[:30]} is not a part of find's expression this classifier knows "
                                      "to be harmless")
            elif t == "-delete":
                self.tree_delete(roots, "find -delete")
            elif t in ("-exec", "-execdir", "-ok", "-okdir"):
                skip = -1  # its words, up to ``;`` or ``+``
                inner: list[Word] = []
                for b in expr[j + 1:]:
                    if b.text in (";", "+"):
                        break
                    inner.append(b)
                # ``{}`` is every path found under a root: the root itself for the worst case (``find /
                # -exec rm -rf {} +``), and only known at run time for where the writes land.
                for root in roots:
                    argv = [Word(b.text.replace("{}", root.text), True, b.glob) if "{}" in b.text else b
                            for b in inner]
                    self.run_argv(argv, f"find {t}")
            else:  # -fprint FILE, -fls FILE, -fprintf FILE FORMAT
                skip = 2 if t == "-fprintf" else 1
                if j + 1 < len(expr):
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
        targets = o.operands[1:] if not o.value("--reference") else o.operands
        if not o.has("-R", "--recursive"):
            for target in targets:  # a change of mode or owner is a write to the file
                self.write(target, f"{name} changes", glob_ok=True)
            return
        for target in targets:
            why = self.critical_here(target)
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
            return
        if words[:1] in (["rm"], ["rmi"]) or pair in (
            "system prune", "container rm", "container prune", "image rm", "image prune", "volume rm",
            "volume prune", "network prune", "builder prune", "compose rm",
        ):
            what = words[0] if words[0] in ("rm", "rmi") else pair
            self.add("dangerous", f"docker {what} deletes containers or data")
        elif pair == "compose down" and any(a.text in ("-v", "--volumes") for a in args):
            self.add("dangerous", "docker compose down -v deletes volumes")
        elif words[:1] in (["run"], ["create"]) or pair in ("container run", "container create"):
            self.docker_run(args[args.index(next(a for a in args if a.text in ("run", "create"))) + 1:])
        elif not (words[:1] and (words[0] in _DOCKER_READS or pair in _DOCKER_READS)):
            self.add("dangerous", f"docker {pair or 'with these options'} is not known to be harmless")
        else:
            ops = parse_opts(args, spec=OPTIONS["docker"]).operands  # the global options are read already
            verb = ops[:2] if " ".join(w.text for w in ops[:2]) in _DOCKER_READS else ops[:1]
            if verb:
                rest = args[args.index(verb[-1]) + 1:]
                self.check_options("docker " + " ".join(w.text for w in verb), rest, DOCKER_READ)

    def docker_run(self, args: list[Word]) -> None:
        """``docker run`` with only options that keep the container to itself; the rest asks."""
        i = 0
        while i < len(args):
            t = args[i].text
            i += 1
            if not t.startswith("-") or t == "--":
                return  # the image: what runs inside the container stays inside it
            name, eq, _ = t.partition("=")
            if name in _DOCKER_RUN_FLAGS or (not name.startswith("--") and set(name[1:]) <= set("itdq")):
                continue
            if name in _DOCKER_RUN_VALUES:
                i += 0 if eq else 1
                continue
            if name in ("--network", "--net") and (t.partition("=")[2] if eq else
                                                   args[i].text if i < len(args) else "") in ("none", "bridge",
                                                                                              "default"):
                i += 0 if eq else 1
                continue
            self.add("dangerous", f"docker run {name} is not known to keep the container to itself")
            return

    cmd_podman = cmd_docker


def sh_quote(word: str) -> str:
    return quote(word) if word else "''"
