"""The real `herald run` under a fake systemd: its NOTIFY_SOCKET gets READY (with the adapters' states),
WATCHDOG pings and, on SIGTERM, STOPPING — in that order."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import Herald
from tests.ops.test_systemd import NotifySocket

pytestmark = pytest.mark.e2e


def test_ready_watchdog_stopping_in_order(make_herald: Callable[..., Herald], tmp_path: Path) -> None:
    receiver = NotifySocket(tmp_path)
    herald = make_herald(start=False)
    # WatchdogSec=0.9 s: pings every 0.3 s.
    herald.env.update(NOTIFY_SOCKET=str(receiver.path), WATCHDOG_USEC="900000")
    # Read until the process has stopped (however long a loaded machine takes to start it), then what is left.
    stopped = threading.Event()
    reader = threading.Thread(target=receiver.read, args=(120.0, stopped))
    reader.start()
    try:
        herald.start()
        threading.Event().wait(2.0)
        assert herald.stop() == 0
    finally:
        stopped.set()
        reader.join()
        receiver.close()
    kinds = [fields[0].split("=")[0] for _, fields in receiver.messages]
    assert "READY" in kinds and "STOPPING" in kinds, receiver.messages
    ready, stopping = kinds.index("READY"), kinds.index("STOPPING")
    pings = [i for i, k in enumerate(kinds) if k == "WATCHDOG"]
    assert ready < stopping and len([i for i in pings if ready < i < stopping]) >= 3, kinds
    assert not [i for i in pings if i < ready]
    ready_fields = receiver.messages[ready][1]
    assert any(f.startswith("STATUS=") and "web connected" in f for f in ready_fields), ready_fields
    assert any(f.startswith("STATUS=draining") for f in receiver.messages[stopping][1])
