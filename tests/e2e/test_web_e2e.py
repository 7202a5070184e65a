"""The real `herald run` process driven through its web API, with a scripted fake LLM behind it.

The model is steered by directives in the message text (see tests/fakes/llm.py): ``[sleep=N]`` delays the
answer, ``[tool=terminal:{...}]`` makes the model call the terminal tool. Without directives it answers
``echo: <text>``.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e.conftest import API_KEY, Herald
from tests.fakes.llm import FakeLLMThread, last_user_message, message_text
from tests.support.polling import wait_until_sync

pytestmark = pytest.mark.e2e


def is_echo(t: str) -> bool:
    return t.startswith("echo: ")


def model_saw(fake: FakeLLMThread, needle: str) -> list[dict[str, Any]]:
    """The model requests whose last user message contains ``needle``."""
    return [r for r in list(fake.requests) if needle in message_text(last_user_message(r))]


def conversation(request: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], message_text(m)) for m in request["messages"] if m["role"] in ("user", "assistant")]


# ---- replies ---------------------------------------------------------------------------------------


def test_plain_reply(herald: Herald) -> None:
    resp = herald.post("hi", chat_id="c1")
    assert resp["duplicate"] is False
    msgs = herald.wait_for("c1", lambda m: any(x["role"] == "assistant" for x in m))
    assert [(m["role"], m["text"]) for m in msgs] == [("user", "hi"), ("assistant", "echo: hi")]
    assert msgs[0]["id"] == resp["id"]


def test_tool_call_output_reaches_the_chat(herald: Herald, fake_llm: FakeLLMThread) -> None:
    # The shell has to evaluate the arithmetic, so "e2e-42" appears only if the command really ran.
    herald.post('run it [tool=terminal:{"command": "echo e2e-$((40+2))"}]', chat_id="tool")
    (reply,) = herald.wait_for_replies("tool", 1)
    assert reply.startswith("tool said:")
    assert "e2e-42" in reply
    tool_rounds = [r for r in fake_llm.requests if r["messages"][-1]["role"] == "tool"]
    assert len(tool_rounds) == 1
    assert "e2e-42" in message_text(tool_rounds[0]["messages"][-1])


def test_busy_session_queues_and_answers_in_order(herald: Herald, fake_llm: FakeLLMThread) -> None:
    herald.post("[sleep=1.5] first", chat_id="busy")
    wait_until_sync(lambda: model_saw(fake_llm, "first"), what="first turn started")
    herald.post("second", chat_id="busy")
    replies = herald.wait_for_replies("busy", 2, match=is_echo)
    assert replies == ["echo: [sleep=1.5] first", "echo: second"]
    msgs = herald.messages("busy")
    users = [m["text"] for m in msgs if m["role"] == "user"]
    assert users == ["[sleep=1.5] first", "second"]
    # Anything else the gateway said is a notice about the queue, never another answer.
    others = [m["text"] for m in msgs if m["role"] == "assistant" and not is_echo(m["text"])]
    assert all("Queued" in t for t in others), others
    # The second turn saw the first exchange: the queue ran them one after the other, not side by side.
    (second_req,) = model_saw(fake_llm, "second")
    assert ("assistant", "echo: [sleep=1.5] first") in conversation(second_req)


def test_stop_mid_turn(herald: Herald, fake_llm: FakeLLMThread) -> None:
    slow_posted = time.monotonic()
    herald.post("[sleep=5] slow", chat_id="stop")
    wait_until_sync(lambda: model_saw(fake_llm, "slow"), what="slow turn started")
    herald.post("/stop", chat_id="stop")
    # The notice must arrive while the model is still "thinking" (well before its 5 s are up).
    (notice,) = herald.wait_for_replies("stop", 1, timeout=3.5)
    assert "Stopped" in notice
    herald.post("after", chat_id="stop")
    assert "echo: after" in herald.wait_for_replies("stop", 2, timeout=10)
    # Let the abandoned model call finish, then make sure its answer went nowhere.
    time.sleep(max(0.0, slow_posted + 5.5 - time.monotonic()))
    herald.post("later", chat_id="stop")
    herald.wait_for_replies("stop", 1, match=lambda t: t == "echo: later")
    replies = herald.replies("stop")
    assert not any("slow" in t for t in replies), replies
    (later_req,) = model_saw(fake_llm, "later")
    assert ("assistant", "echo: [sleep=5] slow") not in conversation(later_req)


def test_restart_keeps_history(make_herald: Callable[..., Herald], fake_llm: FakeLLMThread) -> None:
    herald = make_herald()
    herald.post("remember the number 7", chat_id="mem")
    herald.wait_for_replies("mem", 1)
    assert herald.stop() == 0

    herald.start()  # same HERALD_HOME
    before = [(m["role"], m["text"]) for m in herald.messages("mem")]
    assert before == [("user", "remember the number 7"), ("assistant", "echo: remember the number 7")]
    herald.post("which number?", chat_id="mem")
    herald.wait_for_replies("mem", 2)
    (req,) = model_saw(fake_llm, "which number?")
    assert conversation(req) == [
        ("user", "remember the number 7"),
        ("assistant", "echo: remember the number 7"),
        ("user", "which number?"),
    ]


def test_same_message_id_is_answered_once(herald: Herald, fake_llm: FakeLLMThread) -> None:
    first = herald.post("hello once", chat_id="dup", message_id="m-1")
    second = herald.post("hello once", chat_id="dup", message_id="m-1")
    assert (first["duplicate"], second["duplicate"]) == (False, True)
    assert first["id"] == second["id"]
    # The same client id in another chat is a different message.
    assert herald.post("hello other chat", chat_id="dup2", message_id="m-1")["duplicate"] is False
    herald.wait_for_replies("dup", 1)
    # A later message in the same lane is answered after anything the duplicate could have started.
    herald.post("next", chat_id="dup", message_id="m-2")
    herald.wait_for_replies("dup", 1, match=lambda t: t == "echo: next")
    msgs = herald.messages("dup")
    assert [m["text"] for m in msgs if m["role"] == "user"] == ["hello once", "next"]
    assert [m["text"] for m in msgs if m["role"] == "assistant"] == ["echo: hello once", "echo: next"]
    assert len(model_saw(fake_llm, "hello once")) == 1


def test_concurrent_posts_of_one_message_id_are_accepted_once(herald: Herald) -> None:
    results: list[dict[str, Any]] = []

    def post() -> None:
        results.append(herald.post("racing", chat_id="race", message_id="same"))

    threads = [threading.Thread(target=post) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r["duplicate"] for r in results) == [False] + [True] * 5
    herald.post("after the race", chat_id="race")
    herald.wait_for_replies("race", 1, match=lambda t: t == "echo: after the race")
    assert [t for t in herald.replies("race") if is_echo(t)] == ["echo: racing", "echo: after the race"]


# ---- commands --------------------------------------------------------------------------------------


def test_help_and_unknown_command(herald: Herald, fake_llm: FakeLLMThread) -> None:
    herald.post("/help", chat_id="cmd")
    (help_text,) = herald.wait_for_replies("cmd", 1)
    for name in ("/help", "/new", "/stop", "/status", "/queue"):
        assert name in help_text
    assert fake_llm.requests == []  # commands never reach the model
    # A typed /word that is no command is prose for the model ("/etc is full, why?").
    herald.post("/var/log is full, why?", chat_id="cmd")
    replies = herald.wait_for_replies("cmd", 2)
    assert replies[1] == "echo: /var/log is full, why?"


# ---- configuration and startup ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "key_path"),
    [
        ({"gateway": {"busy_mod": "queue"}}, "gateway.busy_mod"),
        ({"gateway": {"max_queue": 0}}, "gateway.max_queue"),
        ({"model": {"nmae": "x"}}, "model.nmae"),
    ],
)
def test_bad_config_exits_2_naming_the_key(make_herald: Callable[..., Herald], overrides: dict[str, Any],
                                           key_path: str) -> None:
    herald = make_herald(overrides, start=False)
    herald.write_config()
    proc = herald.spawn()
    try:
        code = proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    herald.close_files()
    assert code == 2
    lines = herald.stderr().strip().splitlines()
    # One line per problem; a model section with a problem is not checked further, which is said once more.
    assert lines[1:] == (["herald: not checked until fixed: model (run again then)"] if key_path.startswith("model")
                         else []), lines
    assert key_path in lines[0]


def test_no_model_configured_answers_how_to_configure(make_herald: Callable[..., Herald]) -> None:
    herald = make_herald(model=False)
    herald.post("hi", chat_id="nomodel")
    (reply,) = herald.wait_for_replies("nomodel", 1)
    assert "\n" not in reply.strip()
    assert "model.base_url" in reply and "config.yaml" in reply


def test_readyz_lists_the_web_adapter(herald: Herald) -> None:
    health = herald.get("/healthz", auth=False)
    assert (health.status, health.body) == (200, {"status": "ok"})
    ready = herald.get("/readyz", auth=False)
    assert ready.status == 200
    assert ready.body["ready"] is True
    assert ready.body["adapters"]["web"]["state"] == "connected"


def test_web_token_file_is_private(herald: Herald) -> None:
    mode = stat.S_IMODE(os.stat(herald.home / "web_token").st_mode)
    assert mode == 0o600
    assert len(herald.token) >= 32


# ---- the web API's edges ---------------------------------------------------------------------------


WRONG_AUTH = [False, "Bearer wrong-token", "Basic dXNlcjpwYXNz", "Bearer ", "bearer"]


def test_requests_without_the_right_token_are_refused(herald: Herald) -> None:
    body = {"chat_id": "auth", "user_id": "u", "text": "let me in"}
    for auth in [*WRONG_AUTH, f"Bearer {herald.token}x", f"Bearer {herald.token[:-1]}"]:
        posted = herald.request("POST", "/api/v1/messages", body, auth=auth)
        assert posted.status == 401, auth
        assert "error" in posted.body
        assert herald.get("/api/v1/chats/auth/messages", auth=auth).status == 401, auth
        assert herald.get("/api/v1/chats/auth/events", auth=auth).status == 401, auth
        assert herald.request("POST", "/api/v1/chats/auth/buttons/x", {"user_id": "u"}, auth=auth).status == 401
    assert herald.messages("auth") == []  # nothing was taken in


NOT_A_JSON_OBJECT = [b"{not json", b"", b"[1, 2]", b"\xff\xfe\x00garbage"]


MALFORMED = [
    *NOT_A_JSON_OBJECT,
    b'{"chat_id": "bad", "user_id": "u"}',
    b'{"chat_id": ["bad"], "user_id": "u", "text": "x"}',
    b'{"chat_id": "bad", "user_id": "u", "text": 5}',
    b'{"chat_id": "bad\\u0000x", "user_id": "u", "text": "x"}',
    b'{"chat_id": "   ", "user_id": "u", "text": "x"}',
    b'{"chat_id": "bad", "user_id": "u", "text": "x", "message_id": {"a": 1}}',
]


def test_malformed_bodies_get_a_400_json_error(herald: Herald) -> None:
    for raw in MALFORMED:
        resp = herald.request("POST", "/api/v1/messages", raw=raw)
        assert resp.status == 400, (raw, resp.body)
        assert isinstance(resp.body, dict) and isinstance(resp.body.get("error"), str), raw
        if raw in NOT_A_JSON_OBJECT:
            button = herald.request("POST", "/api/v1/chats/bad/buttons/b1", raw=raw)
            assert button.status == 400, (raw, button.body)
    assert herald.messages("bad") == []
    herald.post("still fine", chat_id="ok")
    herald.wait_for_replies("ok", 1)


# ---- shutdown and secrets --------------------------------------------------------------------------


def test_sigterm_drains_the_running_turn(make_herald: Callable[..., Herald], fake_llm: FakeLLMThread) -> None:
    # debug: turn_delivered is one line per message, not logged at the default level.
    herald = make_herald({"gateway": {"drain_seconds": 10}, "logging": {"level": "debug"}})
    stream = herald.events("drain")
    try:
        herald.post("[sleep=3] draining", chat_id="drain")
        wait_until_sync(lambda: model_saw(fake_llm, "draining"), what="turn started")
        assert herald.stop() == 0
        # The answer went out over the live stream before the daemon closed it.
        assert stream.closed.wait(5)
        assert [m["text"] for m in stream.messages("assistant")] == ["echo: [sleep=3] draining"]
    finally:
        stream.close()
    events = [e["event"] for e in herald.log_events()]
    assert events.index("turn_delivered") < events.index("gateway_stopped")

    # After a restart it is not answered again.
    herald.start()
    herald.post("after restart", chat_id="drain")
    herald.wait_for_replies("drain", 1, match=lambda t: t == "echo: after restart")
    assert [t for t in herald.replies("drain") if "draining" in t] == ["echo: [sleep=3] draining"]
    assert len(model_saw(fake_llm, "draining")) == 1


def test_secrets_never_reach_the_log(make_herald: Callable[..., Herald], fake_llm: FakeLLMThread) -> None:
    herald = make_herald({"logging": {"level": "debug"}})
    token = herald.token
    herald.post("hello", chat_id="sec")
    herald.post('[tool=terminal:{"command": "echo done"}]', chat_id="sec2")
    herald.request("POST", "/api/v1/messages", {"chat_id": "sec", "user_id": "u", "text": "x"},
                   auth=f"Bearer {token}x")
    herald.request("POST", "/api/v1/messages", raw=b"{oops")
    herald.wait_for_replies("sec", 1)
    herald.wait_for_replies("sec2", 1)
    assert herald.stop() == 0
    # The key really was in use, so its absence from the log means something.
    assert f"Bearer {API_KEY}" in fake_llm.auth_headers
    log = herald.log_file.read_text()
    assert "turn_delivered" in log
    for name, value in (("web token", token), ("model API key", API_KEY)):
        assert value not in log, f"{name} leaked into herald.log"
        assert value not in herald.stderr(), f"{name} leaked into stderr"
        assert value not in herald.stdout(), f"{name} leaked into stdout"
    for line in log.splitlines():
        json.loads(line)  # every line is a JSON object


def test_sigterm_keeps_queued_messages_for_after_the_restart(
    make_herald: Callable[..., Herald], fake_llm: FakeLLMThread
) -> None:
    herald = make_herald({"gateway": {"drain_seconds": 10}})
    herald.post("[sleep=2] running one", chat_id="q")
    wait_until_sync(lambda: model_saw(fake_llm, "running one"), what="turn started")
    herald.post("waiting one", chat_id="q")
    assert herald.proc is not None
    herald.proc.terminate()
    wait_until_sync(lambda: "gateway_draining" in [e["event"] for e in herald.log_events()], what="draining")
    late = herald.request("POST", "/api/v1/messages", {"chat_id": "q", "user_id": "u", "text": "too late"})
    assert late.status == 503 and "error" in late.body
    assert herald.stop() == 0

    herald.start()
    replies = herald.wait_for_replies("q", 2, match=is_echo)
    herald.post("last", chat_id="q")
    herald.wait_for_replies("q", 1, match=lambda t: t == "echo: last")
    echoes = [t for t in herald.replies("q") if is_echo(t)]
    assert echoes == ["echo: [sleep=2] running one", "echo: waiting one", "echo: last"], replies
    assert "too late" not in [m["text"] for m in herald.messages("q")]
    assert len(model_saw(fake_llm, "waiting one")) == 1


def test_message_ids_stay_deduplicated_across_a_restart(make_herald: Callable[..., Herald]) -> None:
    herald = make_herald()
    herald.post("only once", chat_id="d", message_id="x1")
    herald.wait_for_replies("d", 1)
    assert herald.stop() == 0
    herald.start()
    assert herald.post("only once", chat_id="d", message_id="x1")["duplicate"] is True
    herald.post("next", chat_id="d", message_id="x2")
    herald.wait_for_replies("d", 1, match=lambda t: t == "echo: next")
    assert herald.replies("d") == ["echo: only once", "echo: next"]


def test_interrupt_mode_replaces_the_running_turn(make_herald: Callable[..., Herald],
                                                   fake_llm: FakeLLMThread) -> None:
    herald = make_herald({"gateway": {"busy_mode": "interrupt"}})
    herald.post("[sleep=2] old question", chat_id="i")
    wait_until_sync(lambda: model_saw(fake_llm, "old question"), what="turn started")
    herald.post("new question", chat_id="i")
    herald.wait_for_replies("i", 1, match=lambda t: t == "echo: new question")
    time.sleep(2.2)  # past the point where the old model call returns
    herald.post("check", chat_id="i")
    herald.wait_for_replies("i", 1, match=lambda t: t == "echo: check")
    replies = herald.replies("i")
    assert not any("old question" in t for t in replies), replies
    assert any("Stopped the previous turn" in t for t in replies), replies


def test_model_error_is_a_short_message_and_the_chat_goes_on(herald: Herald) -> None:
    herald.post("[error=500] boom", chat_id="err")
    (reply,) = herald.wait_for_replies("err", 1)
    assert "Traceback" not in reply and len(reply) < 500
    herald.post("fine now", chat_id="err")
    herald.wait_for_replies("err", 1, match=lambda t: t == "echo: fine now")


def test_long_reply_is_split_without_losing_text(herald: Herald) -> None:
    words = [f"w{i:05d}" for i in range(4000)]  # ~28 000 characters: more than one web message
    herald.post(" ".join(words), chat_id="long")
    herald.wait_for("long", lambda m: any(x["role"] == "assistant" and "w03999" in x["text"] for x in m))
    replies = herald.replies("long")
    assert len(replies) >= 2
    assert all(len(r) <= 16_000 for r in replies)
    assert " ".join(replies).split() == ["echo:", *words]


def test_unicode_round_trip_and_ids_with_any_characters(herald: Herald) -> None:
    herald.post("héllo wörld 🌍 — ✓", chat_id="uni")
    assert herald.wait_for_replies("uni", 1) == ["echo: héllo wörld 🌍 — ✓"]
    # Ids are opaque: ':' and '/' are fine and never mix two chats up.
    herald.post("one", chat_id="a:b/c")
    herald.post("two", chat_id="a:b")
    assert herald.wait_for_replies("a:b/c", 1) == ["echo: one"]
    assert herald.wait_for_replies("a:b", 1) == ["echo: two"]
    bad = herald.get("/api/v1/chats/has%01control/messages")
    assert bad.status == 400 and "error" in bad.body


def test_oversized_body_gets_a_json_413(herald: Herald) -> None:
    resp = herald.request("POST", "/api/v1/messages", raw=b'{"text": "' + b"x" * (3 * 1024 * 1024) + b'"}')
    assert resp.status == 413
    assert isinstance(resp.body, dict) and "error" in resp.body


def test_turn_timeout_tells_the_user_and_drops_the_late_answer(make_herald: Callable[..., Herald],
                                                                fake_llm: FakeLLMThread) -> None:
    herald = make_herald({"gateway": {"turn_timeout_seconds": 0.5}})
    herald.post("[sleep=2] stuck", chat_id="to")
    (notice,) = herald.wait_for_replies("to", 1, timeout=10)
    assert "stopped" in notice.lower()
    time.sleep(2.2)  # past the point where the stuck model call returns
    herald.post("next", chat_id="to")
    herald.wait_for_replies("to", 1, match=lambda t: t == "echo: next")
    assert not any("stuck" in t for t in herald.replies("to"))


def test_turn_cut_by_shutdown_is_answered_after_the_restart(make_herald: Callable[..., Herald],
                                                             fake_llm: FakeLLMThread) -> None:
    herald = make_herald({"gateway": {"drain_seconds": 0.2}})
    herald.post("[sleep=2] cut short", chat_id="cut")
    wait_until_sync(lambda: model_saw(fake_llm, "cut short"), what="turn started")
    assert herald.stop() == 0
    herald.start()
    herald.wait_for_replies("cut", 1, match=lambda t: t == "echo: [sleep=2] cut short")
    herald.post("next", chat_id="cut")
    herald.wait_for_replies("cut", 1, match=lambda t: t == "echo: next")
    replies = herald.replies("cut")
    assert replies.count("echo: [sleep=2] cut short") == 1, replies
    assert any("restarting" in t for t in replies), replies  # the user was told before the cut
    # The retried turn did not see a dangling copy of its own question in the history.
    retried = model_saw(fake_llm, "cut short")[-1]
    assert [t for r, t in conversation(retried) if r == "user"] == ["[sleep=2] cut short"]
