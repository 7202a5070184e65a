#!/usr/bin/env python3
"""Load benchmark through Matrix: N DMs talking to a real `herald run` via the fake homeserver.

The daemon runs in a subprocess (its own CPU, its RSS measurable) with `platforms.matrix.homeserver` pointing at
the fake Matrix homeserver (tests/fakes/matrix_api.py: the client-server API with /sync's long poll) served here,
and a fake model that answers at once (tests/fakes/llm.py, in a thread). Each chat sends its next message as soon
as the bot's answer to the previous one arrived at the fake. Ingress-to-reply is measured from the moment the
user's event is in the room (a long poll in flight answers with it) to the moment the bot's PUT /send for its
answer reaches the fake.

    .venv/bin/python bench/matrix_load.py [--chats 20] [--messages-per-chat 50] [--model-delay 0]
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
from tests.fakes.matrix_api import BOT, FakeMatrix, Sent  # noqa: E402

TARGET_RATE = 100.0
TARGET_P99_MS = 1000.0
TARGET_RSS_MB = 130.0


async def run(args: argparse.Namespace) -> int:
    mx = FakeMatrix()
    talk = Conversations()
    users = [mx.user(f"@user{n}:fake.test") for n in range(args.chats + args.slow_turns)]
    rooms = [mx.dm(user) for user in users]  # joined before the clock starts

    def on_send(sent: Sent) -> None:
        talk.answered(sent.text)

    async def ask(n: int, text: str) -> None:
        mx.user_message(rooms[n], users[n], text)

    mx.on_send = on_send
    await mx.start()
    try:
        matrix = {"enabled": True, "homeserver": mx.url, "user_id": BOT, "allowed_users": users}
        return await chat_bench(args, title="Matrix", talk=talk, ask=ask, platform={"matrix": matrix},
                                env={"MATRIX_ACCESS_TOKEN": mx.bot_token}, home_prefix="herald-mx-bench-",
                                rate_target=TARGET_RATE, p99_target_ms=TARGET_P99_MS, rss_target_mb=TARGET_RSS_MB)
    finally:
        await mx.stop()


if __name__ == "__main__":
    sys.exit(chat_bench_main(__doc__, run))
