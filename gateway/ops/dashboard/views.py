"""The dashboard's HTML, rendered on the server from plain data. Every value from the database or a chat is
escaped here; the page's script only swaps these fragments in and turns ``<time data-ts>`` into "3 min ago"
(so a fragment does not change every second just because time passes, and live updates stay rare)."""

from __future__ import annotations

import time
from html import escape
from typing import Any
from urllib.parse import quote

from gateway.ops.dashboard.data import Overview, SessionRow

STATE_CLASS = {"connected": "good", "starting": "warn", "retrying": "bad", "failed": "bad", "stopped": "muted",
               "disabled": "muted"}
RUN_CLASS = {"ok": "good", "running": "warn", "failed": "bad", "timed_out": "bad", "missed": "warn",
             "skipped": "muted"}
AUDIT_CLASS = {"answered": "good", "sent": "good", "fetched": "good", "searched": "good", "steered": "muted",
               "replaced": "muted", "new_turn": "muted", "ignored": "muted", "no_answer": "warn", "stopped": "warn",
               "withdrawn": "warn", "denied": "warn", "refused": "bad", "failed": "bad"}
AUDIT_SHOWN = 300  # characters of a subject or detail in the view (the row keeps more)
DELIVERY_CLASS = {"delivered": "good", "pending": "warn", "failed": "bad", "local": "muted", "silent": "muted",
                  "none": "muted"}


def e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def ts(epoch: float | None, empty: str = "—") -> str:
    if not epoch:
        return e(empty)
    absolute = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))
    return f'<time data-ts="{epoch:.0f}" title="{absolute}">{absolute}</time>'


def badge(text: str, cls: str) -> str:
    return f'<span class="badge {e(cls)}">{e(text)}</span>'


def _section(title: str, ident: str, body: str, count: int | None = None) -> str:
    n = f' <span class="count">{count}</span>' if count is not None else ""
    return f'<section id="{ident}"><h2>{e(title)}{n}</h2>{body}</section>'


def _table(head: list[str], rows: list[str], empty: str) -> str:
    if not rows:
        return f'<p class="empty">{e(empty)}</p>'
    th = "".join(f"<th>{e(h)}</th>" for h in head)
    return f'<table><thead><tr>{th}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def overview(data: Overview, charts: str = "") -> str:
    """``charts``: the charts panel (gateway/ops/dashboard/panels.py), rendered apart since its figures are read
    less often."""
    return "".join([_summary(data), charts, _adapters(data.adapters), _approvals(data.approvals),
                    _sessions(data.sessions), _jobs(data.jobs), _failures(data.failures), _parked(data.parked),
                    _audit(data.events)])


def _summary(data: Overview) -> str:
    down = [n for n, a in data.adapters.items() if a.get("state") != "connected"]
    health = badge("all adapters connected", "good") if not down else badge(f"down: {', '.join(down)}", "bad")
    return (f'<p id="summary">{health} {badge(f"{data.turns_running} turns running", "muted")} '
            f'{badge(f"{data.turns_waiting} queued", "muted")} '
            f'{badge(f"{len(data.approvals)} approvals waiting", "warn" if data.approvals else "muted")}</p>')


def _adapters(adapters: dict[str, dict[str, Any]]) -> str:
    rows = []
    for name, a in adapters.items():
        state = a.get("state", "?")
        error = a.get("last_error") or a.get("error") or ""
        state_badge = badge(state, STATE_CLASS.get(state, "muted"))
        rows.append(f'<tr data-adapter="{e(name)}"><td>{e(name)}</td><td>{state_badge}</td>'
                    f'<td class="error">{e(error)}</td><td>{e(a.get("hint") or "")}</td></tr>')
    return _section("Adapters", "adapters", _table(["platform", "state", "last error", "what to do"], rows,
                                                   "No adapters are enabled."))


