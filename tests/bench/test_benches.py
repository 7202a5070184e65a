"""Every bench at a tiny size (a few chats x 2-3 messages), so none rots unnoticed: each still runs, its daemon
exits 0, and no message is lost or answered twice. The figures at this size say nothing about speed, and no
assertion here reads a time; `make bench` (bench/run_all.py) measures.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench import run_all
from bench.run_all import BENCHES, Bench, Outcome, figure, invariants, missing, run_bench

PG_URL = os.environ.get("HERALD_TEST_DATABASE_URL")

# Rows a bench must print besides its lost / twice counts: the figures the targets are read from.
MUST_PRINT = {
    "telegram_load": ["start to first answered message", "loop lag p99 with the slow turns"],
}


@pytest.mark.slow
@pytest.mark.timeout(run_all.TIMEOUT["tiny"] + 60)
@pytest.mark.parametrize("bench", BENCHES, ids=lambda b: b.name)
def test_the_bench_runs_at_a_tiny_size_and_loses_nothing(bench: Bench) -> None:
    reason = missing(bench, PG_URL)
    if reason:
        pytest.skip(f"{bench.name} {reason}")
    outcome = run_bench(bench, "tiny", PG_URL)
    if outcome.status == "skipped":  # the bench itself found what it needs unusable (bwrap without namespaces)
        pytest.skip(f"{bench.name}: {outcome.output.strip()[-300:]}")
    assert outcome.code in (0, bench.speed_exit), outcome.output
    found, lost, twice = invariants(outcome.output)
    if bench.counts:
        assert found, f"no lost / answered-twice counts in the output:\n{outcome.output}"
    assert (lost, twice) == (0, 0), outcome.output
    for label in MUST_PRINT.get(bench.name, []):
        value = figure(outcome.output, label)
        assert value and value.split()[0].replace(".", "", 1).isdigit(), f"{label}: {value}\n{outcome.output}"
    assert outcome.status in ("ok", "speed target missed"), outcome.output


TELEGRAM_OUTPUT = """
Telegram load: 3 chats x 3 messages, model delay 0 ms, log level info
  start to first answered message           2102 ms   < 1000 ms  MISSED
  messages/s                                  123.4   >= 100  ok
  ingress-to-reply p99                      52.5 ms   < 1000 ms  ok
  lost                                            0   0  ok
  answered more than once                         0   0  ok
  daemon RSS at end / peak (HWM)     124.8 / 124.8 MB   < 120 MB  MISSED
  ... while 8 turns sit 3 s in the model call in other chats:
  messages/s                                   92.3   >= 100  MISSED
  lost                                            1   0  MISSED
  answered more than once                         2   0  MISSED
  loop lag p99 with the slow turns          4.42 ms   < 10 ms  ok
"""


def test_the_figures_are_read_from_the_report_rows() -> None:
    assert figure(TELEGRAM_OUTPUT, "messages/s") == "123.4"  # the first load's
    assert figure(TELEGRAM_OUTPUT, "daemon RSS at end / peak (HWM)") == "124.8 / 124.8 MB"
    assert figure(TELEGRAM_OUTPUT, "loop lag p99 with the slow turns") == "4.42 ms"
    assert figure(TELEGRAM_OUTPUT, "daemon CPU per message") is None
    assert invariants(TELEGRAM_OUTPUT) == (4, 1, 2)  # both loads counted
    web = "  lost messages      0   target 0: ok\n  messages answered more than once     3   target 0\n"
    assert invariants(web) == (2, 0, 3)
    soak = "messages asked 92, answered 92, lost 0, answered twice 1, web posts given up 0\n"
    assert invariants(soak) == (2, 0, 1)


def test_a_run_of_some_benches_keeps_the_others_figures(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    telegram, discord = run_all.BY_NAME["telegram_load"], run_all.BY_NAME["discord_load"]
    run_all.write_results([Outcome(telegram, "ok", TELEGRAM_OUTPUT, 9.0, 0, "python bench/telegram_load.py"),
                           Outcome(discord, "ok", "  messages/s   200.0\n", 5.0, 0, "python bench/discord_load.py")],
                          note="a shared machine", started_load=(3.0, 2.0, 1.0), path=results)
    run_all.write_results([Outcome(discord, "failed", "  messages/s   150.0\n  lost   1\n", 6.0, 1, "x")], note="",
                          started_load=(0.1, 0.1, 0.1), path=results)
    text = results.read_text()
    assert "2102 ms" in text and "msg/s 123.4" in text  # telegram's section and row, kept
    assert "200.0" not in text and "150.0" in text and "| discord_load |" in text
    assert text.count("## telegram_load") == 1 and text.count("## discord_load") == 1
    assert text.index("## telegram_load") < text.index("## discord_load")  # the benches' order, whatever ran last
    assert "a shared machine" not in text  # a note belongs to the run it was given for
