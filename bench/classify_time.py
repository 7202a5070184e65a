"""The command classifier's time per command: the median over the benign tables of tests/tools (the commands
that must run unprompted), each classified 15 times after a warm-up. Prints the figures; asserts nothing.

    .venv/bin/python bench/classify_time.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.tools import test_dangerous, test_dangerous_audit, test_dangerous_evasions
from tools.dangerous import classify


def main() -> None:
    ws = test_dangerous_audit.ws.__wrapped__(Path(tempfile.mkdtemp()))  # the audit's workspace, as its tests use it
    cases = [(c, None) for c in test_dangerous.SAFE + test_dangerous_evasions.BENIGN]
    cases += [(c, str(ws)) for c in test_dangerous_audit.DAILY]
    for command, where in cases:
        classify(command, workspace=where)
    medians = []
    for command, where in cases:
        runs = []
        for _ in range(15):
            start = time.perf_counter()
            classify(command, workspace=where)
            runs.append(time.perf_counter() - start)
        medians.append(statistics.median(runs))
    print(f"{len(cases)} benign commands: median {statistics.median(medians) * 1e3:.3f} ms, "
          f"mean {statistics.mean(medians) * 1e3:.3f} ms, slowest {max(medians) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
