"""Each platform's ``check_credentials`` hook (what `herald doctor` asks) against its protocol fake: the bot's
name for a good token, ``CredentialRejected`` with the platform's words (and never the token) for a bad one."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.platforms import adapter_class, config_class
from gateway.platforms.base import CredentialRejected
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.slack_api import FakeSlack


async def _check(platform: str, monkeypatch: pytest.MonkeyPatch, token: str, **config: Any) -> str | None:
    monkeypatch.setenv("BOT_TOKEN_FOR_TEST", token)
    key = "bot_token_env" if platform == "slack" else "token_env"
    section = config_class(platform)(enabled=True, **{key: "BOT_TOKEN_FOR_TEST"}, **config)
    return await adapter_class(platform).check_credentials(section, 5.0)


async def test_discord(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeDiscord()
    await fake.start()
    try:
        who = await _check("discord", monkeypatch, fake.token, api_base_url=fake.api_url)
        assert who is not None and who.startswith("bot ")
        wrong = "MTAxMjM0NTY3ODkwMTIzNDU2Nzg5.GAbcde.wrongwrongwrongwrongwrongwrong0"
        with pytest.raises(CredentialRejected, match="Unauthorized") as caught:
            await _check("discord", monkeypatch, wrong, api_base_url=fake.api_url)
        assert wrong not in str(caught.value)
    finally:
        await fake.stop()


async def test_slack(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSlack()
    await fake.start()
    try:
        monkeypatch.delenv("SLACK_APP_TOKEN", raising=False)
        assert await _check("slack", monkeypatch, fake.bot_token, api_base_url=fake.api_url) == "bot herald in Herald"
        with pytest.raises(CredentialRejected, match="invalid_auth"):
            await _check("slack", monkeypatch, "xoxb-wrong-0000000000", api_base_url=fake.api_url)
    finally:
        await fake.stop()


async def test_slack_socket_mode_checks_the_app_level_token(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSlack()
    await fake.start()
    try:
        monkeypatch.setenv("APP_TOKEN_FOR_TEST", fake.app_token)
        who = await _check("slack", monkeypatch, fake.bot_token, api_base_url=fake.api_url,
                           app_token_env="APP_TOKEN_FOR_TEST")
        assert who == "bot herald in Herald; app-level token accepted (socket mode)"
        assert fake.calls.count("apps.connections.open") == 1  # asked for an address; nothing connected
        wrong = "xapp-1-A0000-wrongwrongwrong"
        monkeypatch.setenv("APP_TOKEN_FOR_TEST", wrong)
        with pytest.raises(CredentialRejected, match="app-level token in APP_TOKEN_FOR_TEST: invalid_auth") as caught:
            await _check("slack", monkeypatch, fake.bot_token, api_base_url=fake.api_url,
                         app_token_env="APP_TOKEN_FOR_TEST")
        assert wrong not in str(caught.value)
        # In http mode the app-level token is not used, so it is not asked about.
        calls = len(fake.calls)
        assert await _check("slack", monkeypatch, fake.bot_token, api_base_url=fake.api_url, mode="http",
                            app_token_env="APP_TOKEN_FOR_TEST") == "bot herald in Herald"
        assert "apps.connections.open" not in fake.calls[calls:]
    finally:
        await fake.stop()


def test_the_web_chat_has_nothing_to_check() -> None:
    import asyncio

    assert asyncio.run(adapter_class("web").check_credentials(config_class("web")(), 1.0)) is None


async def test_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fakes.matrix_api import BOT, FakeMatrix

    fake = FakeMatrix()
    await fake.start()
    try:
        cls, section = adapter_class("matrix"), config_class("matrix")

        async def check(**config: Any) -> str | None:
            return await cls.check_credentials(section(enabled=True, homeserver=fake.url, user_id=BOT, **config), 5.0)

        monkeypatch.setenv("MX_TOKEN_FOR_TEST", fake.bot_token)
        assert await check(access_token_env="MX_TOKEN_FOR_TEST") == f"{BOT}, device HERALDDEV"
        monkeypatch.setenv("MX_TOKEN_FOR_TEST", "syt_d3Jvbmc_wrongwrongwrongwrong_0000")
        with pytest.raises(CredentialRejected, match="M_UNKNOWN_TOKEN") as caught:
            await check(access_token_env="MX_TOKEN_FOR_TEST")
        assert "wrongwrong" not in str(caught.value)
        # A password alone: a real login, whose device is logged out again at once.
        monkeypatch.setenv("MX_PASSWORD_FOR_TEST", fake.users[BOT]["password"])
        tokens = set(fake.tokens)
        assert await check(access_token_env=None, password_env="MX_PASSWORD_FOR_TEST") == f"{BOT} (password accepted)"
        assert set(fake.tokens) == tokens
        monkeypatch.setenv("MX_PASSWORD_FOR_TEST", "not the password")
        with pytest.raises(CredentialRejected, match="refused the password in MX_PASSWORD_FOR_TEST"):
            await check(access_token_env=None, password_env="MX_PASSWORD_FOR_TEST")
        # The lock is on the account, whatever token or device connects to it.
        assert cls.credentials_of(section(homeserver=fake.url, user_id=BOT)) == [("matrix", f"{fake.url} {BOT}")]
    finally:
        await fake.stop()
