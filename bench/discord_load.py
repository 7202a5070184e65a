#!/usr/bin/env python3
"""Load benchmark through Discord: N DMs talking to a real `herald run` via the fake Discord.

The daemon runs in a subprocess (its own CPU, its RSS measurable) with `platforms.discord.api_base_url` and
`gateway_url` pointing at the fake Discord (tests/fakes/discord_api.py: REST and the gateway websocket)
served here, and a fake model that answers at once (tests/fakes/llm.py, in a thread). Each chat sends its
next message as soon as the bot's answer to the previous one arrived at the fake. Ingress-to-reply is
measured from the moment the fake sends the MESSAGE_CREATE on the gateway to the moment the bot's
POST /channels/{id}/messages for it reaches the fake.

    .venv/bin/python bench/discord_load.py [--chats 20] [--messages-per-chat 50] [--model-delay 0]
                                           [--log-level info] [--profile FILE]

--profile FILE runs the daemon under cProfile and writes the stats there (slower; for finding hot spots:
`python -c "import pstats; pstats.Stats('FILE').sort_stats('cumtime').print_stats(40)"`).
Exits 1 if a message was lost or answered twice, or the daemon did not exit 0 on SIGTERM.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.harness import Conversations, chat_bench, chat_bench_main  # noqa: E402
from tests.fakes.discord_api import FakeDiscord, Sent  # noqa: E402

TARGET_RATE = 100.0
TARGET_P99_MS = 1000.0
TARGET_RSS_MB = 130.0
FIRST_USER = 400_000_000_000_000_000


async def run(args: argparse.Namespace) -> int:
    dc = FakeDiscord()
    talk = Conversations()
    users = [FIRST_USER + n for n in range(args.chats + args.slow_turns)]
    channels = [dc.dm(user) for user in users]  # one DM each, opened before the clock starts

    def on_send(sent: Sent) -> None:
        talk.answered(sent.content)

    async def ask(n: int, text: str) -> None:
        dc.user_message(channels[n], users[n], text)

    dc.on_send = on_send
    await dc.start()
    try:
        discord = {"enabled": True, "api_base_url": dc.api_url, "gateway_url": dc.gateway_url,
                   "allowed_users": users}
        return await chat_bench(args, title="Discord", talk=talk, ask=ask, platform={"discord": discord},
                                env={"DISCORD_BOT_TOKEN": dc.token}, home_prefix="herald-dc-bench-",
                                rate_target=TARGET_RATE, p99_target_ms=TARGET_P99_MS, rss_target_mb=TARGET_RSS_MB)
    finally:
        await dc.stop()


if __name__ == "__main__":
    sys.exit(chat_bench_main(__doc__, run))
