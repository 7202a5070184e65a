"""Files out, exactly once across a SIGKILL between the upload and the outbox update: the real ``herald run``
sends a reply with two files (a document, then a photo) through each platform's fake; the fake takes the
document and never answers, the daemon is SIGKILLed right then, and a fresh process delivers what is left.

The text is not sent again and the photo arrives once. The document's upload was cut off before it was
recorded, so it is sent again under the same key: where the platform de-duplicates with it (Discord's nonce)
it shows once; where it cannot (Telegram, Slack) the chat is told first that it may repeat, as for text.
(The web chat's "upload" is a write of the daemon's own, de-duplicated by the same key: tests/platforms/web/
test_web_files.py resumes a delivery cut off at that point.)
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.outbound.delivery import MAYBE_REPEATED
from tests.e2e import conftest as e2e
from tests.e2e.conftest import API_KEY, Herald, base_config, deep_merge
from tests.fakes.llm import FakeLLMThread, Reply, ToolCall
from tests.support.media import image_bytes
from tests.support.polling import wait_until_sync

REPORT = b"day,sales\nmon,3\ntue,5\n"
CHART = image_bytes(120, 60)
ANSWER = "Here are the report and the chart."


class Platform:
    """One platform's side of the test: its fake in a thread, how a user asks, what arrived in order."""

    name = ""
    dedupes = False  # a resent upload under the same key shows once

    def start(self) -> tuple[dict[str, Any], dict[str, str]]:  # (config of the platform, environment)
        raise NotImplementedError

    def ask(self, text: str) -> None:
        raise NotImplementedError

    def hold(self, on: bool) -> None:
        self.fake.call(lambda f: setattr(f, "hold_uploads", on))

    def timeline(self) -> list[tuple[str, Any]]:
        """What the chat got, in order: ("text", words) and ("file", (name, bytes))."""
        raise NotImplementedError

    def stop(self) -> None:
        self.fake.stop()


class Telegram(Platform):
    name = "telegram"

    def start(self) -> tuple[dict[str, Any], dict[str, str]]:
        from tests.fakes.telegram_api import FakeTelegramThread

        self.fake = FakeTelegramThread()
        self.fake.start()
        return ({"enabled": True, "base_url": self.fake.base_url, "allowed_users": [4242]},
                {"TELEGRAM_BOT_TOKEN": self.fake.token})

    def ask(self, text: str) -> None:
        self.fake.call(lambda f: f.user_message(4242, 4242, text))

    def timeline(self) -> list[tuple[str, Any]]:
        def read(f: Any) -> list[tuple[int, str, Any]]:
            return ([(m.message_id, "text", m.text) for m in f.sent]
                    + [(u.message_id, "file", (u.filename, u.content)) for u in f.uploads])

        return [(kind, what) for _id, kind, what in sorted(self.fake.call(read), key=lambda e: e[0])]


class Discord(Platform):
    name = "discord"
    dedupes = True

    def start(self) -> tuple[dict[str, Any], dict[str, str]]:
        from tests.fakes.discord_api import FakeDiscordThread

        self.fake = FakeDiscordThread()
        self.fake.start()
        self.user = 111_000_000_000_000_001
        self.channel = self.fake.call(lambda f: f.dm(self.user))
        return ({"enabled": True, "api_base_url": self.fake.call(lambda f: f.api_url),
                 "gateway_url": self.fake.call(lambda f: f.gateway_url), "allowed_users": [self.user]},
                {"DISCORD_BOT_TOKEN": self.fake.call(lambda f: f.token)})

    def ask(self, text: str) -> None:
        self.fake.call(lambda f: f.user_message(self.channel, self.user, text))

    def timeline(self) -> list[tuple[str, Any]]:
        def read(f: Any) -> list[tuple[str, Any]]:
            out: list[tuple[str, Any]] = []
            for m in sorted(f.sent_in(self.channel), key=lambda m: m.id):
                out += [("file", entry) for entry in m.files] if m.files else [("text", m.content)]
            return out

        return self.fake.call(read)