def _approvals(items: list[dict[str, Any]]) -> str:
    rows = []
    for a in items:
        where = f'{a["platform"]}:{a["chat_id"]}'
        kind = " (a cron job's script)" if a.get("scheduled") else ""
        buttons = (f'<button class="approve" data-action="approve" data-id="{e(a["id"])}" data-choice="o">'
                   f'Approve once</button> <button class="deny" data-action="approve" data-id="{e(a["id"])}" '
                   f'data-choice="d">Deny</button>')
        rows.append(f'<tr data-approval="{e(a["id"])}"><td><code>{e(a["id"])}</code></td><td>{e(where)}</td>'
                    f'<td>{e(a.get("requested_by"))}</td><td><pre>{e(a["command"])}</pre>{e(kind)}</td>'
                    f'<td>{e(a["reason"])}</td><td>{ts(a["created_at"])}</td><td class="actions">{buttons}</td></tr>')
    return _section("Pending approvals", "approvals",
                    _table(["id", "chat", "asked by", "command", "why", "asked", ""], rows,
                           "Nothing is waiting for approval."), len(items))


def _sessions(items: list[SessionRow]) -> str:
    rows = []
    for s in items:
        chat = s.chat + (f" / thread {s.thread}" if s.thread else "") + (f" / user {s.user}" if s.user else "")
        state = (f'{badge("busy", "warn")} <span class="step">{e(s.step)}</span> since {ts(s.busy_since)}'
                 if s.busy_since else badge("idle", "muted"))
        reset = (f'<button data-action="reset" data-key="{e(s.key)}" '
                 f'data-confirm="Start a fresh conversation for {e(chat)}?">Reset</button>')
        rows.append(f'<tr data-session="{e(s.key)}"><td>{e(s.platform)}</td><td>{e(chat)}</td>'
                    f'<td>{ts(s.last_activity)}</td><td class="num">{s.queued}</td><td>{state}</td>'
                    f'<td class="actions">{reset}</td></tr>')
    return _section("Sessions", "sessions", _table(["platform", "chat", "last activity", "queued", "state", ""],
                                                   rows, "No conversations yet."), len(items))


def run_outcome(run: dict[str, Any] | None) -> str:
    """"ran" and "delivered" are two facts: a run can succeed and its answer still not reach the chat."""
    if run is None:
        return '<span class="muted">never ran</span>'
    status, delivery = run["status"], run["delivery_status"]
    out = f'ran: {badge(status, RUN_CLASS.get(status, "muted"))}'
    if status not in ("missed", "skipped", "running"):
        out += f' delivered: {badge(delivery, DELIVERY_CLASS.get(delivery, "muted"))}'
    return out


def _jobs(jobs: list[dict[str, Any]]) -> str:
    rows = []
    for j in jobs:
        enabled = badge("on", "good") if j["enabled"] else badge("paused", "muted")
        link = f'<a href="/dashboard/cron/{quote(j["id"], safe="")}">{e(j["name"])}</a>'
        last = j.get("last_run")
        rows.append(f'<tr data-job="{e(j["id"])}"><td>{link}<br><code>{e(j["id"])}</code></td>'
                    f'<td><code>{e(j["schedule"])}</code></td><td>{enabled}</td><td>{ts(j["next_run_at"])}</td>'
                    f'<td>{ts(last["due_at"] if last else None, "never")}</td><td>{run_outcome(last)}</td>'
                    f'<td>{e(j["deliver"])}</td></tr>')
    return _section("Cron jobs", "jobs", _table(["job", "schedule", "", "next run", "last run", "last outcome",
                                                 "delivers to"], rows, "No scheduled jobs."), len(jobs))


def _failures(items: list[dict[str, Any]]) -> str:
    rows = []
    for f in items:
        what = e(f["what"])
        if f.get("job_id"):
            what = f'<a href="/dashboard/cron/{quote(f["job_id"], safe="")}">{what}</a>'
        rows.append(f'<tr><td>{ts(f["at"])}</td><td>{what}</td><td>{e(f.get("where") or "")}</td>'
                    f'<td class="error">{e(f.get("error") or "")}</td></tr>')
    return _section("Recent delivery failures", "failures", _table(["when", "what", "to", "error"], rows,
                                                                   "No failed deliveries."), len(items))


