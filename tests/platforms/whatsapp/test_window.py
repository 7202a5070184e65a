"""The 24-hour customer-service window: free-form inside it, the notify template outside it (a cron job's result,
the home chat), a clear failure without a template — never a silent drop; the window survives a restart, and
WhatsApp's own word (131047, at once or in a status) is believed over Herald's count."""

from __future__ import annotations

import time

from sqlalchemy import select

from cron.scheduler import CronScheduler
from gateway.ops.dashboard.data import delivery_failures
from gateway.platforms.base import OutboundMessage
from gateway.storage.tables import outbox
from tests.cron.test_cron import Clock, create, runs, settle
from tests.platforms.whatsapp.conftest import ALICE, BOB
from tests.support.polling import wait_until

TEMPLATE = {"name": "herald_notify", "language": "en_US"}


async def _cron(runner) -> CronScheduler:
    sched = CronScheduler(runner.cron_host(), now=Clock())
    runner.cron = sched
    await sched.start(timer=False)
    return sched


async def _run(sched: CronScheduler) -> None:
    sched.now.t += 3600  # type: ignore[attr-defined]
    await sched.tick()
    await settle(sched)


async def _rows(runner) -> list[dict]:
    return await runner.store.run_read(
        lambda c: [dict(r._mapping) for r in c.execute(select(outbox).order_by(outbox.c.id))])


async def test_a_cron_result_for_someone_who_never_wrote_fails_visibly_without_a_template_then_goes_free_form(
        start_whatsapp, fake_whatsapp):
    runner = await start_whatsapp({"cron": {"enabled": False, "delivery_retry_seconds": 0.01,
                                            "delivery_attempts": 1}}, home_chat=BOB)
    sched = await _cron(runner)
    job = await create(sched, schedule="every 1h", script="echo nightly numbers", no_agent=True, deliver="whatsapp")
    await _run(sched)
    [run] = await runs(sched, job["id"])
    assert run["delivery_status"] == "failed"
    assert "templates.notify" in run["delivery_error"] and "has never written" in run["delivery_error"]
    assert fake_whatsapp.sent == []
    failures = await runner.store.run_read(delivery_failures)
    assert any(f["where"] == f"whatsapp:{BOB}" and "templates.notify" in (f["error"] or "") for f in failures)
    # Bob writes: inside his window the next result is a plain message.
    await fake_whatsapp.post(fake_whatsapp.message(BOB, "hello"))
    await fake_whatsapp.wait_sent(lambda sent: len(sent) == 1)
    await _run(sched)
    results = [m for m in fake_whatsapp.sent_to(BOB) if "nightly numbers" in m.text]
    assert [m.type for m in results] == ["text"]
    assert (await runs(sched, job["id"]))[-1]["delivery_status"] == "delivered"


async def test_outside_the_window_the_result_goes_as_the_template_on_one_line_in_numbered_parts(
        start_whatsapp, fake_whatsapp):
    fake_whatsapp.templates[("herald_notify", "en_US")] = "Herald says: {{1}}"
    runner = await start_whatsapp({"cron": {"enabled": False, "delivery_retry_seconds": 0.01}}, home_chat=BOB,
                                  templates={"notify": {**TEMPLATE, "max_text": 200}})
    sched = await _cron(runner)
    words = " ".join(f"w{i}" for i in range(120))
    job = await create(sched, schedule="every 1h", script=f"printf 'first line\\n\\n  second\\tline\\n{words}'",
                       no_agent=True, deliver=f"whatsapp:{BOB}")
    await _run(sched)
    assert (await runs(sched, job["id"]))[-1]["delivery_status"] == "delivered"
    sent = fake_whatsapp.sent_to(BOB)
    assert len(sent) >= 3 and all(m.type == "template" and m.template == "herald_notify" for m in sent)
    assert [m.text.split(" ", 3)[2] for m in sent] == [f"({i}/{len(sent)})" for i in range(1, len(sent) + 1)]
    joined = " ".join(m.text.split(" ", 3)[3] for m in sent)
    assert "first line · second line · w0 w1" in joined
    output = joined.split("first line · ", 1)[1]  # after the header, which quotes the script
    assert [w for w in output.split() if w.startswith("w") and w[1:].isdigit()] == words.split()
    assert fake_whatsapp.refused == []
    # The outbox row of the delivery names every template sent for it.
    [row] = [r for r in await _rows(runner) if r["ref"] and r["ref"].startswith("cron:")]
    assert row["status"] == "sent" and row["platform_message_id"].split() == [m.id for m in sent]


