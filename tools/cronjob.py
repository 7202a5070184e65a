"""``cronjob``: the agent schedules, lists and changes jobs whose results are delivered into chats.

The gateway puts its cron API in ``ToolContext.extras["cron_api"]`` and the chat the agent is talking in in
``extras["source"]`` (that chat is the ``origin`` target). The tool runs in a worker thread; the API hands
each action to the event loop.
"""

from __future__ import annotations

from typing import Any

from tools.registry import ToolContext, error, tool


@tool(
    "cronjob",
    "Schedule jobs that run the agent later, on their own, and deliver the answer into chats. Actions: "
    "create (schedule + prompt [+ deliver, name, repeat, script, no_agent, model, timeout_seconds, tz]), list, "
    "update (id + fields), pause (id), resume (id), remove (id), run (id: run now). Schedules: '30m', '2h', '1d' "
    "(once, after that delay); 'every 30m' (interval); a 5-field cron expression such as '0 8 * * *' (in tz); "
    "an ISO-8601 time such as 2026-05-01T08:00 (once). deliver: comma-separated targets: 'origin' (this chat, "
    "the default), a platform name (its home chat), 'platform:chat_id[:thread_id]', 'local' (stored only). "
    "The prompt must say everything the job needs: the run has no memory of this conversation.",
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
            "script": {"type": "string", "description": "A shell command whose output is added to the prompt."},
            "no_agent": {"type": "boolean", "description": "Deliver the script's output as it is, no agent."},
            "model": {"type": "string", "description": "Another model for this job's runs."},
            "timeout_seconds": {"type": "number"},
            "tz": {"type": "string", "description": "IANA timezone for cron expressions and ISO times."},
        },
        "required": ["action"],
    },
    toolset="cron",
)
def cronjob(args: dict[str, Any], ctx: ToolContext) -> Any:
    api = ctx.extras.get("cron_api")
    if api is None:
        return error("scheduled jobs are not available here (cron.enabled is false, or no gateway is running)")
    action = str(args.get("action") or "")
    if action == "create" and ctx.extras.get("cron_job_id"):
        return error("a scheduled job cannot create further jobs; say in your answer what should be scheduled")
    try:
        return api.call(action, {k: v for k, v in args.items() if k != "action"}, ctx.extras.get("source"))
    except ValueError as exc:  # the API's "this field is wrong, and why" (JobError, ScheduleError)
        return error(str(exc))
