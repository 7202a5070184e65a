#!/usr/bin/env python3
"""Load benchmark through WhatsApp: N people talking to a real `herald run` via the fake Cloud API.

The daemon runs in a subprocess (its own CPU, its RSS measurable) with `platforms.whatsapp.api_base_url` pointing
at the fake Cloud API (tests/fakes/whatsapp_api.py) served here, and a fake model (tests/fakes/llm.py, in a
thread) that answers at once. Each person's message is a webhook POST signed with the app secret, as Meta sends
it, to /whatsapp/webhook; each sends the next as soon as the bot's answer to the previous one reached the fake's
/messages. Ingress-to-reply runs from just before the POST to that answer's arrival; the ack from the POST to
its 200 (the message is in the inbox by then). With --statuses (the default) the fake also reports every answer
sent and delivered, as Meta does, so the daemon records two receipts per answer besides.

    .venv/bin/python bench/whatsapp_load.py [--chats 20] [--messages-per-chat 50] [--model-delay 0]
                                            [--no-statuses] [--log-level info] [--profile FILE]

Exits 1 if a message was lost or answered twice, a webhook was not acknowledged with 200, or the daemon did not
exit 0 on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.harness import (  # noqa: E402
    LOG_LEVELS,
    Conversations,
    Daemon,
    Report,
    echo_model,
    herald_config,
    measure,
    percentile,
    run_async,
)
from tests.fakes.whatsapp_api import FakeWhatsApp, WaMessage  # noqa: E402

TARGET_RATE = 100.0
TARGET_P99_MS = 1000.0
TARGET_RSS_MB = 120.0
ACK_LIMIT_S = 3.0


def number(n: int) -> str:
    return f"+1555{1_000_000 + n:07d}"


async def run(args: argparse.Namespace) -> int:
    fake = FakeWhatsApp()
    fake.statuses = args.statuses
    talk = Conversations()
    acks: list[float] = []
    refused: list[int] = []

    def on_send(sent: WaMessage) -> None:
        talk.answered(sent.text)

    async def ask(n: int, text: str) -> None:
        status, _, seconds = await fake.post(fake.message(number(n), text))
        if status == 200:
            acks.append(seconds)
        else:
            refused.append(status)

    fake.on_send = on_send
    llm = echo_model(args.model_delay)
    try:
        await fake.start()
        llm.start()
        whatsapp = {"enabled": True, "api_base_url": fake.api_url, "phone_number_id": fake.phone_number_id,
                    "allowed_users": [number(n) for n in range(args.chats)]}
        config = herald_config(llm.base_url, turns=32, log_level=args.log_level,
                               platforms={"web": {"enabled": False}, "whatsapp": whatsapp})
        with Daemon(config, fake.env(), home_prefix="herald-wa-bench-", profile=args.profile) as daemon:
            await asyncio.to_thread(daemon.wait_ready)
            fake.webhook_url = daemon.url + "/whatsapp/webhook"
            result, usage = await measure(daemon, talk.run(args.chats, args.messages_per_chat, ask))
            statuses = fake.statuses_taken
            # In a thread: the fake runs on this loop and must keep answering the daemon as it drains.
            code = await asyncio.to_thread(daemon.stop)
    finally:
        llm.stop()
        await fake.stop()

    report = Report()
    print(f"\nWhatsApp load: {args.chats} chats x {args.messages_per_chat} messages, model delay "
          f"{args.model_delay * 1000:g} ms, statuses {'on' if args.statuses else 'off'}, log level {args.log_level}")
    report.replies(result, rate_target=TARGET_RATE, p99_target_ms=TARGET_P99_MS)
    ack_ms = [x * 1000 for x in acks]
    ack_max = max(ack_ms, default=float("nan"))
    report.row("webhook ack p50 / p99", f"{percentile(ack_ms, 50):.1f} / {percentile(ack_ms, 99):.1f} ms")
    report.check("webhook ack max", f"{ack_max:.1f} ms", f"< {ACK_LIMIT_S * 1000:g} ms", ack_max < ACK_LIMIT_S * 1000)
    report.check("webhooks not acknowledged", str(len(refused)), "0", not refused)
    if args.statuses:
        report.row("statuses taken (sent, delivered)", str(statuses), None)
    report.delivery(result)
    report.cpu(usage, result)
    report.memory(usage, rss_target_mb=TARGET_RSS_MB)
    report.exit_code(code)
    return 1 if result.lost or result.twice or refused or code != 0 else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--messages-per-chat", type=int, default=50)
    parser.add_argument("--model-delay", type=float, default=0.0, help="seconds the fake model takes per answer")
    parser.add_argument("--statuses", action=argparse.BooleanOptionalAction, default=True,
                        help="the fake reports every answer sent and delivered (as Meta does)")
    parser.add_argument("--log-level", default="info", choices=LOG_LEVELS)
    parser.add_argument("--profile", default=None, help="write the daemon's cProfile stats to this file")
    return run_async(run, parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
