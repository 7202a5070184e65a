"""The OpenAI-compatible API through the ``openai`` SDK: models, answers plain and streamed, tools, usage."""

from __future__ import annotations

import asyncio

import pytest
from openai import APIStatusError, NotFoundError

from gateway.storage.tables import inbox
from tests.api.conftest import Api
from tests.fakes.llm import Reply, ToolCall, ToolCalls
from tests.support.polling import wait_until


async def answered(api: Api, n: int = 1) -> list[dict]:
    """The requests whose answer is delivered: the client may have it a moment before the row says so."""
    async def done() -> list[dict]:
        rows = [r for r in await api.inbox() if r["status"] == "done"]
        return rows if len(rows) >= n else []

    return await wait_until(done, what=f"{n} answered request(s)")


async def test_the_models_are_the_agent_and_each_model_it_may_use(start_api):
    api = await start_api(model={"choices": ["bigger-model"]})
    listed = [m.id async for m in api.client.models.list()]
    assert listed == ["herald", "herald/fake-model", "herald/bigger-model"]
    assert (await api.client.models.retrieve("herald/bigger-model")).id == "herald/bigger-model"
    with pytest.raises(NotFoundError):
        await api.client.models.retrieve("gpt-4o")


async def test_a_plain_answer_is_the_agents_and_is_stored_once(start_api, fake_llm):
    api = await start_api()
    completion = await api.client.chat.completions.create(
        model="herald", messages=[{"role": "user", "content": "hello there"}], temperature=0.3,
        extra_body={"some_vendor_field": {"x": 1}})
    assert completion.choices[0].message.content == "echo: hello there"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.total_tokens > 0
    (row,) = await answered(api)
    assert row["reply"] == "echo: hello there"
    assert row["payload"]["source"]["user_id"] == "tester"  # the key's holder is the sender
    (session,) = await api.sessions()
    assert await api.said(session["id"]) == [("user", "hello there"), ("assistant", "echo: hello there")]
    # The turn's model call was the agent's (its system prompt first), not a relay of the client's request.
    assert fake_llm.requests[-1]["messages"][0]["role"] == "system"


async def test_a_streamed_answer_assembled_from_its_chunks_is_the_stored_one(start_api, fake_llm):
    api = await start_api()
    first_seen = asyncio.Event()  # the model writes the rest only once the client has its first words
    fake_llm.script(Reply.streamed(["The answer ", "is forty-two, ", "as **always**."], chunk_delay=0.01,
                                   gate=first_seen))
    stream = await api.client.chat.completions.create(
        model="herald", messages=[{"role": "user", "content": "what is it?"}], stream=True,
        stream_options={"include_usage": True})
    pieces, usage, finish = [], None, None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                pieces.append(choice.delta.content)
                first_seen.set()
            finish = choice.finish_reason or finish
    assert "".join(pieces) == "The answer is forty-two, as **always**."
    assert pieces[0] == "The answer ", pieces  # written as the model wrote it, not in one piece at the end
    assert finish == "stop"
    assert usage is not None and usage.completion_tokens > 0
    (row,) = await answered(api)
    assert row["reply"] == "".join(pieces)


