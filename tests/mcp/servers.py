"""How the tests run the real MCP server of tests/fakes/mcp_server.py: inside Herald's sandbox the virtualenv's
interpreter may be hidden (it can live in the daemon user's home), so a system python of the same version runs the
script with the virtualenv's site-packages named first."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tools.sandbox import daemon_homes, resolve_mode, within

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "fakes" / "mcp_server.py"


def site_packages() -> str:
    import mcp

    return str(Path(mcp.__file__).resolve().parents[1])


def sandbox_python() -> str:
    """A python the sandbox shows, of this interpreter's version; skips the test when there is none (or no
    bubblewrap)."""
    if resolve_mode("bwrap")[0] != "bwrap":
        pytest.skip("bubblewrap cannot run here")
    hidden = [os.path.realpath(h) for h in daemon_homes()]
    site = os.path.realpath(site_packages())
    if any(within(site, h) for h in hidden) or any(within(os.path.realpath(SCRIPT), h) for h in hidden):
        pytest.skip("the virtualenv or the repository lies in the daemon user's home, which the sandbox hides")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/python{version}", f"/usr/local/bin/python{version}", sys.executable):
        real = os.path.realpath(candidate)
        if not os.path.exists(real) or any(within(real, h) for h in hidden):
            continue
        out = subprocess.run([candidate, "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
                             capture_output=True, text=True)
        if out.stdout.strip() == version:
            return candidate
    found = shutil.which(f"python{version}")
    if found:
        return found
    pytest.skip(f"no python{version} outside the daemon user's home")


def stdio_server(*extra: str, **keys: Any) -> dict[str, Any]:
    """A ``mcp.servers.<name>`` entry that runs the fake server in the sandbox."""
    return {"command": sandbox_python(), "args": [str(SCRIPT), "--site", site_packages(), *extra], **keys}
