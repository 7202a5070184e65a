"""``cronjob``: the agent schedules, lists and changes jobs whose results are delivered into chats.

The gateway puts its cron API in ``ToolContext.extras["cron_api"]`` and the chat the agent is talking in in
``extras["source"]`` (that chat is the ``origin`` target). The tool runs in a worker thread; the API hands
each action to the event loop.

A job's ``script`` is a shell command that will run unattended, on every run, for as long as the job lives.
So it is a command like any other, and more: when ``create`` (or ``update`` with a new script) would store
one, the API stores nothing and answers ``script_needs_approval``; the script is classified like a terminal
command (hardline: refused outright) and then always put to the person in the chat through the turn's
approval hook (``extras["approve"]``, ``scheduled=True``: no earlier grant or setting answers it). Only
with their answer does the tool call again, passing the approval beside the fields (the model cannot
write one into its arguments). No hook, or a cron run: nobody to ask, so the script is not scheduled.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tools.dangerous import Decision, classify
from tools.registry import ToolContext, error, short, tool

NEEDS_APPROVAL = "script_needs_approval"  # cron/tool_api.py's answer when a script needs a person's approval
SCHEDULED_REASON = "a scheduled job's script: it will run unattended on its schedule, again and again"


@tool(
    "cronjob",
    "Schedule jobs that run the agent later, on their own, and deliver the answer into chats. Actions: "
    "create (schedule + prompt [+ deliver, name, repeat, script, no_agent, model, timeout_seconds, tz]), list, "
    "update (id + fields), pause (id), resume (id), remove (id), run (id: run now). Schedules: '30m', '2h', '1d' "
    "(once, after that delay); 'every 30m' (interval); a 5-field cron expression such as '0 8 * * *' (in tz); "
    "an ISO-8601 time such as 2026-05-01T08:00 (once). deliver: comma-separated targets: 'origin' (this chat, "
    "the default), a platform name (its home chat), 'platform:chat_id[:thread_id]', 'local' (stored only). "
    "The prompt must say everything the job needs: the run has no memory of this conversation. A script "
    "(create, or update changing it) is shown to the user for approval first and runs sandboxed like the "
    "terminal's commands; the call waits for their answer.",
    {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["create", "list", "update", "pause", "resume", "remove", "run"]},
            "id": {"type": "string", "description": "The job id (update, pause, resume, remove, run)."},
            "name": {"type": "string"},
            "schedule": {"type": "string"},
            "prompt": {"type": "string", "description": "What the agent does on each run (self-contained)."},
            "deliver": {"type": "string", "description": "Targets, comma-separated. Default: origin."},
            "repeat": {"type": "integer", "description": "Stop after this many runs."},
            "script": {"type": "string", "description": "A shell command whose output is added to the prompt "
                                                        "(the user must approve it)."},
            "no_agent": {"type": "boolean", "description": "Deliver the script's output as it is, no agent."},
            "model": {"type": "string", "description": "Another model for this job's runs."},
            "timeout_seconds": {"type": "number"},
            "tz": {"type": "string", "description": "IANA timezone for cron expressions and ISO times."},
        },
        "required": ["action"],
    },
    toolset="cron",
    progress=lambda args: f"scheduled jobs: {short(args.get('action', ''), 20)}",
)
def cronjob(args: dict[str, Any], ctx: ToolContext) -> Any:
    api = ctx.extras.get("cron_api")
    if api is None:
        return error("scheduled jobs are not available here (cron.enabled is false, or no gateway is running)")
    action = str(args.get("action") or "")
    if action == "create" and ctx.extras.get("cron_job_id"):
        return error("a scheduled job cannot create further jobs; say in your answer what should be scheduled")
    fields = {k: v for k, v in args.items() if k != "action"}
    source = ctx.extras.get("source")
    try:
        result = api.call(action, fields, source)
        if not (isinstance(result, dict) and NEEDS_APPROVAL in result):
            return result
        script = str(result[NEEDS_APPROVAL]["script"])
        approval = _approve_script(script, action, ctx)
        if isinstance(approval, str):
            return error(approval)
        return api.call(action, fields, source, approval=approval)
    except ValueError as exc:  # the API's "this field is wrong, and why" (JobError, ScheduleError)
        return error(str(exc))


def _approve_script(script: str, action: str, ctx: ToolContext) -> dict[str, str] | str:
    """The approval of ``script`` by a person in the chat, or why the job was not scheduled."""
    what = "scheduled" if action == "create" else "changed"
    if ctx.extras.get("cron_job_id") or ctx.extras.get("cron"):
        return (f"the job was not {what}: a scheduled job cannot set scripts (nobody is here to approve one); "
                "say in your answer what should be scheduled")
    if not ctx.config.terminal.enabled:
        return (f"the job was not {what}: a script is a shell command, and the terminal is off here "
                "(tools.terminal.enabled: false)")
    verdict = classify(script)
    hook = ctx.extras.get("approve")
    if verdict.forbidden:
        if hook is not None and hasattr(hook, "open"):
            hook(script, verdict, ctx, scheduled=True)  # recorded as forbidden; no prompt is shown
        return (f"the job was not {what}: its script is forbidden — {verdict.reason}. It is never allowed, with "
                "or without approval; do not try to work around it.")
    if hook is None or not hasattr(hook, "open"):
        return f"the job was not {what}: its script needs a person's approval and nobody can be asked here"
    reason = SCHEDULED_REASON + (f"; also {verdict.reason}" if verdict.needs_approval and verdict.reason else "")
    opened = hook.open(script, dataclasses.replace(verdict, reason=reason), ctx, scheduled=True)
    decision: Decision = opened if isinstance(opened, Decision) else hook.wait(opened, ctx)
    approved_by = getattr(opened, "decided_by", None)
    if not decision.approved or isinstance(opened, Decision) or not approved_by:
        return f"the job was not {what} (its script needs the user's approval): {decision.message}"
    return {"script": script, "approved_by": approved_by, "approval_id": opened.id}