async def test_a_tool_using_turn_runs_the_agents_tool_and_shows_its_progress(start_api, fake_llm, tmp_path):
    api = await start_api()
    fake_llm.script(ToolCall("terminal", {"command": "echo from-the-sandbox"}), Reply("It printed from-the-sandbox."))
    stream = await api.client.chat.completions.create(
        model="herald", messages=[{"role": "user", "content": "run echo"}], stream=True)
    shown = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert shown.endswith("It printed from-the-sandbox.")
    assert "running" in shown and "echo from-the-sandbox" in shown  # the progress line came before the answer
    tool_result = next(m for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool")
    assert "from-the-sandbox" in tool_result["content"] and '"exit_code": 0' in tool_result["content"]
    (row,) = await answered(api)
    assert row["reply"] == "It printed from-the-sandbox."  # the progress line was shown, not stored


async def test_the_responses_api_answers_and_previous_response_id_continues_the_conversation(start_api, fake_llm):
    api = await start_api()
    first = await api.client.responses.create(model="herald", input="my name is Ada")
    assert first.output_text == "echo: my name is Ada" and first.id.startswith("resp_")
    second = await api.client.responses.create(model="herald", input="what is my name?",
                                               previous_response_id=first.id)
    assert second.output_text == "echo: what is my name?"
    # The model saw the first exchange: the same session went on.
    sent = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] != "system"]
    assert sent == ["my name is Ada", "echo: my name is Ada", "what is my name?"]
    assert len(await api.sessions()) == 1
    # Streamed, continuing the second answer.
    events = await api.client.responses.create(model="herald", input="and again?", previous_response_id=second.id,
                                               stream=True)
    deltas, completed = [], None
    async for event in events:
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
        elif event.type == "response.completed":
            completed = event.response
    assert "".join(deltas) == "echo: and again?" and completed is not None
    assert completed.output_text == "echo: and again?"
    # A response is kept: a client cut off before its end fetches it by id.
    assert (await api.client.responses.retrieve(completed.id)).output_text == "echo: and again?"
    with pytest.raises(NotFoundError):
        await api.client.responses.retrieve("resp_nope")
    assert len([m for m in fake_llm.requests[-1]["messages"] if m["role"] == "user"]) == 3


async def test_an_older_previous_response_id_branches_from_there(start_api, fake_llm, db_url):
    api = await start_api(db_url)
    first = await api.client.responses.create(model="herald", input="one")
    await api.client.responses.create(model="herald", input="two", previous_response_id=first.id)
    await api.client.responses.create(model="herald", input="two again", previous_response_id=first.id)
    sent = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] != "system"]
    assert sent == ["one", "echo: one", "two again"]
    older, newer = await api.sessions()
    assert newer["parent_id"] == older["id"] and older["end_reason"] == "forked"
    with pytest.raises(APIStatusError) as caught:
        await api.client.responses.create(model="herald", input="x", previous_response_id="resp_nope")
    assert caught.value.status_code == 400 and caught.value.body["code"] == "previous_response_not_found"


async def test_a_resent_history_continues_the_same_session(start_api, fake_llm):
    api = await start_api()
    history = [{"role": "system", "content": "You are a helpful assistant."},
               {"role": "user", "content": "first question"}]
    one = await api.client.chat.completions.create(model="herald", messages=history)
    history += [{"role": "assistant", "content": one.choices[0].message.content},
                {"role": "user", "content": "second question"}]
    await api.client.chat.completions.create(model="herald", messages=history)
    (session,) = await api.sessions()
    assert await api.said(session["id"]) == [("user", "first question"), ("assistant", "echo: first question"),
                                             ("user", "second question"), ("assistant", "echo: second question")]
    # The model got the stored history once, not the client's copy on top of it.
    sent = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] != "system"]
    assert sent == ["first question", "echo: first question", "second question"]


async def test_an_edited_history_forks_a_new_session_that_keeps_its_lineage(start_api, fake_llm, db_url):
    api = await start_api(db_url)
    history = [{"role": "user", "content": "start"}]
    history.append({"role": "assistant", "content": (await api.client.chat.completions.create(
        model="herald", messages=history)).choices[0].message.content})
    history.append({"role": "user", "content": "the original second"})
    await api.client.chat.completions.create(model="herald", messages=history)
    # The client edits its second message: the first exchange is kept, the second replaced.
    edited = [*history[:2], {"role": "user", "content": "the edited second"}]
    answer = await api.client.chat.completions.create(model="herald", messages=edited)
    assert answer.choices[0].message.content == "echo: the edited second"
    sent = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] != "system"]
    assert sent == ["start", "echo: start", "the edited second"]  # never mixed with the original second
    original, fork = await api.sessions()
    assert fork["parent_id"] == original["id"] and original["end_reason"] == "forked"
    assert ("user", "the original second") in await api.said(original["id"])  # the original stays whole
    # Going back to the original branch resumes it rather than forking again.
    await api.client.chat.completions.create(model="herald", messages=[
        *history, {"role": "assistant", "content": "echo: the original second"}, {"role": "user", "content": "third"}])
    assert len(await api.sessions()) == 2
    sent = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] != "system"]
    assert sent == ["start", "echo: start", "the original second", "echo: the original second", "third"]


