"""The ``terminal`` tool: one bash command in the sandbox (tools/sandbox.py), bounded in time and output."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import threading
import time
from typing import Any

from tools.config import ToolsConfig
from tools.dangerous import Decision, Verdict, classify
from tools.limits import exit_note, workspace_note
from tools.registry import ToolContext, code, error, tool
from tools.sandbox import child_env, context_policy, launch, model_problem, resolve_mode, workspace_dir

_POLL = 0.05
_TERM_GRACE = 1.0
_HEARTBEAT_EVERY = 5.0
# After the shell exits, background jobs may still hold the pipe; wait this long for their output.
_DRAIN_AFTER_EXIT = 0.3


def _enabled(config: ToolsConfig) -> bool:
    # Off as well when the sandbox cannot run here (auto or bwrap without a usable bubblewrap).
    return config.terminal.enabled and resolve_mode(config.terminal.sandbox, config.terminal.network)[0] != "off"


def _disabled_reason(config: ToolsConfig) -> str | None:
    if not config.terminal.enabled:
        return None
    mode, problem = resolve_mode(config.terminal.sandbox, config.terminal.network)
    return model_problem(problem) if mode == "off" else None


def resolve_cwd(ctx: ToolContext) -> str:
    """The workspace: where commands start, ``$HOME`` inside the sandbox, the only place they may write."""
    return str(context_policy(ctx).workspace)


class _Capture:
    """Drains a pipe in a thread keeping only head and tail, so a chatty command cannot exhaust memory."""

    def __init__(self, stream: Any, cap: int) -> None:
        self.half = max(1, cap // 2)
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_len = 0
        self.total = 0
        self._stream = stream
        self.thread = threading.Thread(target=self._run, name="terminal-capture", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            while chunk := self._stream.read1(65536):
                self.total += len(chunk)
                room = self.half - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail.append(chunk)
                    self.tail_len += len(chunk)
                    while self.tail and self.tail_len - len(self.tail[0]) >= self.half:
                        self.tail_len -= len(self.tail.popleft())
        except (OSError, ValueError):
            pass
        finally:
            try:
                self._stream.close()
            except OSError:
                pass

    def text(self) -> str:
        tail = b"".join(self.tail)
        head = bytes(self.head)
        if self.total <= len(head) + len(tail):
            return (head + tail).decode("utf-8", "replace")
        tail = tail[-self.half :]
        omitted = self.total - len(head) - len(tail)
        return (
            head.decode("utf-8", "replace")
            + f"\n\n[... {omitted} bytes of output omitted ...]\n\n"
            + tail.decode("utf-8", "replace")
        )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=_TERM_GRACE)
    except subprocess.TimeoutExpired:
        pass
    # Children may ignore SIGTERM or outlive the leader; the whole group gets SIGKILL regardless.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_command(command: str, ctx: ToolContext, timeout: float | None = None) -> dict[str, Any]:
    tcfg = ctx.config.terminal
    limit = tcfg.timeout_seconds if timeout is None else min(timeout, tcfg.timeout_seconds)
    policy = context_policy(ctx)
    if policy.mode == "off":
        return {"error": model_problem(policy.problem)}
    try:
        cwd = workspace_dir(policy)
    except FileNotFoundError as exc:
        return {"error": str(exc)}
    # With bwrap, killing the group kills bwrap, and its sandbox dies with it (--die-with-parent and the
    # PID namespace), so nothing the command started outlives the call.
    with launch(command, policy) as (line, fds):
        proc = subprocess.Popen(line, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True, env=child_env(policy), pass_fds=fds)
    capture = _Capture(proc.stdout, tcfg.max_output_chars)
    deadline = time.monotonic() + limit
    next_beat = time.monotonic() + _HEARTBEAT_EVERY
    timed_out = interrupted = False
    while True:
        try:
            proc.wait(timeout=_POLL)
            break
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if ctx.interrupt.is_set():
            interrupted = True
        elif now >= deadline:
            timed_out = True
        if interrupted or timed_out:
            _kill_group(proc)
            break
        if now >= next_beat:
            ctx.heartbeat("terminal: command still running")
            next_beat = now + _HEARTBEAT_EVERY
    capture.thread.join(timeout=_DRAIN_AFTER_EXIT)
    output = capture.text()
    if capture.thread.is_alive():
        output += "\n[background processes still hold the output; later output is not captured]"
    result: dict[str, Any] = {
        "exit_code": None if (timed_out or interrupted) else proc.returncode,
        "output": output,
        "timed_out": timed_out,
    }
    if timed_out:
        result["note"] = f"killed after {limit:g}s timeout"
    if interrupted:
        result["interrupted"] = True
    if (note := exit_note(policy.limits, result["exit_code"], output)) is not None:
        result["limit"] = note
    if (note := workspace_note(policy.limits, cwd)) is not None:
        result["workspace"] = note
    return result


def _classify(command: str, ctx: ToolContext) -> Verdict:
    # The terminal's working directory is the agent's workspace: writes inside it do not ask, and script
    # files named on the line are read from it. (classify ignores a workspace that is the home directory.)
    cwd = resolve_cwd(ctx)
    return classify(command, workspace=cwd, cwd=cwd)


# ---- batches: every dangerous command of one model answer is put to the person at once ----------------

_TICKETS = "approval_tickets"


def _prepare(args: dict[str, Any], ctx: ToolContext) -> None:
    command = args.get("command")
    hook = ctx.extras.get("approve")
    if not isinstance(command, str) or not command.strip() or not hasattr(hook, "open"):
        return
    verdict = _classify(command, ctx)
    if verdict.needs_approval:
        ctx.extras.setdefault(_TICKETS, {}).setdefault(command, []).append(hook.open(command, verdict, ctx))


def _take_ticket(ctx: ToolContext, command: str) -> Any:
    waiting = ctx.extras.get(_TICKETS, {}).get(command)
    return waiting.pop(0) if waiting else None


def _finish(ctx: ToolContext) -> None:
    """Prompts for calls that never ran (the turn stopped first) are withdrawn, not left to expire."""
    hook = ctx.extras.get("approve")
    for tickets in ctx.extras.pop(_TICKETS, {}).values():
        for ticket in tickets:
            if not isinstance(ticket, Decision) and hook is not None:
                hook.cancel(ticket)


@tool(
    "terminal",
    "Run a shell command with /bin/bash -c and return its combined stdout/stderr and exit code. Sandboxed "
    "(unless the operator turned that off): the working directory (the workspace, also $HOME) is the only "
    "writable place besides /tmp, which is empty for each command; the rest of the filesystem is read-only, "
    "some of it hidden, and processes end with the call. Network (when on) goes only through the proxy in "
    "HTTP_PROXY/HTTPS_PROXY/ALL_PROXY, to public hosts; this machine's own services are out of reach. Memory, "
    "CPU time and file sizes are limited. No stdin; use non-interactive flags. Long output is cut in the middle.",
    {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The bash command line to run."},
            "timeout": {"type": "number", "description": "Seconds before the command is killed."},
        },
        "required": ["command"],
    },
    toolset="terminal",
    check_enabled=_enabled,
    disabled_reason=_disabled_reason,
    prepare=_prepare,
    finish=_finish,
    progress=lambda args: f"running {code(args.get('command', ''))}…",
)
def terminal(args: dict[str, Any], ctx: ToolContext) -> str:
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        return error("command must be a non-empty string")
    timeout = args.get("timeout")
    if timeout is not None:
        try:
            timeout = float(timeout)
        except (TypeError, ValueError):
            return error("timeout must be a number of seconds")
        if timeout <= 0:
            timeout = None
    verdict = _classify(command, ctx)
    approval: Decision | None = None
    if verdict.level != "safe":
        # The gateway attaches the approval broker as extras["approve"]; it blocks this thread until a
        # person answers (or the wait times out). Without it nobody can approve, so nothing dangerous runs.
        hook = ctx.extras.get("approve")
        ticket = _take_ticket(ctx, command)
        if ticket is not None:
            approval = ticket if isinstance(ticket, Decision) else hook.wait(ticket, ctx)
        elif hook is not None:
            approval = hook(command, verdict, ctx)
        if verdict.forbidden:
            approval = Decision.forbidden(verdict.reason or "it is on the hardline list")
        elif approval is None:
            approval = Decision("denied", f"Not run: this command needs approval ({verdict.reason}) and nobody "
                                          "can approve it here.")
        if not approval.approved:
            return json.dumps({"status": approval.outcome, "error": approval.message}, ensure_ascii=False)
    result = run_command(command, ctx, timeout)
    if approval is not None:
        result = {"status": "ran", "approval": approval.message, **result}
    return json.dumps(result, ensure_ascii=False)

