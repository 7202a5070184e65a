#!/usr/bin/env python3
"""Load benchmark through Telegram: N chats talking to a real `herald run` via the fake Bot API.

The daemon runs in a subprocess (its own CPU, its RSS measurable) with `platforms.telegram.base_url`
pointing at the fake Bot API (tests/fakes/telegram_api.py) served here, and a fake model that answers at
once (tests/fakes/llm.py, in a thread). Each chat sends its next message as soon as the bot's answer to
the previous one arrived at the fake Bot API. Ingress-to-reply is measured from the moment the update is
queued at the fake Bot API to the moment the bot's sendMessage for it reaches the fake.

    .venv/bin/python bench/telegram_load.py [--chats 20] [--messages-per-chat 50] [--model-delay 0]
                                            [--log-level info] [--profile FILE] [--image-every N]
                                            [--slow-turns 64] [--slow-seconds 8]

Start to first answered message: one message is queued at the fake Bot API before `herald run` is spawned (as
updates wait at Telegram while a bot restarts); the figure runs from there to the bot's answer to it (target
< 1 s). It is answered before the load starts.

--slow-turns N: after the load, the same load again while N other chats each have a turn sitting in the model
call for --slow-seconds (started, and seen running in the daemon's herald_turns_running, before the load).
Prints the daemon's event-loop lag p99 over that load (its herald_loop_lag_seconds histogram, read from /metrics
before and after) and its herald_loop_lag_p99_seconds gauge (the last minute), target < 10 ms with 64 turns.

--image-every N makes every Nth message of a chat a photo (a 1600x1200 JPEG, its question as the caption)
and the model one that takes images: each photo is downloaded, checked, prepared for the model (Pillow) and
read again from the history on the chat's later turns. The targets are then p99 < 1 s and RSS < 150 MB.

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
from tests.fakes.telegram_api import FakeTelegram, SentMessage  # noqa: E402

# At 20 chats: >= 250 messages/s, p99 < 300 ms; with more chats (200 x 5) p99 < 1 s. With Telegram alone the
# daemon's peak RSS <= 110 MB and its CPU <= 3 ms per message.
TARGET_RATE = 250.0
TARGET_P99_MS = 300.0
TARGET_P99_MANY_MS = 1000.0
TARGET_RSS_MB = 110.0
TARGET_CPU_MS = 3.0
TARGET_RSS_IMAGES_MB = 150.0
FIRST_CHAT = 10_000


def photo() -> bytes:
    """A phone-sized photo (1600x1200 JPEG with some detail, so its encoding costs what a real one does)."""
    import io

    from PIL import Image, ImageDraw

    img = Image.new("RGB", (1600, 1200), (90, 140, 200))
    draw = ImageDraw.Draw(img)
    for n in range(0, 1600, 40):
        draw.line([(n, 0), (1600 - n, 1200)], fill=(n % 255, 80, 255 - n % 255), width=3)
    out = io.BytesIO()
    img.save(out, "JPEG", quality=85)
    return out.getvalue()


async def run(args: argparse.Namespace) -> int:
    tg = FakeTelegram()
    talk = Conversations()

    def on_send(sent: SentMessage) -> None:
        talk.answered(sent.text)

    image = photo() if args.image_every else b""

    async def ask(n: int, text: str) -> None:
        index = int(text.rpartition("-")[2])
        if args.image_every and index % args.image_every == args.image_every - 1:
            tg.photo_message(FIRST_CHAT + n, image, caption=text)
            return
        tg.user_message(FIRST_CHAT + n, FIRST_CHAT + n, text)  # a private chat: its id is the user's

    tg.on_send = on_send
    await tg.start()
    try:
        telegram = {"enabled": True, "base_url": tg.base_url,
                    "allowed_users": list(range(FIRST_CHAT, FIRST_CHAT + args.chats + args.slow_turns))}
        return await chat_bench(args, title="Telegram", talk=talk, ask=ask, platform={"telegram": telegram},
                                env={"TELEGRAM_BOT_TOKEN": tg.token}, home_prefix="herald-tg-bench-",
                                rate_target=TARGET_RATE,
                                p99_target_ms=TARGET_P99_MS if args.chats <= 20 else TARGET_P99_MANY_MS,
                                rss_target_mb=TARGET_RSS_IMAGES_MB if args.image_every else TARGET_RSS_MB,
                                ask_before_start=True, cpu_target_ms=None if args.image_every else TARGET_CPU_MS)
    finally:
        await tg.stop()


if __name__ == "__main__":
    sys.exit(chat_bench_main(__doc__, run))
