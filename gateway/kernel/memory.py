"""The C heap of a daemon that runs its turns in many threads. glibc gives every thread that allocates under
contention an arena of its own (up to eight per core) and keeps what is freed there for later, so buffers of a
few hundred KB to a few MB (a request carrying an image, a decoded photo) leave each turn thread's arena
holding memory nobody uses. Two arenas, and handing free pages back after such work, keep the daemon's
resident size near what it uses (bench/telegram_load.py --image-every 10, peak RSS: 152 MB with glibc's
defaults, 147 MB with two arenas; 470 MB while images were still decoded in the turns' own threads). The
text-only bench is unchanged by it (p99 and messages/s within noise). Nothing here does anything off glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import Any

_M_ARENA_MAX = -8  # mallopt's parameter number (malloc.h)


def _libc() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


_LIBC = _libc()


def cap_arenas(arenas: int = 2) -> bool:
    """Cap glibc's malloc arenas (unless MALLOC_ARENA_MAX says otherwise); call before threads start."""
    if _LIBC is None or os.environ.get("MALLOC_ARENA_MAX"):
        return False
    return bool(_LIBC.mallopt(_M_ARENA_MAX, arenas))


def release() -> None:
    """Hand the heap's free pages back to the system (after work that allocated a lot for a moment)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
