"""A poison message, for real: its turn kills ``herald run`` (SIGKILL, as the kernel's OOM killer does) every time
it runs. After the third crash the restarted daemon parks the message instead of running it again, tells the
chat once, lists it on the dashboard and answers the next message.

What kills the daemon is a tool that exists only in this test: a ``sitecustomize`` module on the daemon's
PYTHONPATH registers it in the daemon's tool registry at interpreter start (nothing in Herald knows of it). A
command through the terminal tool cannot do this: it runs sandboxed, in a PID namespace where the daemon is not
to be seen, under limits of its own.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gateway.platforms.base import InboundMessage, Source
from gateway.turns.attempts import parked_notice
from tests.e2e.conftest import Herald
from tests.fakes.llm import FakeLLMThread, Reply, ToolCall, last_user_message, message_text

pytestmark = pytest.mark.e2e

TOOL = "end_this_process"
POISON = "summarise the crash dump please"
INJECTED = f'''
import os
import signal

from tools.registry import Tool, registry


def _kill(args, ctx):
    os.kill(os.getpid(), signal.SIGKILL)  # the whole daemon, mid-turn, as an OOM kill would


registry.register(Tool("{TOOL}", "Test only: ends the process it runs in.", {{"type": "object", "properties": {{}}}},
                       _kill))
'''


def responder(request: dict[str, Any]) -> Any:
    """The poison message's turn calls the killing tool, every time it is asked (a resumed turn too); anything
    else is echoed."""
    text = message_text(last_user_message(request))
    if text == POISON:
        return ToolCall(TOOL, {})
    return Reply("echo: " + text)


def crash_once(herald: Herald) -> int:
    """Start the daemon and wait for its turn to kill it; its exit status."""
    proc = herald.spawn()
    try:
        return proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"the poison message did not take the daemon down:\n{herald.stderr()[-2000:]}") from None


def test_a_message_that_kills_its_daemon_is_parked_after_three_crashes(make_herald, fake_llm: FakeLLMThread,
                                                                       tmp_path: Path) -> None:
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(INJECTED)
    fake_llm.responder = responder
    herald = make_herald({"gateway": {"max_attempts": 3}}, start=False)
    herald.env["PYTHONPATH"] = str(inject)

    herald.start()
    herald.post(POISON, chat_id="poison")
    assert herald.proc is not None and herald.proc.wait(30) == -signal.SIGKILL
    herald.close_files()
    for _ in range(2):  # each restart takes the message up again, and dies of it again
        assert crash_once(herald) == -signal.SIGKILL
        herald.close_files()
    asked = sum(1 for r in fake_llm.requests if message_text(last_user_message(r)) == POISON)
    assert asked == 3, asked

    herald.start()  # comes up clean: the message is parked, not run a fourth time
    notice = parked_notice(InboundMessage(Source("web", "poison", "tester"), POISON, "x"), 3)
    herald.wait_for("poison", lambda msgs: any(m["text"] == notice for m in msgs), timeout=20)
    herald.post("and now something harmless", chat_id="poison")
    replies = herald.wait_for_replies("poison", 1, match=lambda t: t == "echo: and now something harmless")
    assert replies
    assert herald.proc is not None and herald.proc.poll() is None
    assert [m["text"] for m in herald.messages("poison")].count(notice) == 1
    assert sum(1 for r in fake_llm.requests if message_text(last_user_message(r)) == POISON) == 3
    assert [e for e in herald.log_events() if e.get("event") == "message_parked"]
    html = herald.get("/api/v1/dashboard/view").body["html"]
    section = html[html.index('<section id="parked">'):]
    assert POISON in section[:section.index("</section>")]