def _parked(items: list[dict[str, Any]]) -> str:
    rows = []
    for p in items:
        rows.append(f'<tr data-parked="{e(p["id"])}"><td>{ts(p["at"])}</td><td>{e(p["where"])}</td>'
                    f'<td>{e(p.get("who") or "")}</td><td><pre>{e(p["text"])}</pre></td>'
                    f'<td class="num">{e(p["attempts"])}</td><td class="error">{e(p.get("error") or "")}</td></tr>')
    return _section("Parked messages", "parked",
                    _table(["when", "chat", "from", "message", "turns begun", "why"], rows,
                           "No message was set aside."), len(items))


def _clip(text: Any) -> str:
    value = "" if text is None else str(text)
    return value if len(value) <= AUDIT_SHOWN else value[: AUDIT_SHOWN - 1] + "…"


def _audit(items: list[dict[str, Any]]) -> str:
    """The agent's questions, messages to other chats, pages and searches; what people steered in or edited."""
    rows = []
    for ev in items:
        where = f'{ev["platform"]}:{ev["chat_id"]}' if ev.get("platform") and ev.get("chat_id") else ""
        outcome = badge(ev["outcome"], AUDIT_CLASS.get(ev["outcome"], "muted"))
        rows.append(f'<tr data-audit="{ev["id"]}"><td>{ts(ev["created_at"])}</td><td>{e(ev["kind"])}</td>'
                    f'<td>{e(where)}<br><code>{e(ev.get("session_key") or "")}</code></td>'
                    f'<td>{e(ev.get("user_id") or "")}</td><td><pre>{e(_clip(ev["subject"]))}</pre></td>'
                    f'<td>{outcome}</td><td>{e(_clip(ev.get("detail")))}</td></tr>')
    return _section("Audit: the agent in the conversation", "audit",
                    _table(["when", "what", "chat / session", "user", "subject", "outcome", "detail"], rows,
                           "Nothing yet: no questions, messages to other chats, pages read, steers or edits."),
                    len(items))


def job_page(job: dict[str, Any] | None, runs: list[dict[str, Any]]) -> str:
    back = '<p><a href="/dashboard">← Dashboard</a></p>'
    if job is None:
        return back + '<p class="empty">There is no such job (it may have been removed).</p>'
    info = (f'<dl><dt>schedule</dt><dd><code>{e(job["schedule"])}</code></dd><dt>next run</dt>'
            f'<dd>{ts(job["next_run_at"])}</dd><dt>state</dt><dd>{"on" if job["enabled"] else "paused"}</dd>'
            f'<dt>delivers to</dt><dd>{e(job["deliver"])}</dd><dt>prompt</dt><dd><pre>{e(job["prompt"])}</pre></dd>'
            + (f'<dt>script</dt><dd><pre>{e(job["script"])}</pre></dd>' if job.get("script") else "") + "</dl>")
    rows = []
    for r in runs:
        delivery = r["delivery_status"]
        delivered = badge(delivery, DELIVERY_CLASS.get(delivery, "muted"))
        if r.get("delivered_at"):
            delivered += f" {ts(r['delivered_at'])}"
        if r.get("delivery_attempts"):
            delivered += f' <span class="muted">({r["delivery_attempts"]} attempt(s))</span>'
        rows.append(f'<tr data-run="{r["id"]}"><td class="num">{r["id"]}</td><td>{ts(r["due_at"])}</td>'
                    f'<td>{e(r["trigger"])}</td><td>{badge(r["status"], RUN_CLASS.get(r["status"], "muted"))}</td>'
                    f'<td class="error">{e(r.get("error") or "")}</td><td>{delivered}</td>'
                    f'<td class="error">{e(r.get("delivery_error") or "")}</td></tr>')
    table = _table(["run", "due", "trigger", "ran", "error", "delivered", "delivery error"], rows,
                   "No runs yet.")
    return (back + f'<section id="job"><h2>Cron job {e(job["name"])} <code>{e(job["id"])}</code></h2>{info}</section>'
            + _section("Run history", "runs", table, len(runs)))
