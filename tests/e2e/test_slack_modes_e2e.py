"""The real ``herald run`` with Slack in either mode and only that mode's secrets in its environment: Socket Mode
with the bot and app-level tokens, HTTP mode with the bot token and the signing secret. It starts, connects and
is ready."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.loop_thread import ServedInThread
from tests.fakes.slack_api import FakeSlack

pytestmark = pytest.mark.e2e


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    fake = FakeSlack()
    served = ServedInThread(fake)
    served.start()
    try:
        yield fake
    finally:
        served.stop()


@pytest.mark.parametrize("mode", ["socket", "http"])
def test_herald_run_starts_with_only_the_secrets_of_its_mode(make_herald, slack: FakeSlack, mode: str) -> None:
    herald = make_herald({"platforms": {"slack": {"enabled": True, "mode": mode, "api_base_url": slack.api_url}}},
                         start=False)
    for name in ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET"):
        herald.env.pop(name, None)
    herald.env["SLACK_BOT_TOKEN"] = slack.bot_token
    if mode == "socket":
        herald.env["SLACK_APP_TOKEN"] = slack.app_token
    else:
        herald.env["SLACK_SIGNING_SECRET"] = slack.signing_secret
    herald.start()  # returns once /readyz answers 200: every adapter, Slack included, is connected
    ready = herald.get("/readyz", auth=False)
    assert ready.status == 200, ready.body
    assert slack.connections_opened == (1 if mode == "socket" else 0)
