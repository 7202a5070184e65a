"""Importing a library without the optional extras it loads whenever they are installed.

Some libraries import a module at start-up only because it is there, for a feature Herald never calls:
httpx its command-line client (click, rich and pygments), python-telegram-bot its Telegram Passport
decryption (cryptography). Hidden for that one import, the library takes the path it takes when they are not
installed; afterwards they are importable again for whoever really needs them.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType


def import_without(name: str, hidden: tuple[str, ...]) -> ModuleType:
    """Import ``name`` while the top-level modules ``hidden`` raise ImportError (those not yet imported).

    Call it before anything else imports ``name``: once imported, a module keeps what it found.
    """
    if name in sys.modules:
        return sys.modules[name]
    hiding = [module for module in hidden if module not in sys.modules]
    for module in hiding:
        sys.modules[module] = None  # type: ignore[assignment]  # makes `import module` raise ImportError
    try:
        return importlib.import_module(name)
    finally:
        for module in hiding:
            if sys.modules.get(module, ...) is None:
                del sys.modules[module]
