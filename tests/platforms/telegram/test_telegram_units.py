"""Telegram pieces without a network: formatting, splitting, error mapping, config, the credential lock."""

from __future__ import annotations

import pytest

from gateway.cluster.locks import CredentialLock, CredentialLocked
from gateway.config import ConfigError, parse_config
from gateway.kernel.chunking import chunk_text, utf16_len
from gateway.platforms.base import PermanentError, RateLimited, TransientError
from gateway.platforms.telegram.outbound import TelegramOutbound, split_formatted, to_entities
from gateway.platforms.telegram.transport import file_base_url, map_error


@pytest.mark.parametrize("markdown", [
    "plain", "**unclosed bold", "_under_score_ names like snake_case_var", "`a` ``b`` ```c",
    "[link](not a url) [x](http://ok.example)", "<b>html</b> & <i>", "# H\n## H2\n> q\n- a\n  - b\n1. c",
    "| a | b |\n|---|---|\n| 1 | 2 |", "```\nunterminated code", "😀" * 10, "\\*escaped\\*", "",
])
def test_conversion_never_raises_and_entities_fit_the_text(markdown: str) -> None:
    text, entities = to_entities(markdown)
    size = utf16_len(text)
    for e in entities:
        assert e["offset"] >= 0 and e["length"] > 0 and e["offset"] + e["length"] <= size


def test_chunked_markdown_converts_to_pieces_within_the_limit() -> None:
    body = "\n".join(f"x = {i}  # 😀 emoji counts twice in UTF-16" for i in range(600))
    markdown = f"# Title\n\n```python\n{body}\n```\n" + "end " * 2000
    for chunk in chunk_text(markdown, 4096, TelegramOutbound(lambda: None).measure):
        for text, entities in split_formatted(*to_entities(chunk)):
            assert utf16_len(text) <= 4096
            assert all(e["offset"] + e["length"] <= utf16_len(text) for e in entities)


def test_split_formatted_splits_an_oversized_conversion() -> None:
    text, entities = to_entities("**" + "a" * 5000 + "**")
    parts = split_formatted(text, entities, 4096)
    assert len(parts) == 2 and "".join(p[0] for p in parts) == "a" * 5000
    assert all(p[1] and p[1][0]["type"] == "bold" for p in parts)


def test_error_mapping() -> None:
    from telegram import error as tg

    assert isinstance(map_error(tg.RetryAfter(7)), RateLimited)
    assert map_error(tg.RetryAfter(7)).retry_after == 7  # type: ignore[attr-defined]
    assert isinstance(map_error(tg.Forbidden("bot was blocked by the user")), PermanentError)
    assert isinstance(map_error(tg.BadRequest("Chat not found")), PermanentError)
    assert isinstance(map_error(tg.TimedOut()), TransientError)
    assert isinstance(map_error(tg.NetworkError("connection reset")), TransientError)


def test_file_url_follows_the_api_root() -> None:
    assert file_base_url("http://127.0.0.1:8081/bot") == "http://127.0.0.1:8081/file/bot"
    assert file_base_url("https://api.telegram.org/bot") == "https://api.telegram.org/file/bot"


def test_allowed_users_take_numbers_and_numeric_strings() -> None:
    cfg = parse_config({"platforms": {"telegram": {"allowed_users": [1, "22", " 333 "]}}})
    assert cfg.platforms.telegram.allowed_users == ["1", "22", "333"]
    with pytest.raises(ConfigError, match=r"platforms\.telegram\.allowed_users\.0"):
        parse_config({"platforms": {"telegram": {"allowed_users": ["@alice"]}}})
    with pytest.raises(ConfigError, match=r"platforms\.telegram\.mode"):
        parse_config({"platforms": {"telegram": {"mode": "push"}}})


def test_telegram_token_env_is_masked_only_when_enabled() -> None:
    from gateway.config import secret_env_names

    on = parse_config({"platforms": {"telegram": {"enabled": True}}})
    assert {"TELEGRAM_BOT_TOKEN", "TELEGRAM_WEBHOOK_SECRET"} <= set(secret_env_names(on))
    assert "TELEGRAM_BOT_TOKEN" not in secret_env_names(parse_config({}))


def test_credential_lock_refuses_a_second_holder_and_names_the_first(tmp_path) -> None:
    import os

    first = CredentialLock("telegram", "123:abc", tmp_path)
    second = CredentialLock("telegram", "123:abc", tmp_path)
    other = CredentialLock("telegram", "456:def", tmp_path)
    first.acquire()
    other.acquire()
    with pytest.raises(CredentialLocked) as info:
        second.acquire()
    assert info.value.holder_pid == os.getpid() and f"pid {os.getpid()}" in str(info.value)
    assert "123:abc" not in str(info.value)  # the credential itself is never shown
    first.release()
    second.acquire()
    second.release()
    other.release()
    first.release()  # idempotent