class Slack(Platform):
    name = "slack"

    def start(self) -> tuple[dict[str, Any], dict[str, str]]:
        from tests.fakes.slack_api import FakeSlackThread

        self.fake = FakeSlackThread()
        self.fake.start()
        tokens = self.fake.call(lambda f: (f.bot_token, f.app_token, f.signing_secret))
        return ({"enabled": True, "api_base_url": self.fake.call(lambda f: f.api_url), "allowed_users": ["U0ALICE"]},
                {"SLACK_BOT_TOKEN": tokens[0], "SLACK_APP_TOKEN": tokens[1], "SLACK_SIGNING_SECRET": tokens[2]})

    def ask(self, text: str) -> None:
        async def say(f: Any) -> None:
            await f.wait_connected()
            await f.deliver_socket("events_api", f.message("D0ALICE", "U0ALICE", text))

        self.fake.call(say, timeout=20)

    def timeline(self) -> list[tuple[str, Any]]:
        def read(f: Any) -> list[tuple[float, str, Any]]:
            return ([(float(m.ts), "text", m.text) for m in f.sent if m.channel == "D0ALICE"]
                    + [(float(s.ts), "file", (s.name, s.content)) for s in f.shared])

        return [(kind, what) for _ts, kind, what in sorted(self.fake.call(read), key=lambda e: e[0])]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("platform", [Telegram, Discord, Slack], ids=lambda p: p.name)
def test_files_arrive_once_across_a_sigkill_between_upload_and_outbox(platform: Callable[[], Platform],
                                                                      tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # Two platform SDKs starting on a machine busy with other tests can take longer than the usual wait.
    monkeypatch.setattr(e2e, "START_TIMEOUT", 60.0)
    side = platform()
    llm = FakeLLMThread()
    llm.start()
    section, env_extra = side.start()
    home = tmp_path / "home"
    (home / "workspace").mkdir(parents=True)
    (home / "workspace" / "report.csv").write_bytes(REPORT)
    (home / "workspace" / "chart.png").write_bytes(CHART)
    cfg = deep_merge(base_config(llm), {"tools": {"terminal": {"sandbox": "none"}},
                                        "platforms": {"web": {"enabled": False}, side.name: section}})
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HERALD_", "PYTEST_XDIST", "TELEGRAM_", "DISCORD_", "SLACK_"))}
    env.update(HERALD_HOME=str(home), TEST_KEY=API_KEY, PYTHONUNBUFFERED="1", XDG_STATE_HOME=str(tmp_path / "st"),
               **env_extra)
    herald = Herald(home=home, config=cfg, env=env)
    llm.script(ToolCall("send_file", {"path": "report.csv"}), ToolCall("send_file", {"path": "chart.png"}),
               Reply(ANSWER))
    try:
        herald.start()
        side.hold(True)
        side.ask("send me the report and the chart")
        wait_until_sync(lambda: any(kind == "file" for kind, _ in side.timeline()), timeout=30,
                        what="the document reached the platform")
        assert herald.proc is not None
        herald.proc.send_signal(signal.SIGKILL)  # between the upload and its outbox update
        herald.proc.wait(10)
        herald.close_files()
        side.hold(False)
        herald.start()
        wait_until_sync(lambda: ("file", ("chart.png", CHART)) in side.timeline(), timeout=40,
                        what="the photo after the restart")
        got = side.timeline()
        texts = [what for kind, what in got if kind == "text"]
        files = [what for kind, what in got if kind == "file"]
        assert texts.count(ANSWER) == 1, got
        assert files.count(("chart.png", CHART)) == 1, got
        reports = files.count(("report.csv", REPORT))
        if side.dedupes:
            assert reports == 1, got
        else:
            assert 1 <= reports <= 2, got
            if reports == 2:  # the second copy comes after the warning that it may repeat
                order = [what if kind == "text" else what[0] for kind, what in got]
                first = order.index("report.csv")
                assert MAYBE_REPEATED in order[first + 1:order.index("report.csv", first + 1)], order
        assert len(llm.requests) == 3  # the turn was not run again: its reply and its files were stored
        assert herald.stop() == 0, herald.stderr()[-2000:]
    finally:
        if herald.proc is not None and herald.proc.poll() is None:
            herald.proc.kill()
        herald.close_files()
        side.stop()
        llm.stop()
