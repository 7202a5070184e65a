"""A streamed reply across a crash: ``herald run`` killed (SIGKILL) while the web chat shows the answer half
written; after the restart the same message becomes the whole answer, and no second copy appears."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

from tests.e2e.conftest import Herald
from tests.fakes.llm import FakeLLMThread, Reply


def assistant(msgs: list[dict]) -> list[dict]:
    return [m for m in msgs if m["role"] == "assistant"]


def test_a_daemon_killed_mid_stream_ends_with_the_reply_shown_once(make_herald: Callable[..., Herald],
                                                                    fake_llm: FakeLLMThread) -> None:
    herald = make_herald({"display": {"streaming": True}})
    words = ["The first ", "attempt ", "was ", "being ", "written ", "when "] + ["the power went. "] * 30
    final = ["The whole answer, ", "written after ", "the restart, ", "shown once."]
    fake_llm.script(Reply.streamed(words, 0.3), Reply.streamed(final, 0.05))
    herald.post("tell me", chat_id="kill")
    # The web chat shows the reply as it is written: one assistant message, edited as it grows.
    first = herald.wait_for("kill", lambda msgs: assistant(msgs) and "being" in assistant(msgs)[0]["text"],
                            timeout=20)
    streamed_id = assistant(first)[0]["id"]
    assert herald.proc is not None
    herald.proc.send_signal(signal.SIGKILL)
    herald.proc.wait(10)
    herald.close_files()
    herald.start()
    herald.wait_for("kill", lambda msgs: any(a["text"] == "".join(final) for a in assistant(msgs)), timeout=30)
    time.sleep(1.0)  # room for a wrong second copy
    msgs = herald.messages("kill")
    assert [m["id"] for m in assistant(msgs)] == [streamed_id]  # the half-written message became the answer
    assert [m["role"] for m in msgs] == ["user", "assistant"]
