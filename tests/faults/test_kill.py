"""Kill anywhere: SIGKILL the real ``herald run`` at random moments under a steady load through Telegram and the
web API (20 chats, a model taking 50-300 ms, every fourth turn a terminal call, a cron job every 2 s), restart
it each time, and hold it to its promise: every accepted message answered exactly once and in its chat's order,
no tool command run twice, no cron run doubled and none finished but undelivered.

The short version (the default suite) kills 3 times; ``make faults`` kills 20 times in a row.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from tests.faults.conftest import LONG, scale
from tests.faults.daemon import CRON_CHAT, Load, Rig, cron_problems, judge

KILLS = int(scale(3, 20))


@pytest.mark.timeout(900 if LONG else 240)
def test_sigkill_at_random_moments_loses_and_doubles_nothing(tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    rig = Rig(tmp_path / "home", seed=seed)
    load = Load(rig, rate=20.0)
    try:
        rig.start()
        load.start()
        for _ in range(KILLS):
            time.sleep(rng.uniform(0.3, 3.0))  # anywhere: accepting, mid-turn, mid-tool, mid-delivery, starting
            rig.kill()
        time.sleep(rng.uniform(0.5, 1.5))
        load.stop()
        assert not load.errors, load.errors
        settled = rig.wait_answered(timeout=scale(60, 240))  # the backlog the last restarts left drains
        rig.pause_cron()
        time.sleep(1.0)  # room for a wrong second answer to arrive
        answers = rig.answers()
        verdict = judge(rig.ledger.asked, answers, rig.tool_log())
        cron, stats = cron_problems(rig.cron_runs(), answers.get(CRON_CHAT, []), rig.cron_every or 0)
    finally:
        load.stopping.set()
        code = rig.stop()
    print(f"seed {seed}: {rig.kills} kills, {verdict.asked} asked, {verdict.answered} answered, "
          f"{len(verdict.lost)} lost, {len(verdict.doubled)} doubled ({len(verdict.announced)} repeated after "
          f"the warning), {verdict.tool_runs} tool runs, {len(verdict.tool_doubled)} run twice; cron {stats}")
    problems = verdict.problems() + cron
    assert not problems, f"seed {seed} after {rig.kills} kills (settled: {settled}):\n" + "\n".join(problems)
    assert settled
    assert verdict.asked >= 20 and verdict.tool_runs > 0 and stats["delivered"] > 0  # the load really ran
    assert code == 0, rig.herald.stderr()[-2000:] if rig.herald else code
