"""A grant covers what runs, not just the text: "Approve for this session" / "Always approve" of ``bash run.sh``
stop answering once run.sh changes; approvals.allow never covers a command that runs a file the agent can
rewrite; a file changed between the prompt and the run voids the approval; a reason from a file the sandbox
hides is withheld."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.approvals.hook import HIDDEN_READ
from tests.approvals.test_approvals import ask, base, prompt_id, prompts, row, wait_prompts, wait_tool_result
from tests.fakes.llm import Reply, ToolCall, ToolCalls


def write(path: str, content: str) -> str:
    return f"[tool=write_file:{json.dumps({'path': path, 'content': content})}]"


def script(tmp_path: Path, victim: str) -> str:
    d = tmp_path / victim
    d.mkdir(exist_ok=True)
    (d / "keep.txt").write_text("keep")
    return f"#!/bin/bash\nrm -rf {d}\n"


@pytest.mark.parametrize("choice", ["s", "a"])
async def test_a_grant_for_bash_run_sh_does_not_cover_a_rewritten_run_sh(make_runner: Any, tmp_path: Path,
                                                                         choice: str) -> None:
    runner, qa = await make_runner(base(tmp_path))
    (tmp_path / "run.sh").write_text(script(tmp_path, "first"))
    await qa.say(ask("bash run.sh"))
    (prompt,) = await wait_prompts(qa, 1)
    assert "run.sh" in prompt.text.split("Why it asks")[1]  # the prompt says the grant is tied to run.sh
    await qa.click(f"ap:{prompt_id(prompt)}:{choice}")
    assert (await wait_tool_result(qa, 1))["status"] == "ran"
    assert not (tmp_path / "first").exists()

    # The same file, unchanged: the grant answers.
    (tmp_path / "run.sh").write_text(script(tmp_path, "first"))
    await qa.say(ask("bash run.sh"))
    assert (await wait_tool_result(qa, 2))["status"] == "ran" and len(prompts(qa)) == 1

    # The agent rewrites it: the same text is asked again, and nothing ran meanwhile.
    await qa.say(write("run.sh", script(tmp_path, "second")))
    assert "error" not in await wait_tool_result(qa, 3)
    await qa.say(ask("bash run.sh"))
    (_, again) = await wait_prompts(qa, 2)
    assert (tmp_path / "second" / "keep.txt").exists()
    await qa.click(f"ap:{prompt_id(again)}:d")
    assert (await wait_tool_result(qa, 4))["status"] == "denied"
    assert (tmp_path / "second" / "keep.txt").exists()
    assert (await row(runner, prompt_id(again)))["status"] == "denied"


async def test_approvals_allow_does_not_cover_a_script_the_agent_can_rewrite(make_runner: Any,
                                                                           tmp_path: Path) -> None:
    _runner, qa = await make_runner(base(tmp_path, allow=["bash run.sh", "rm -rf */allowed"]))
    (tmp_path / "run.sh").write_text(script(tmp_path, "victim"))
    await qa.say(ask("bash run.sh"))
    (prompt,) = await wait_prompts(qa, 1)
    await qa.click(f"ap:{prompt_id(prompt)}:d")
    assert (await wait_tool_result(qa, 1))["status"] == "denied"
    assert (tmp_path / "victim" / "keep.txt").exists()
    # A listed command that runs no such file still goes without asking.
    (tmp_path / "allowed").mkdir()
    await qa.say(ask(f"rm -rf {tmp_path / 'allowed'}"))
    assert (await wait_tool_result(qa, 2))["status"] == "ran" and len(prompts(qa)) == 1


async def test_a_file_changed_between_the_prompt_and_the_run_voids_the_approval(make_runner: Any, fake_llm: Any,
                                                                               tmp_path: Path) -> None:
    """One batch: run.sh, then a rewrite of it, then run.sh again. Both prompts are up before anything runs and
    the session grant of the first answers the second; the rewrite in between voids that."""
    runner, qa = await make_runner(base(tmp_path))
    (tmp_path / "run.sh").write_text(script(tmp_path, "first"))
    rewritten = script(tmp_path, "second")
    fake_llm.script(ToolCalls([ToolCall("terminal", {"command": "bash run.sh"}),
                               ToolCall("write_file", {"path": "run.sh", "content": rewritten}),
                               ToolCall("terminal", {"command": "bash run.sh"})]), Reply("done"))
    await qa.say("run it, change it, run it")
    shown = await wait_prompts(qa, 2)
    await qa.click(f"ap:{prompt_id(shown[0])}:s")
    await qa.wait_for(lambda t: "done" in t)
    tool_msgs = [json.loads(m["content"]) for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert tool_msgs[0]["status"] == "ran" and tool_msgs[2]["status"] == "denied"
    assert "changed after approval was asked" in tool_msgs[2]["error"] and "run.sh" in tool_msgs[2]["error"]
    assert not (tmp_path / "first").exists() and (tmp_path / "second" / "keep.txt").exists()
    assert not runner.approvals.pending


async def test_a_reason_read_from_a_file_the_sandbox_hides_is_withheld(make_runner: Any, tmp_path: Path) -> None:
    runner, qa = await make_runner(base(tmp_path))
    word = "hidden-word-7d1f0c"
    hidden = runner.paths.home / "x.sh"
    hidden.write_text(f"rm -rf /srv/{word}\ndocker run -v /srv/{word}:/x img\n")
    await qa.say(ask(f"bash {hidden}"))
    (prompt,) = await wait_prompts(qa, 1)
    assert word not in prompt.text and HIDDEN_READ in prompt.text
    assert word not in (await row(runner, prompt_id(prompt)))["reason"]
    await qa.click(f"ap:{prompt_id(prompt)}:d")
    await wait_tool_result(qa, 1)


def test_the_key_follows_every_file_the_verdict_was_read_from(tmp_path: Path) -> None:
    from gateway.approvals import reads
    from gateway.kernel.shown import command_hash

    ws = str(tmp_path)
    assert reads.take("rm -rf /srv/x", ws).key(command_hash("rm -rf /srv/x")) == command_hash("rm -rf /srv/x")
    (tmp_path / "run.sh").write_text(". ./lib.sh\n")
    (tmp_path / "lib.sh").write_text("rm -rf /srv/a\n")
    (tmp_path / "big.sh").write_text("#" * 300_000 + "\nrm -rf /srv/b\n")  # too big for the classifier to read
    keys = set()
    for command in ("bash run.sh", "bash -c 'bash run.sh'", "X=run.sh; bash \"$X\"", "bash big.sh"):
        before = reads.take(command, ws)
        assert before.files, command
        keys.add(before.key(command_hash(command)))
        target = {"bash big.sh": "big.sh"}.get(command, "lib.sh")
        original = (tmp_path / target).read_text()
        (tmp_path / target).write_text(original.replace("/srv/", "/srv/z"))
        after = reads.take(command, ws)
        assert after.key(command_hash(command)) != before.key(command_hash(command)), command
        (tmp_path / target).write_text(original)
        assert reads.take(command, ws) == before, command
    assert len(keys) == 4


def test_recording_sees_only_its_own_thread(tmp_path: Path) -> None:
    import threading

    from gateway.approvals import reads

    (tmp_path / "mine").write_text("x")
    (tmp_path / "theirs").write_text("y")
    with reads.recording() as opened:
        t = threading.Thread(target=(tmp_path / "theirs").read_text)
        t.start()
        t.join()
        (tmp_path / "mine").read_text()
    assert opened == [str(tmp_path / "mine")]
    (tmp_path / "mine").read_text()
    assert opened == [str(tmp_path / "mine")]
