"""The operator's dashboard in a real browser (Debian's chromium through Playwright, as the web chat's test):
every page loads without a console error; without a token it asks for one; a pending approval appears live and
approving it from the dashboard runs the command (audited with the operator as decider, the chat's prompt edited),
denying one there is told in the chat as "Denied by the operator (dashboard)";
a cron run shows up in its job's history with "ran" and "delivered" apart; a session can be reset.
Screenshots are kept in the test's tmp dir (dashboard.png, dashboard-cron.png)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import HERALD_BIN, Herald
from tests.e2e.test_web_browser import browser_page, web_url  # noqa: F401 - the fixture
from tests.support.polling import wait_until_sync

pytestmark = [pytest.mark.e2e, pytest.mark.browser]
# The page's Content-Security-Policy (default-src 'self') forbids eval, so waits go through locators
# (Playwright's own isolated world), never page.wait_for_function: the test runs under the real policy.
expect = pytest.importorskip("playwright.sync_api").expect


def herald_cli(herald: Herald, *args: str) -> str:
    out = subprocess.run([str(HERALD_BIN), *args], env=herald.env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_dashboard_in_a_browser(herald: Herald, browser_page: Any, tmp_path: Path) -> None:  # noqa: F811
    page = browser_page
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))

    # No token: the form, saying where to get one.
    page.goto(herald.base + "/dashboard")
    page.locator("#tokenform").wait_for(state="visible")
    assert "herald web-url" in page.locator("#tokenform").inner_text()
    problems.clear()  # the refused requests of a page without a token are the browser's own lines

    # The address `herald web-url` prints, pasted: the overview.
    page.fill("#tokeninput", web_url(herald))
    page.click("#tokenform button[type=submit]")
    page.locator("#adapters").wait_for()
    expect(page.locator("#status")).to_have_text("live")
    assert page.locator('#adapters tr[data-adapter="web"]').inner_text().split("\t")[1].strip() == "connected"

    # A dangerous command waits for approval: it appears on the dashboard by itself (the event stream).
    target = herald.home / "workspace" / "victim"
    target.mkdir(parents=True)
    herald.post(f"[tool=terminal:{json.dumps({'command': f'rm -rf {target}'})}]", chat_id="ops")
    row = page.locator("#approvals tr[data-approval]")
    row.wait_for(timeout=15_000)
    approval_id = row.get_attribute("data-approval")
    assert f"rm -rf {target}" in row.inner_text()
    assert page.locator('#sessions tr[data-session]', has_text="ops").locator("text=busy").count() == 1
    shot = tmp_path / "dashboard.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")

    row.get_by_role("button", name="Approve once").click()
    expect(page.locator("#notice")).to_have_text("Approved once.")
    wait_until_sync(lambda: not target.exists(), 15, "the approved command ran")
    # The chat's prompt was edited the way a press there edits it, naming the operator.
    msgs = herald.wait_for("ops", lambda ms: any("Approved once by the operator (dashboard)" in m["text"]
                                                 for m in ms), 10)
    prompt = next(m for m in msgs if f"id {approval_id}" in m["text"] or "Approved once by" in m["text"])
    assert prompt["buttons"] == []
    audit = [json.loads(line) for line in herald_cli(herald, "approvals", "list", "--json").splitlines()]
    decided = next(a for a in audit if a["id"] == approval_id)
    assert (decided["status"], decided["decided_by"], decided["decided_via"]) == ("approved", "operator", "dashboard")
    expect(page.locator("#approvals tr[data-approval]")).to_have_count(0)

    # Denied from the dashboard: the chat's prompt names the operator, as a Deny pressed in the chat names its person.
    spared = herald.home / "workspace" / "spared"
    spared.mkdir()
    herald.post(f"[tool=terminal:{json.dumps({'command': f'rm -rf {spared}'})}]", chat_id="ops")
    row = page.locator("#approvals tr[data-approval]")
    row.wait_for(timeout=15_000)
    row.get_by_role("button", name="Deny").click()
    expect(page.locator("#notice")).to_have_text("Denied.")
    herald.wait_for("ops", lambda ms: any("Denied by the operator (dashboard)" in m["text"] for m in ms), 10)
    assert spared.exists()
    expect(page.locator("#approvals tr[data-approval]")).to_have_count(0)

    # A cron job: its run shows up in its history, ran and delivered apart.
    added = herald_cli(herald, "cron", "add", "--schedule", "every 1h", "--prompt", "status report",
                       "--deliver", "web:ops", "--name", "report")
    job_id = next(w for w in added.split() if len(w) >= 8 and w.isalnum())
    page.wait_for_selector(f'#jobs tr[data-job="{job_id}"]')
    page.click(f'#jobs tr[data-job="{job_id}"] a')
    page.wait_for_url(f"**/dashboard/cron/{job_id}")
    page.locator("#runs").wait_for()
    assert "No runs yet." in page.locator("#runs").inner_text()
    herald_cli(herald, "cron", "run", job_id)
    expect(page.locator("#runs tr[data-run]", has_text="delivered")).to_have_count(1, timeout=20_000)
    run = page.locator("#runs tr[data-run]").first.inner_text()
    assert "manual" in run and "ok" in run and "delivered" in run
    shot = tmp_path / "dashboard-cron.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")

    # Back to the overview: reset the chat's session (two clicks: ask, then do).
    page.click("text=← Dashboard")
    session = page.locator('#sessions tr[data-session]', has_text="ops")
    session.wait_for()
    before = session.get_attribute("data-session")
    session.get_by_role("button", name="Reset").click()
    session.get_by_role("button", name="Confirm reset").click()
    expect(page.locator("#notice")).to_contain_text("Started a fresh conversation")
    herald.wait_for("ops", lambda ms: any("operator started a fresh conversation" in m["text"] for m in ms), 10)
    assert before is not None

    # The job page of a job that is not there is a page too.
    page.goto(herald.base + "/dashboard/cron/nosuchjob")
    page.wait_for_selector("text=There is no such job")
    assert problems == [], problems