async def test_a_history_herald_never_saw_is_the_context_of_a_new_session(start_api, fake_llm):
    api = await start_api()
    await api.client.chat.completions.create(model="herald", messages=[
        {"role": "user", "content": "from another server"}, {"role": "assistant", "content": "an old answer"},
        {"role": "user", "content": "go on"}])
    sent = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] != "system"]
    assert sent == ["from another server", "an old answer", "go on"]


async def test_a_pinned_session_takes_single_messages_and_the_model_choice_sticks(start_api, fake_llm):
    api = await start_api(model={"choices": ["bigger-model"]})
    pinned = {"X-Herald-Session": "notes"}
    await api.client.chat.completions.create(model="herald/bigger-model", extra_headers=pinned,
                                             messages=[{"role": "user", "content": "remember 7"}])
    assert fake_llm.requests[-1]["model"] == "bigger-model"
    await api.client.chat.completions.create(model="herald/bigger-model", extra_headers=pinned,
                                             messages=[{"role": "user", "content": "what was it?"}])
    sent = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] != "system"]
    assert sent == ["remember 7", "echo: remember 7", "what was it?"]
    (session,) = await api.sessions()
    assert session["model"] == "bigger-model"
    await api.client.chat.completions.create(model="herald", extra_headers=pinned,
                                             messages=[{"role": "user", "content": "back"}])
    assert fake_llm.requests[-1]["model"] == "fake-model"
    with pytest.raises(NotFoundError):
        await api.client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])


