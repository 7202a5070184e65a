"""The README's API recipes against the real ``herald run``: the key made with ``herald api-key create``, the requests
Open WebUI sends (its connection check, a streamed chat that resends its history, a background title request),
and the README's ``openai`` SDK example, run as it is written there."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any

from tests.e2e.conftest import HERALD_BIN, REPO, Herald

# What Open WebUI's backend adds to what it relays (its user-info headers are on when an admin enables them).
OPEN_WEBUI_HEADERS = {"X-OpenWebUI-User-Name": "Ada", "X-OpenWebUI-User-Id": "u-1", "X-OpenWebUI-User-Role": "admin"}


def make_key(herald: Herald, name: str) -> str:
    out = subprocess.run([str(HERALD_BIN), "api-key", "create", name], cwd=REPO, env=herald.env,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def call(herald: Herald, key: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any, str]:
    """One request as Open WebUI's backend makes it; (status, JSON or None, the raw body)."""
    headers = {"Authorization": f"Bearer {key}", **OPEN_WEBUI_HEADERS}
    data = json.dumps(body).encode() if body is not None else None
    if data is not None:
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(f"{herald.base}/v1{path}", data=data, headers=headers,
                                 method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            status, raw = resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read().decode()
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    return status, parsed, raw


def streamed_text(raw: str) -> str:
    """The content of a chat completion's server-sent events, which must end in [DONE]."""
    datas = [line[len("data: "):] for line in raw.splitlines() if line.startswith("data: ")]
    assert datas[-1] == "[DONE]", datas[-3:]
    chunks = [json.loads(d) for d in datas[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def test_open_webui_connects_chats_and_resends_its_history(make_herald, fake_llm) -> None:
    herald = make_herald({"api": {"enabled": True}, "display": {"streaming": True}})
    key = make_key(herald, "open-webui")
    assert key.startswith("sk-herald-")

    status, models, _ = call(herald, key, "/models")  # "Verify connection"
    assert status == 200 and "herald" in [m["id"] for m in models["data"]]

    system = {"role": "system", "content": "You are a helpful assistant."}
    first = [system, {"role": "user", "content": "Hello, who are you?"}]
    status, _, raw = call(herald, key, "/chat/completions", {
        "model": "herald", "messages": first, "stream": True, "stream_options": {"include_usage": True},
        "temperature": 0.7, "user": {"name": "Ada", "id": "u-1"}})
    assert status == 200
    answer = streamed_text(raw)
    assert answer == "echo: Hello, who are you?"

    second = [*first, {"role": "assistant", "content": answer}, {"role": "user", "content": "And what can you do?"}]
    status, _, raw = call(herald, key, "/chat/completions", {"model": "herald", "messages": second, "stream": True})
    assert status == 200 and streamed_text(raw) == "echo: And what can you do?"
    # One conversation: the model saw the first exchange from the stored session, once.
    said = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] != "system"]
    assert said == ["Hello, who are you?", "echo: Hello, who are you?", "And what can you do?"]

    # The background title request (not streamed) is an agent turn like any other (the README says to give it
    # another model): it answers, in a conversation of its own.
    status, body, _ = call(herald, key, "/chat/completions", {"model": "herald", "stream": False, "messages": [
        {"role": "user", "content": "### Task:\nGenerate a concise, 3-5 word title.\n### Chat History:\n"
                                    "USER: Hello, who are you?"}]})
    assert status == 200 and body["choices"][0]["message"]["content"].startswith("echo: ### Task:")

    status, body, _ = call(herald, "sk-herald-000000000000-" + "x" * 43, "/models")
    assert status == 401 and body["error"]["code"] == "invalid_api_key"


def readme_example() -> str:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## The OpenAI-compatible API", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    return code


def test_the_readmes_sdk_example_runs_as_written(make_herald, fake_llm) -> None:
    herald = make_herald({"api": {"enabled": True}})
    key = make_key(herald, "my-script")
    env = {**os.environ, "HERALD_API_URL": f"{herald.base}/v1", "HERALD_API_KEY": key}
    out = subprocess.run([sys.executable, "-c", readme_example()], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["echo: Which build host did I name?",
                                       "echo: List the files in your workspace."]
    follow = next(r for r in fake_llm.requests if r["messages"][-1]["content"] == "Which build host did I name?")
    said = [m["content"] for m in follow["messages"] if m["role"] != "system"]
    assert said[:2] == ["My build host is ci-7. Say OK.", "echo: My build host is ci-7. Say OK."]
