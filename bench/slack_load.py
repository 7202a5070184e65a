#!/usr/bin/env python3
"""Load benchmark through Slack: N DMs talking to a real `herald run` via the fake Slack, in Socket Mode and in
HTTP mode (the Events API at /slack/events).

The daemon runs in a subprocess (its own CPU, its RSS measurable) with `platforms.slack.api_base_url` pointing
at the fake Slack (tests/fakes/slack_api.py) served here, and a fake model (tests/fakes/llm.py, in a thread)
that answers at once. Each chat sends its next message as soon as the bot's answer to the previous one
reached the fake. Ingress-to-reply is measured from the moment the fake hands the event over (the envelope
is sent / the POST starts) to the moment the bot's chat.postMessage for it arrives; an event's ack time from
the same moment to its Socket Mode ack / its HTTP 200.

Then the same load again while 64 slow turns (--slow-seconds each) run in 64 other chats: every event must
still be acknowledged well within Slack's 3 s.

    .venv/bin/python bench/slack_load.py [--mode socket|http|both] [--chats 20] [--messages-per-chat 50]
                                         [--slow-turns 64] [--slow-seconds 6] [--log-level info]

Exits 1 if a message was lost or answered twice, an ack took 3 s or more, or the daemon did not exit 0 on
SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.harness import (  # noqa: E402
    LOG_LEVELS,
    REPLY_TIMEOUT,
    Conversations,
    Daemon,
    LoadResult,
    Report,
    echo_model,
    herald_config,
    measure,
    percentile,
    run_async,
)
from tests.fakes.slack_api import FakeSlack, SlackMessage  # noqa: E402

TARGET_RATE = 100.0
TARGET_P99_MS = 1000.0
ACK_LIMIT_S = 3.0  # Slack's
FIRST_CHAT = 10_000


def user(n: int) -> str:
    return f"U{FIRST_CHAT + n:08d}"


def dm(n: int) -> str:
    return f"D{FIRST_CHAT + n:08d}"


class SlackLoad:
    """Hands users' messages to the daemon through the fake Slack in one mode, and times each acknowledgement."""

    def __init__(self, fake: FakeSlack, mode: str, events_url: str) -> None:
        self.fake = fake
        self.mode = mode
        self.url = events_url
        self.acks: list[float] = []
        self.unacked = 0
        self._waiting: set[asyncio.Task[None]] = set()  # the loop keeps only weak references to tasks

    async def ask(self, n: int, text: str) -> None:
        body = self.fake.message(dm(n), user(n), text)
        if self.mode == "http":
            status, _, seconds = await self.fake.post(self.url, "events_api", body)
            if status == 200:
                self.acks.append(seconds)
            else:
                self.unacked += 1
        else:
            envelope = await self.fake.deliver_socket("events_api", body)
            task = asyncio.get_running_loop().create_task(self._socket_ack(envelope))
            self._waiting.add(task)
            task.add_done_callback(self._waiting.discard)

    async def _socket_ack(self, envelope: str) -> None:
        deadline = time.monotonic() + 10
        while envelope not in self.fake.acked_at:
            if time.monotonic() > deadline:
                self.unacked += 1
                return
            await asyncio.sleep(0.005)
        self.acks.append(self.fake.acked_at[envelope] - self.fake.handed_out[envelope])


def report_phase(report: Report, title: str, result: LoadResult, acks: list[float], unacked: int) -> bool:
    """The rows of one load; whether it failed (lost, answered twice, or an event not acknowledged in time)."""
    ack_ms = [x * 1000 for x in acks]
    ack_max = max(ack_ms, default=float("nan"))
    print(title)
    report.replies(result, rate_target=TARGET_RATE, p99_target_ms=TARGET_P99_MS, brief=True)
    report.row("ack p50 / p99", f"{percentile(ack_ms, 50):.1f} / {percentile(ack_ms, 99):.1f} ms")
    report.check("ack max", f"{ack_max:.1f} ms", f"< {ACK_LIMIT_S * 1000:g} ms", ack_max < ACK_LIMIT_S * 1000)
    report.check("not acknowledged", str(unacked), "0", unacked == 0)
    report.delivery(result)
    return bool(result.lost or result.twice or unacked or not ack_max < ACK_LIMIT_S * 1000)


async def run_mode(args: argparse.Namespace, mode: str) -> int:
    llm = echo_model(lambda text: args.slow_seconds if text.startswith("slow") else 0.0)
    fake = FakeSlack()
    talk = Conversations()

    def on_send(sent: SlackMessage) -> None:
        talk.answered(sent.text)

    fake.on_send = on_send
    report = Report()
    failed = False
    try:
        llm.start()
        await fake.start()
        slack = {"enabled": True, "mode": mode, "api_base_url": fake.api_url,
                 "allowed_users": [user(n) for n in range(args.chats + args.slow_turns)]}
        # Room for the 64 slow turns and the fast chats beside them.
        config = herald_config(llm.base_url, turns=128, log_level=args.log_level,
                               platforms={"web": {"enabled": False}, "slack": slack})
        env = {"SLACK_BOT_TOKEN": fake.bot_token, "SLACK_APP_TOKEN": fake.app_token,
               "SLACK_SIGNING_SECRET": fake.signing_secret}
        with Daemon(config, env, home_prefix="herald-slack-bench-") as daemon:
            await asyncio.to_thread(daemon.wait_ready)
            load = SlackLoad(fake, mode, daemon.url + "/slack/events")
            plain, usage = await measure(daemon, talk.run(args.chats, args.messages_per_chat, load.ask))
            print(f"\nSlack load ({mode} mode): {args.chats} chats x {args.messages_per_chat} messages, instant model")
            failed |= report_phase(report, "", plain, load.acks, load.unacked)
            report.cpu(usage, plain, cores=False)
            # The same again while slow turns run in other chats (numbered after the fast ones).
            load.unacked = 0
            slow = []
            for n in range(args.chats, args.chats + args.slow_turns):
                slow.append(talk.expect(f"slow{n}"))
                await load.ask(n, f"slow{n}")
            load.acks = []  # from here: the acks of the events sent beside the slow turns
            busy = await talk.run(args.chats, args.messages_per_chat, load.ask, tag="b")
            done = await asyncio.wait_for(asyncio.gather(*slow, return_exceptions=True), REPLY_TIMEOUT)
            still = sum(1 for d in done if isinstance(d, BaseException))
            failed |= report_phase(report, f"  ... while {args.slow_turns} turns of {args.slow_seconds:g} s run in "
                                   "other chats:", busy, load.acks, load.unacked)
            report.row("slow turns answered", f"{args.slow_turns - still}/{args.slow_turns}", None)
            failed |= bool(still)
            # In a thread: the fake Slack on this loop must keep answering the daemon while it drains.
            code = await asyncio.to_thread(daemon.stop)
            report.exit_code(code)
    finally:
        await fake.stop()
        llm.stop()
    return 1 if failed or code != 0 else 0


async def run(args: argparse.Namespace) -> int:
    modes = ["socket", "http"] if args.mode == "both" else [args.mode]
    results = [await run_mode(args, mode) for mode in modes]
    return max(results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", default="both", choices=["socket", "http", "both"])
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--messages-per-chat", type=int, default=50)
    parser.add_argument("--slow-turns", type=int, default=64)
    parser.add_argument("--slow-seconds", type=float, default=6.0)
    parser.add_argument("--log-level", default="info", choices=LOG_LEVELS)
    return run_async(run, parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