async def test_a_message_written_more_than_a_day_ago_is_answered_with_the_template(
        start_whatsapp, fake_whatsapp, fake_llm):
    """Meta delivers a webhook late (after an outage of the daemon): the window counts from when the person
    wrote, so the answer goes as the template."""
    fake_whatsapp.templates[("herald_notify", "en_US")] = "{{1}}"
    await start_whatsapp(templates={"notify": TEMPLATE})
    status, _, _ = await fake_whatsapp.post(fake_whatsapp.message(ALICE, "are you there?", at=time.time() - 25 * 3600))
    assert status == 200
    [answer] = await fake_whatsapp.wait_sent(lambda sent: len(sent) == 1)
    assert (answer.type, answer.text) == ("template", "echo: are you there?")
    assert fake_whatsapp.refused == []


async def test_the_window_is_remembered_across_a_restart(start_whatsapp, fake_whatsapp, home):
    fake_whatsapp.templates[("herald_notify", "en_US")] = "{{1}}"
    runner = await start_whatsapp(templates={"notify": TEMPLATE})
    await fake_whatsapp.post(fake_whatsapp.message(BOB, "hi"))
    await fake_whatsapp.wait_sent(lambda sent: len(sent) == 1)
    await runner.shutdown()
    again = await start_whatsapp(templates={"notify": TEMPLATE})
    report = await again.delivery.deliver(again.adapters["whatsapp"], BOB, OutboundMessage("after the restart"))
    assert not report.failed
    [after] = [m for m in fake_whatsapp.sent_to(BOB) if m.text == "after the restart"]
    assert after.type == "text"  # not the template: the new daemon knows Bob wrote a moment ago


async def test_whatsapp_refusing_at_once_with_131047_sends_the_template_and_closes_the_window(
        start_whatsapp, fake_whatsapp):
    fake_whatsapp.templates[("herald_notify", "en_US")] = "Herald: {{1}}"
    fake_whatsapp.window_errors = "sync"
    runner = await start_whatsapp(templates={"notify": TEMPLATE})
    await fake_whatsapp.post(fake_whatsapp.message(ALICE, "hi"))
    await fake_whatsapp.wait_sent(lambda sent: len(sent) == 1)
    fake_whatsapp.age(ALICE, 30)  # Meta counts the window closed; Herald still thinks it open
    adapter = runner.adapters["whatsapp"]
    for text in ("first ping", "second ping"):
        report = await runner.delivery.deliver(adapter, ALICE, OutboundMessage(text))
        assert not report.failed
    assert [(m.type, m.text) for m in fake_whatsapp.sent_to(ALICE)[1:]] == [
        ("template", "Herald: first ping"), ("template", "Herald: second ping")]
    assert [code for code, _ in fake_whatsapp.refused] == [131047]  # the second went as the template at once


async def test_a_131047_status_sends_the_words_again_as_the_template_on_the_same_outbox_row(
        start_whatsapp, fake_whatsapp):
    fake_whatsapp.templates[("herald_notify", "en_US")] = "Herald: {{1}}"
    runner = await start_whatsapp(templates={"notify": TEMPLATE})
    await fake_whatsapp.post(fake_whatsapp.message(ALICE, "hi"))
    await fake_whatsapp.wait_sent(lambda sent: len(sent) == 1)
    fake_whatsapp.age(ALICE, 30)
    report = await runner.delivery.deliver(runner.adapters["whatsapp"], ALICE, OutboundMessage("the report"),
                                           ref="job:1")
    assert not report.failed  # taken; WhatsApp says otherwise a moment later, in a status
    sent = await fake_whatsapp.wait_sent(lambda sent: any(m.type == "template" for m in sent))
    [template] = [m for m in sent if m.type == "template"]
    assert template.text == "Herald: the report"
    row = await wait_until(lambda: _ref_row(runner, "job:1", template.id), what="the row names the template")
    assert (row["status"], row["error"]) == ("sent", None)


async def test_a_131047_status_without_a_template_fails_the_row_with_what_to_do(start_whatsapp, fake_whatsapp):
    runner = await start_whatsapp()
    await fake_whatsapp.post(fake_whatsapp.message(ALICE, "hi"))
    await fake_whatsapp.wait_sent(lambda sent: len(sent) == 1)
    fake_whatsapp.age(ALICE, 30)
    await runner.delivery.deliver(runner.adapters["whatsapp"], ALICE, OutboundMessage("the report"), ref="job:2")

    async def failed() -> dict | None:
        rows = [r for r in await _rows(runner) if r["ref"] == "job:2" and r["status"] == "failed"]
        return rows[0] if rows else None

    row = await wait_until(failed, what="the row failed")
    assert "131047" in row["error"] and "templates.notify" in row["error"]
    assert any("131047" in (f["error"] or "") for f in await runner.store.run_read(delivery_failures))


async def _ref_row(runner, ref: str, message_id: str) -> dict | None:
    rows = [r for r in await _rows(runner) if r["ref"] == ref and r["platform_message_id"] == message_id]
    return rows[0] if rows else None
