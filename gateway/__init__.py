"""Herald's gateway package.

structlog imports rich (and, through it, pygments) whenever rich is installed (typer brings it), to draw
console tracebacks. Herald never lets structlog draw one: exceptions become data before any renderer sees
them (gateway/kernel/logs.py), and the console renderer is given the plain formatter explicitly. Imported here first,
with rich hidden for that one import, structlog leaves rich out: ~5 MB less resident in the daemon. rich stays
importable afterwards (typer's help and error screens load it when they need it).
"""

from __future__ import annotations

import sys

if "structlog" not in sys.modules and "rich" not in sys.modules:
    sys.modules["rich"] = None  # type: ignore[assignment]  # makes `import rich` raise ImportError
    try:
        import structlog  # noqa: F401
    finally:
        del sys.modules["rich"]
