"""Deciding the writes of a command line once every ``cd`` in it is known.

A target resolving inside the workspace does not ask; one outside, one only known at run time, or one
reached after a command that may create symlinks does. Appends are writes like any other (a relative
``>>`` target may be a symlink out of the workspace). Inside the workspace, files that programs read as
configuration or run on their own still ask: anything under a ``.git`` directory (hooks, config), the
sandbox home's start-up and configuration files (the workspace is ``$HOME`` there: ``.bashrc``,
``.gitconfig``, ``.config/``, ``.local/``, ``.ssh/``...), and python's start-up hooks
(``sitecustomize.py``, ``usercustomize.py``, ``*.pth``).
"""

from __future__ import annotations

import os
import posixpath

from tools.shell.engine import Context, Finding
from tools.shell.paths import inside, plainly_outside

_HOME_CONFIG = frozenset({
    ".gitconfig", ".git-credentials", ".bashrc", ".bash_profile", ".bash_login", ".profile", ".bash_logout",
    ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".inputrc", ".config", ".local", ".npmrc", ".yarnrc",
    ".yarnrc.yml", ".pypirc", ".pip", ".pydistutils.cfg", ".ssh", ".vimrc", ".exrc", ".vim", ".lesskey", ".curlrc",
    ".wgetrc", ".netrc", ".pythonrc", ".pythonstartup", ".gdbinit", ".emacs", ".emacs.d", ".cargo", ".rustup",
    ".mailcap", ".terminfo", ".pam_environment", ".docker", ".kube", ".gnupg", ".hgrc", ".screenrc",
    ".tmux.conf", ".Rprofile", ".irbrc", ".pryrc", ".psqlrc", ".sqliterc", ".my.cnf", ".editrc", ".nanorc",
    ".selected_editor", ".bunfig.toml", ".mavenrc", ".gradle", ".m2", ".lynxrc", ".xinitrc", ".xsession",
})
_STARTUP_NAMES = frozenset({"sitecustomize.py", "usercustomize.py"})


def protected(path: str, workspace: str) -> str | None:
    """Why a path inside the workspace is configuration some program acts on, or None."""
    rel = posixpath.relpath(path, workspace)
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts:
        return None
    if ".git" in parts:
        return "git's own hooks and configuration"
    if parts[0] in _HOME_CONFIG:
        return "a start-up or configuration file of the sandbox's home"
    if parts[-1] in _STARTUP_NAMES or parts[-1].endswith(".pth"):
        return "a file python runs at start-up"
    return None


def _dirs(ctx: Context) -> tuple[str, list[str]]:
    """How the line's ``cd``s leave the working directory: exact, inside (with the candidates) or unknown."""
    base = ctx.cwd or ctx.workspace
    ws = ctx.workspace
    mode = "exact"
    cwds = [base] if base else []
    for cd in ctx.cds:
        if cd is None or base is None or cd.text.startswith(("~", "-")) or cd.glob:
            return "unknown", cwds
        target = posixpath.normpath(posixpath.join(base, cd.text))
        if ws is None or not posixpath.isabs(target) or not inside(cd, base, ws) or (
                not cd.text.startswith("/") and posixpath.normpath(cd.text).startswith("..")):
            return "unknown", cwds
        mode = "inside"
        cwds.append(target)
    return mode, cwds


def finish(ctx: Context) -> None:
    base = ctx.cwd or ctx.workspace
    ws = ctx.workspace
    mode, cwds = _dirs(ctx)
    for w in ctx.writes:
        text = w.word.text
        relative = not w.word.dynamic and not plainly_outside(text)
        links = ctx.links if ctx.unordered else w.links_before
        links_elsewhere = links - (1 if w.own_link else 0) > 0
        shown = "a file" if w.quiet else (text or "a file")
        if ws is not None and base is not None and not links_elsewhere and not w.word.dynamic:
            ok = False
            where: list[str] = []
            if text.startswith("/") or mode == "exact":
                ok = inside(w.word, base, ws, glob_ok=w.glob_ok)
                where = [posixpath.join(base, text)]
            elif mode == "inside" and relative:
                ok = all(inside(w.word, c, ws, glob_ok=w.glob_ok) for c in cwds)
                where = [posixpath.join(c, text) for c in cwds]
            if ok:
                why = next((p for p in (protected(posixpath.normpath(x), ws) for x in where) if p), None)
                if why is None:
                    continue
                ctx.findings.append(Finding("dangerous", f"{w.prefix}{w.what} {shown}, {why}", w.subject))
                continue
        where_txt = "" if not w.word.dynamic else " (a path only known at run time)"
        ctx.findings.append(Finding("dangerous", f"{w.prefix}{w.what} {shown}{where_txt}", w.subject))
    recheck_reads(ctx)
    if ctx.git_seen and ctx.unpacked:
        ctx.findings.append(Finding("dangerous", "git runs in a line that unpacks files first, which may change its "
                                                 "hooks or configuration", None))


def recheck_reads(ctx: Context) -> None:
    """A script read here must not be one this very line writes first (``echo ... > x.sh; bash x.sh``)."""
    if not ctx.reads:
        return
    written: list[str] = []
    unknown = bool(ctx.cds)
    for w in ctx.writes:
        if w.word.dynamic or w.word.glob:
            unknown = True
        elif w.word.text.startswith("/"):
            written.append(os.path.realpath(w.word.text))
        elif ctx.cwd is not None:
            written.append(os.path.realpath(posixpath.join(ctx.cwd, w.word.text)))
    for i, (real, shown, prefix) in enumerate(ctx.reads):
        if unknown or ctx.opaque - {i} or any(real == p or real.startswith(p.rstrip("/") + "/") for p in written):
            ctx.findings.append(Finding("dangerous", f"{prefix}runs {shown}, which this command may change first",
                                        None))
