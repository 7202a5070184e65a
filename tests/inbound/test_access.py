"""Who may talk to the agent: the allowlist matrix through the real runner (an untrusted QA platform)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.config import ConfigError, parse_config
from gateway.inbound.access import AccessControl
from gateway.platforms.base import Source
from tests.support.qa_channel import QAAdapter, UntrustedQAAdapter

FRIEND, BOSS, STRANGER = "friend", "boss", "stranger"
ACCESS = {"allowed_users": [f"qa2:{FRIEND}"], "admins": [f"qa2:{BOSS}"]}


async def start(make_runner: Any, **access: Any) -> tuple[Any, UntrustedQAAdapter]:
    return await make_runner({"access": {**ACCESS, **access}}, adapters=[UntrustedQAAdapter])


async def settle(qa: UntrustedQAAdapter) -> None:
    """Let spawned work (pairing answers, notices) finish: it is quick, and nothing else is pending."""
    for _ in range(3):
        await asyncio.sleep(0.1)


def chat_for(user: str, chat_type: str) -> str:
    return f"dm-{user}" if chat_type == "dm" else "group-1"


# (chat type, sender) -> is a plain message answered by the model?
MATRIX = [
    ("dm", FRIEND, True), ("dm", BOSS, True), ("dm", STRANGER, False),
    ("group", FRIEND, True), ("group", BOSS, True), ("group", STRANGER, False),
]


@pytest.mark.parametrize(("chat_type", "user", "answered"), MATRIX)
async def test_plain_messages_reach_the_model_only_from_allowed_users(make_runner, fake_llm, chat_type, user,
                                                                      answered):
    runner, qa = await start(make_runner)
    chat = chat_for(user, chat_type)
    await qa.say(f"hello from {user}", chat_id=chat, user_id=user, chat_type=chat_type)
    if answered:
        await qa.wait_for(lambda t: f"echo: hello from {user}" in t, chat_id=chat)
    else:
        await settle(qa)
        assert all(f"hello from {user}" not in str(r["messages"]) for r in fake_llm.requests)
        assert runner.counters.messages_denied == 1
        texts = qa.texts(chat)
        if chat_type == "dm":
            # An unknown DM gets a pairing code and nothing else.
            assert len(texts) == 1 and "pairing code" in texts[0]
        else:
            assert texts == []  # unknown group senders: silence


# (chat type, sender) -> what /pair (an admin-only command) does
ADMIN_MATRIX = [
    ("dm", FRIEND, "for admins only"), ("dm", BOSS, "not a waiting code"), ("dm", STRANGER, None),
    ("group", FRIEND, "for admins only"), ("group", BOSS, "not a waiting code"), ("group", STRANGER, None),
]


@pytest.mark.parametrize(("chat_type", "user", "expected"), ADMIN_MATRIX)
async def test_admin_only_commands_are_run_for_admins_and_refused_with_a_reason_to_others(
        make_runner, fake_llm, chat_type, user, expected):
    _runner, qa = await start(make_runner)
    chat = chat_for(user, chat_type)
    await qa.say("/pair ABCD2345", chat_id=chat, user_id=user, chat_type=chat_type)
    if expected is None:
        await settle(qa)
        # A stranger's command is denied like any message: never run, never "admins only".
        assert all("admins only" not in t and "waiting code" not in t for t in qa.texts(chat))
    else:
        await qa.wait_for(lambda t: any(expected in x for x in t), chat_id=chat)
    # Everyone allowed may still use the ordinary commands.
    if user != STRANGER:
        await qa.say("/status", chat_id=chat, user_id=user, chat_type=chat_type)
        await qa.wait_for(lambda t: any(x.startswith("Idle.") for x in t), chat_id=chat)
    assert fake_llm.requests == []


async def test_unknown_dm_ignore_says_nothing(make_runner, fake_llm):
    runner, qa = await start(make_runner, unknown_dm="ignore")
    await qa.say("anyone there?", chat_id="dm-s", user_id=STRANGER)
    await settle(qa)
    assert qa.texts() == [] and fake_llm.requests == []
    assert runner.counters.messages_denied == 1


async def test_open_groups_let_anyone_talk_there_but_not_in_dms_and_not_run_admin_commands(make_runner, fake_llm):
    _runner, qa = await start(make_runner, group_policy="open")
    await qa.say("hi all", chat_id="g", user_id=STRANGER, chat_type="group")
    await qa.wait_for(lambda t: "echo: hi all" in t, chat_id="g")
    await qa.say("/pair ABCD2345", chat_id="g", user_id=STRANGER, chat_type="group")
    await qa.wait_for(lambda t: any("for admins only" in x for x in t), chat_id="g")
    await qa.say("psst", chat_id="dm-s", user_id=STRANGER)
    await qa.wait_for(lambda t: len(t) == 1, chat_id="dm-s")
    assert "pairing code" in qa.texts("dm-s")[0]
    assert all("psst" not in str(r["messages"]) for r in fake_llm.requests)


async def test_a_strangers_button_press_is_refused_by_the_runner(make_runner):
    runner, qa = await start(make_runner)
    calls: list[str] = []

    async def handler(adapter: Any, press: Any) -> str:
        calls.append(press.source.user_id)
        return "done"

    runner.inbound.buttons["t"] = handler
    assert await qa.click("t:1", user_id=STRANGER) == "You are not allowed to use this bot."
    assert await qa.click("t:1", user_id=FRIEND) == "done"
    assert calls == [FRIEND]


async def test_the_trusted_web_style_platform_is_the_owner(make_runner, fake_llm):
    _runner, qa = await make_runner(adapters=[QAAdapter])  # trusted: the sender proved the owner's token
    await qa.say("/pair ABCD2345", user_id="whoever")
    await qa.wait_for(lambda t: any("not a waiting code" in x for x in t))


async def test_the_hot_path_check_never_touches_the_database(make_runner, fake_llm):
    runner, _qa = await start(make_runner)
    reads: list[Any] = []
    real = runner.store.run_read

    async def counting(op: Any) -> Any:
        reads.append(op)
        return await real(op)

    runner.store.run_read = counting  # type: ignore[method-assign]
    source = Source("qa2", "dm-f", FRIEND)
    assert all(runner.access.allowed(source) for _ in range(1000))
    assert not runner.access.allowed(Source("qa2", "dm-s", STRANGER))
    assert reads == []


def test_config_sets_combine_global_and_per_platform_lists() -> None:
    cfg = parse_config({
        "access": {"allowed_users": ["telegram:5", "Web:x"], "admins": ["telegram:7"]},
        "platforms": {"telegram": {"allowed_users": [6], "admins": ["8"]}},
    })
    control = AccessControl(cfg)
    for uid, allowed, admin in (("5", True, False), ("6", True, False), ("7", True, True), ("8", True, True),
                                ("9", False, False)):
        src = Source("telegram", "c", uid)
        assert control.allowed(src) is allowed
        assert control.admin(src) is admin
    assert control.allowed(Source("web", "c", "x"))  # platform names are case-insensitive in entries
    assert not control.allowed(Source("discord", "c", "5"))  # an id is only allowed on its own platform
    control.set_paired(frozenset({"telegram:9"}))
    assert control.allowed(Source("telegram", "c", "9")) and not control.admin(Source("telegram", "c", "9"))


@pytest.mark.parametrize("group_policy", ["allowlist", "open"])
def test_allowed_channels_limit_groups_but_not_dms(group_policy) -> None:
    cfg = parse_config({
        "access": {"group_policy": group_policy},
        "platforms": {"telegram": {"allowed_users": [5], "allowed_channels": [-100, "-300"]}},
    })
    control = AccessControl(cfg)
    assert control.allowed(Source("telegram", "-100", "5", chat_type="group"))
    assert control.allowed(Source("telegram", "-300", "5", chat_type="channel"))
    assert not control.allowed(Source("telegram", "-200", "5", chat_type="group"))  # allowed user, other group
    assert control.allowed(Source("telegram", "5", "5"))  # DMs are not channels
    assert not control.allowed(Source("telegram", "6", "6"))  # ... but still need an allowed user
    # In an open group, anyone may talk — in the allowed channels only.
    assert control.allowed(Source("telegram", "-100", "9", chat_type="group")) is (group_policy == "open")
    assert not control.allowed(Source("telegram", "-200", "9", chat_type="group"))


def test_allowed_roles_admit_holders_on_their_platform_only() -> None:
    """A platform's ``allowed_roles`` admit whoever the adapter saw holding one (``Source.roles``): the check
    stays generic, the adapter reads the roles with the event."""
    cfg = parse_config({"platforms": {"discord": {"allowed_roles": [42, "43"], "allowed_channels": ["100"]}}})
    control = AccessControl(cfg)
    member = Source("discord", "100", "9", chat_type="group", scope="1", roles=("7", "43"))
    assert control.allowed(member) and control.known(member) and not control.admin(member)
    assert not control.allowed(Source("discord", "100", "9", chat_type="group", scope="1", roles=("7",)))
    assert not control.allowed(Source("discord", "200", "9", chat_type="group", scope="1", roles=("42",)))
    assert not control.allowed(Source("telegram", "100", "9", chat_type="group", roles=("42",)))
    # Roles survive the inbox: a recovered message is judged the same way.
    assert Source.from_dict(member.to_dict()) == member
    assert "roles" not in Source("discord", "100", "9").to_dict()


def test_allowed_users_entries_must_name_the_platform() -> None:
    with pytest.raises(ConfigError, match=r"access\.allowed_users.*platform:user_id"):
        parse_config({"access": {"allowed_users": ["12345"]}})
    with pytest.raises(ConfigError, match=r"access\.unknown_dm"):
        parse_config({"access": {"unknown_dm": "shout"}})


@pytest.mark.parametrize("group_policy", ["allowlist", "open"])
async def test_users_sessions_never_mix_in_groups_or_dms(make_runner, fake_llm, group_policy):
    _runner, qa = await make_runner({"access": {"allowed_users": ["qa2:alice", "qa2:bob"],
                                                "group_policy": group_policy}}, adapters=[UntrustedQAAdapter])
    for n in range(3):
        for user in ("alice", "bob"):
            for chat, chat_type in (("g", "group"), (f"dm-{user}", "dm")):
                text = f"{user}-says-{n}-in-{chat}"
                await qa.say(text, chat_id=chat, user_id=user, chat_type=chat_type)
                await qa.wait_for(lambda t, text=text: f"echo: {text}" in t, chat_id=chat)
    assert len(fake_llm.requests) == 12
    for request in fake_llm.requests:
        contents = [str(m.get("content") or "") for m in request["messages"] if m["role"] != "system"]
        me = contents[-1].split("-says-")[0]
        other = "bob" if me == "alice" else "alice"
        assert all(f"{other}-says" not in c for c in contents), (me, contents)
        # Every earlier turn in the context is this user's, from this same chat.
        chat = contents[-1].split("-in-")[1]
        assert all(c.endswith(f"-in-{chat}") for c in contents), contents
