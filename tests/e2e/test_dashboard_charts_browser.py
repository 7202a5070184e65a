"""The dashboard's charts in a real browser (Debian's chromium through Playwright, as the other page tests),
against the real `herald run` process: after some messages, a malformed request, a priced model's calls and a
cron run, every chart draws its figures (bars, latency lines, a cost bar, a run on the timeline, the fault's
class), a new message shows up in them without a reload, and at a phone's width the charts fit. The
screenshots are kept in the test's tmp dir (dashboard-charts.png, dashboard-charts-phone.png)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Herald
from tests.e2e.test_dashboard_browser import herald_cli
from tests.e2e.test_web_browser import browser_page, web_url  # noqa: F401 - the fixture

pytestmark = [pytest.mark.e2e, pytest.mark.browser]
expect = pytest.importorskip("playwright.sync_api").expect

PRICED = {"model": {"prices": {"fake-model": {"input_per_million": 3.0, "output_per_million": 15.0}}}}


def test_the_dashboard_charts_in_a_browser(make_herald: Any, browser_page: Any, tmp_path: Path) -> None:  # noqa: F811
    herald: Herald = make_herald(PRICED)
    page = browser_page
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))

    for i in range(3):
        herald.post(f"question {i}", chat_id="ops")
    # (the first two are also told they are queued: those notices are replies too, so wait for the answers)
    herald.wait_for_replies("ops", 3, match=lambda t: t.startswith("echo: question"))
    assert herald.request("POST", "/api/v1/messages", raw=b"{not json").status == 400  # a bad_request fault
    added = herald_cli(herald, "cron", "add", "--schedule", "every 1h", "--prompt", "status report",
                       "--deliver", "web:ops", "--name", "<b>report</b>")
    job_id = next(w for w in added.split() if len(w) >= 8 and w.isalnum())
    herald_cli(herald, "cron", "run", job_id)
    herald.wait_for_replies("ops", 1, match=lambda t: "Cron job" in t)  # delivered: the run is over

    page.goto(web_url(herald).replace("/#", "/dashboard#"))
    charts = page.locator("#charts")
    charts.wait_for()
    expect(page.locator("#status")).to_have_text("live")
    messages = page.locator("#chart-messages")
    expect(messages.locator("svg")).to_have_count(2)
    expect(messages.locator("svg").first.locator("rect.bar")).not_to_have_count(0)
    expect(messages.locator("svg").nth(1).locator("rect.bar")).not_to_have_count(0)
    expect(page.locator("#chart-latency svg").first.locator("path.line.p50")).to_have_count(1)
    expect(page.locator("#chart-latency svg").first.locator("path.line.p99")).to_have_count(1)
    expect(page.locator("#chart-latency figcaption")).to_contain_text(re.compile(r"p50 [0-9.]+ s"))
    expect(page.locator("#chart-cost rect.bar")).to_have_count(1)  # today's
    expect(page.locator("#chart-cost figcaption")).to_contain_text("US$")
    run = page.locator("#chart-cron g.mark")
    expect(run).to_have_count(1, timeout=20_000)
    expect(run.locator("rect.ran.good")).to_have_count(1)
    expect(page.locator("#chart-cron svg")).to_contain_text("<b>report</b>")  # as text, escaped
    expect(page.locator("#chart-faults svg text.name")).to_contain_text(["bad_request"])
    page.screenshot(path=str(tmp_path / "dashboard-charts.png"), full_page=True)

    # Live: a new message reaches the chart without a reload.
    before = messages.locator("figcaption").inner_text()
    herald.post("one more", chat_id="ops")
    expect(messages.locator("figcaption")).not_to_have_text(before, timeout=20_000)
    expect(messages.locator("figcaption")).to_contain_text("4 in the last hour")  # three, and this one

    # A phone's width: the charts shrink into their boxes, nothing sticks out sideways.
    page.set_viewport_size({"width": 390, "height": 844})
    charts.scroll_into_view_if_needed()
    assert charts.evaluate("el => el.scrollWidth <= el.clientWidth + 1")
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    page.screenshot(path=str(tmp_path / "dashboard-charts-phone.png"), full_page=True)
    print(f"screenshots: {tmp_path}")
    assert problems == [], problems
