"""Opening and writing the files the file tools resolved (tools/sandbox.py ``resolve_for_read`` /
``resolve_for_write``) without following a symlink swapped in after the check."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading

from tools.sandbox import Refused, SandboxPolicy, resolve_for_read, within


def _open_dir_chain(real_dir: str, create_from: str | None = None) -> int:
    """An O_PATH fd of ``real_dir``, walked from / without following any symlink.

    Folders below ``create_from`` that do not exist are created.
    """
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        walked = "/"
        for comp in [c for c in real_dir.split("/") if c]:
            walked = os.path.join(walked, comp)
            try:
                nfd = os.open(comp, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                if create_from is None or not within(walked, create_from) or walked == create_from:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(comp, 0o777, dir_fd=fd)
                nfd = os.open(comp, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_for_read(real: str) -> int:
    """A read-only fd of the regular file ``real``; never follows a symlink, never blocks on a FIFO."""
    try:
        dfd = _open_dir_chain(os.path.dirname(real))
    except (FileNotFoundError, PermissionError):
        raise
    except OSError as exc:  # a folder on the way was replaced (by a symlink, a file)
        raise Refused(f"{real} changed while it was being opened ({exc.strerror})") from None
    try:
        fd = os.open(os.path.basename(real), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Refused(f"{real} was replaced by a symbolic link while it was being opened") from None
        raise
    finally:
        os.close(dfd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(real)
        raise Refused(f"{real} is not a regular file")
    return fd


def write_atomically(real: str, data: bytes, workspace: str) -> None:
    """Write ``data`` to ``real`` (inside ``workspace``) through a temp file renamed over it.

    Parent folders are created inside the workspace; no symlink is followed on the way, and a symlink at
    the final name is replaced, not written through.
    """
    ws = os.path.realpath(workspace)
    try:
        dfd = _open_dir_chain(os.path.dirname(real), create_from=ws)
    except PermissionError:
        raise
    except OSError as exc:
        raise Refused(f"cannot write {real}: a folder on the way is missing or was replaced "
                      f"({exc.strerror or exc})") from None
    name = os.path.basename(real)
    tmp = f".{name}.herald-tmp-{os.getpid()}-{threading.get_ident()}"
    try:
        mode = 0o644
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(real)
            if stat.S_ISREG(st.st_mode):
                mode = st.st_mode & 0o7777
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb", closefd=False) as f:
                f.write(data)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dfd)
        os.close(dfd)


class CannotOpen(Exception):
    """Why a file asked for by the agent cannot be opened, in words for the model."""


def open_asked(asked: str, policy: SandboxPolicy, tool: str = "read_file") -> tuple[str, int]:
    """The real path and an open descriptor of the file the agent named (``asked``), resolved the way the sandbox
    shows it (``resolve_for_read``) and opened without following a symlink; ``CannotOpen`` says why not."""
    try:
        real = resolve_for_read(asked, policy, tool=tool)
        return real, open_for_read(real)
    except Refused as exc:
        raise CannotOpen(str(exc)) from None
    except FileNotFoundError:
        raise CannotOpen(f"file not found: {asked}") from None
    except IsADirectoryError:
        raise CannotOpen(f"{asked} is a directory") from None
    except PermissionError:
        raise CannotOpen(f"permission denied: {asked}") from None
    except OSError as exc:
        raise CannotOpen(f"cannot read {asked}: {exc.strerror or exc}") from None
