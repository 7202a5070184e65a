"""The conformance suite's fixture: every test runs once per platform driver."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes.llm import FakeLLM
from tests.platforms.conformance.discord_driver import DiscordDriver
from tests.platforms.conformance.driver import PlatformDriver
from tests.platforms.conformance.matrix_driver import MatrixDriver
from tests.platforms.conformance.slack_driver import SlackHttpDriver, SlackSocketDriver
from tests.platforms.conformance.telegram_driver import TelegramDriver, TelegramWebhookDriver
from tests.platforms.conformance.web_driver import WebDriver
from tests.platforms.conformance.whatsapp_driver import WhatsAppDriver

# One line per platform (per way of connecting to it): an adapter lands once its driver passes the suite.
DRIVERS: dict[str, type[PlatformDriver]] = {
    "telegram": TelegramDriver,
    "telegram-webhook": TelegramWebhookDriver,
    "web": WebDriver,
    "slack-socket": SlackSocketDriver,
    "slack-http": SlackHttpDriver,
    "discord": DiscordDriver,
    "whatsapp": WhatsAppDriver,
    "matrix": MatrixDriver,
}


@pytest.fixture(params=list(DRIVERS))
async def driver(request: pytest.FixtureRequest, tmp_path: Path, fake_llm: FakeLLM,
                 monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[PlatformDriver]:
    made = DRIVERS[request.param](tmp_path, fake_llm, monkeypatch)
    await made.open()
    try:
        yield made
    finally:
        await made.close()
