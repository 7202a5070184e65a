"""Cron through the real `herald run` process: a job the agent schedules from the web chat, and one added
with `herald cron add` while the daemon runs. Both are one-shots a few seconds ahead (real time: the
daemon's APScheduler timers are what is under test here), given as a delay ("5s") that the CLI or the tool
anchors when it creates the job: an absolute time computed here could be past by the time a busy machine
has the CLI started, and would be refused."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest

from tests.e2e.conftest import HERALD_BIN, REPO, Herald

pytestmark = pytest.mark.e2e


def cli(herald: Herald, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(HERALD_BIN), "cron", *args], cwd=REPO, env=herald.env, capture_output=True,
                          text=True, timeout=30)


def history(herald: Herald, job_id: str) -> list[dict[str, Any]]:
    res = cli(herald, "history", job_id, "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_job_created_by_the_agent_in_a_web_chat_delivers_into_that_chat(herald: Herald) -> None:
    args = {"action": "create", "schedule": "5s", "prompt": "say the magic word", "name": "magic"}
    herald.post(f"[tool=cronjob:{json.dumps(args)}]", chat_id="cronchat")
    [created] = herald.wait_for_replies("cronchat", 1)
    job = json.loads(created[len("tool said: "):])["created"]
    assert job["deliver"] == "origin"
    [result] = herald.wait_for_replies("cronchat", 1, timeout=20, match=lambda t: "Cron job «magic»" in t)
    assert result.startswith(f"⏰ Cron job «magic» ({job['id']})") and "say the magic word" in result
    deadline = time.monotonic() + 10
    while (runs := history(herald, job["id"])) and runs[0]["delivery_status"] != "delivered":
        assert time.monotonic() < deadline, runs
        time.sleep(0.1)
    assert [(r["status"], r["trigger"]) for r in runs] == [("ok", "scheduled")]


def test_cli_add_against_the_running_daemon(herald: Herald) -> None:
    when = "5s"
    res = cli(herald, "add", "--schedule", when, "--prompt", "status report", "--deliver", "web:clichat",
              "--name", "from-cli")
    assert res.returncode == 0, res.stderr
    job_id = res.stdout.split()[0]
    [listed] = [j for j in json.loads(cli(herald, "list", "--json").stdout) if j["id"] == job_id]
    # (under load the one-shot may already have run by now: then it is no longer enabled)
    assert (listed["name"], listed["schedule"], listed["deliver"]) == ("from-cli", when, "web:clichat")
    assert {"id", "enabled", "next_run"} <= set(listed)
    [text] = herald.wait_for_replies("clichat", 1, timeout=20)
    assert text.startswith(f"⏰ Cron job «from-cli» ({job_id})") and "status report" in text
    # A run requested from the CLI is picked up by the daemon too.
    assert cli(herald, "run", job_id).returncode == 0
    herald.wait_for_replies("clichat", 2, timeout=20)
    deadline = time.monotonic() + 10
    while True:
        runs = history(herald, job_id)
        if len(runs) == 2 and all(r["delivery_status"] == "delivered" for r in runs):
            break
        assert time.monotonic() < deadline, runs
        time.sleep(0.1)
    assert sorted(r["trigger"] for r in runs) == ["manual", "scheduled"]
    assert not json.loads(cli(herald, "list", "--json").stdout)[0]["enabled"]  # the one-shot is done


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_a_run_cut_off_mid_run_is_told_to_its_chat_after_the_restart(herald: Herald, how: str) -> None:
    """The daemon dies (or is stopped) while a run's agent is still thinking: the run is not re-run (what it did
    may have had effects), and its chat hears it was interrupted — once — instead of nothing."""
    import signal

    res = cli(herald, "add", "--schedule", "2s", "--prompt", "[sleep=60] long report", "--deliver",
              "web:cutchat", "--name", "cut")
    assert res.returncode == 0, res.stderr
    job_id = res.stdout.split()[0]
    import sqlite3

    def started() -> bool:  # running, and its claim (with the notice) written: the run is under way
        db = sqlite3.connect(f"file:{herald.home / 'state.db'}?mode=ro", uri=True, timeout=30)
        try:
            return db.execute("select 1 from cron_runs where job_id = ? and status = 'running' and delivery_text "
                              "is not null", (job_id,)).fetchone() is not None
        finally:
            db.close()

    deadline = time.monotonic() + 20
    while not started():
        assert time.monotonic() < deadline, history(herald, job_id)
        time.sleep(0.1)
    time.sleep(0.3)  # into the agent's turn
    herald.stop(getattr(signal, how))
    herald.start()
    [text] = herald.wait_for_replies("cutchat", 1, timeout=20)
    assert text.startswith(f"⚠️ Cron job «cut» ({job_id}) failed") and "interrupted" in text
    deadline = time.monotonic() + 10
    while (runs := history(herald, job_id))[0]["delivery_status"] != "delivered":
        assert time.monotonic() < deadline, runs
        time.sleep(0.1)
    assert [(r["status"], r["error"].split(":")[0]) for r in runs] == [("failed", "interrupted")]
    time.sleep(1)
    assert len(herald.replies("cutchat")) == 1  # told once, not re-run
