"""The crash-and-fault suite: every test here is marked ``faults``. The default run is short (a few
kills, outages of seconds); ``make faults`` sets HERALD_FAULTS_LONG=1 for the full lengths
(20 kills in a row, outages of a minute)."""

from __future__ import annotations

import os

import pytest

LONG = os.environ.get("HERALD_FAULTS_LONG") == "1"


def scale(short: float, long: float) -> float:
    """A duration or a count: ``short`` in the default suite, ``long`` under ``make faults``."""
    return long if LONG else short


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.faults)