async def test_requests_the_api_cannot_take_are_answered_in_openais_shape(start_api):
    api = await start_api(api={"max_body_bytes": 2048})
    http = api.client._client  # the SDK's own httpx client: the same connection, the body as written here
    headers = {"Authorization": f"Bearer {api.key}"}
    missing = await http.post(f"{api.base_url}/chat/completions", json={"model": "herald"}, headers=headers)
    assert missing.status_code == 400
    assert missing.json()["error"] == {"message": "'messages' is a required property",
                                       "type": "invalid_request_error", "param": "messages", "code": None}
    assistant_last = await http.post(f"{api.base_url}/chat/completions", headers=headers, json={
        "model": "herald", "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})
    assert assistant_last.status_code == 400 and "last message" in assistant_last.json()["error"]["message"]
    broken = await http.post(f"{api.base_url}/chat/completions", content=b"{not json", headers=headers)
    assert broken.status_code == 400 and broken.json()["error"]["type"] == "invalid_request_error"
    big = await http.post(f"{api.base_url}/chat/completions", headers=headers, json={
        "model": "herald", "messages": [{"role": "user", "content": "x" * 4000}]})
    assert big.status_code == 413 and big.json()["error"]["code"] == "request_too_large"
    nowhere = await http.get(f"{api.base_url}/embeddings", headers=headers)
    assert nowhere.status_code == 404 and nowhere.json()["error"]["code"] == "unknown_url"
    assert await api.inbox() == []  # none of it reached the agent


async def test_usage_is_the_holders_identity(start_api):
    api = await start_api()
    await api.client.chat.completions.create(model="herald", messages=[{"role": "user", "content": "count me"}])
    from gateway.storage.tables import usage

    (row,) = await api.rows(usage)
    assert (row["platform"], row["user_id"]) == ("api", "tester")
    (turn,) = await api.rows(inbox, inbox.c.platform == "api")
    assert row["inbox_id"] == turn["id"]


async def test_a_turn_that_fails_is_an_error_not_a_hang(start_api, fake_llm):
    api = await start_api()
    fake_llm.script(Reply("first"))  # the fake model answers; the agent's crash is made below

    def crash(*_args, **_kw):
        raise RuntimeError("boom")

    api.runner.turns._call_agent = crash  # type: ignore[method-assign]
    with pytest.raises(APIStatusError) as caught:
        await api.client.chat.completions.create(model="herald", messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 500 and "went wrong" in caught.value.body["message"]
    await wait_until(lambda: api.inbox(), what="the row")


async def test_a_request_sent_again_under_its_idempotency_key_is_answered_once(start_api, fake_llm):
    api = await start_api()
    again = {"Idempotency-Key": "retry-me-1"}
    ask = [{"role": "user", "content": "only once please"}]
    first = await api.client.chat.completions.create(model="herald", messages=ask, extra_headers=again)
    second = await api.client.chat.completions.create(model="herald", messages=ask, extra_headers=again)
    assert first.choices[0].message.content == second.choices[0].message.content == "echo: only once please"
    assert len(await api.inbox()) == 1
    assert sum(1 for r in fake_llm.requests if r["messages"][-1]["content"] == "only once please") == 1


async def test_a_conversation_the_client_goes_on_with_is_not_reset_as_idle(start_api, fake_llm):
    from sqlalchemy import update

    from gateway.storage.tables import sessions

    api = await start_api(sessions={"reset": {"mode": "idle", "idle_minutes": 1}})
    history = [{"role": "user", "content": "before lunch"}]
    history.append({"role": "assistant", "content": (await api.client.chat.completions.create(
        model="herald", messages=history)).choices[0].message.content})
    (session,) = await api.sessions()
    # Two hours pass (the row says so, and this daemon's cache forgets it).
    await api.runner.store.run_write(lambda c: c.execute(
        update(sessions).where(sessions.c.id == session["id"]).values(updated_at=session["updated_at"] - 7200)))
    api.runner.sessions.forget(session["key"])
    await api.client.chat.completions.create(model="herald",
                                             messages=[*history, {"role": "user", "content": "after lunch"}])
    assert [s["id"] for s in await api.sessions()] == [session["id"]]
    sent = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] != "system"]
    assert sent == ["before lunch", "echo: before lunch", "after lunch"]


async def test_the_sdks_stream_helpers_assemble_the_events_into_the_answer(start_api):
    """The SDK's own accumulators check the events' order and shapes (items and parts opened before deltas)."""
    api = await start_api()
    async with api.client.responses.stream(model="herald", input="hello helper") as stream:
        final = await stream.get_final_response()
    assert (final.status, final.output_text) == ("completed", "echo: hello helper")
    async with api.client.chat.completions.stream(
            model="herald", messages=[{"role": "user", "content": "chat helper"}]) as chat:
        completion = await chat.get_final_completion()
    assert completion.choices[0].message.content == "echo: chat helper"


async def test_words_before_a_tool_call_are_not_taken_for_the_answer_without_progress_lines(start_api, fake_llm):
    api = await start_api(display={"verbose": "off"})
    fake_llm.script(ToolCalls([ToolCall("terminal", {"command": "echo quiet"})], text="Let me look."),
                    Reply("It said quiet."))
    stream = await api.client.chat.completions.create(
        model="herald", messages=[{"role": "user", "content": "look quietly"}], stream=True)
    shown = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert shown == "Let me look.\n\nIt said quiet."  # the answer once, in a paragraph of its own
    (row,) = await answered(api)
    assert row["reply"] == "It said quiet."


async def test_two_end_users_opening_with_the_same_words_have_conversations_of_their_own(start_api):
    api = await start_api()
    hello = [{"role": "user", "content": "hello"}]
    await api.client.chat.completions.create(model="herald", messages=hello, user="ada")
    await api.client.chat.completions.create(model="herald", messages=hello, user="bob")
    await api.client.chat.completions.create(model="herald", messages=hello,
                                             extra_headers={"X-OpenWebUI-User-Id": "u-7"})
    assert len({s["key"] for s in await api.sessions()}) == 3
