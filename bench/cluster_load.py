#!/usr/bin/env python3
"""Several `herald run` instances on one PostgreSQL database, the web API driven round-robin across them (as a
load balancer would): messages/s for 1, 2 and 3 instances.

Each chat sends its next message as soon as the answer to the previous one arrived; message n of chat c goes to
instance (c + n) mod N, so most messages land on an instance that does not own their session and are routed to
the one that does. Answers are read from each chat's event stream, held on one instance (the web chat passes
other instances' events on). Every instance shares one web token (platforms.web.token_env).

    .venv/bin/python bench/cluster_load.py [--instances 1,2,3] [--chats 30] [--messages-per-chat 20]
        [--model-delay 0.05] [--database-url postgresql+asyncpg://postgres@127.0.0.1:5432/test]

The database URL defaults to $HERALD_TEST_DATABASE_URL; a scratch database is created on that server for each
run and dropped after. Exits 1 if a message was lost or answered twice, or an instance did not exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.harness import (  # noqa: E402
    Conversations,
    Daemon,
    LoadResult,
    Report,
    Usage,
    echo_model,
    free_port,
    herald_config,
    measure,
    run_async,
)

TOKEN_ENV = "HERALD_BENCH_WEB_TOKEN"


@contextlib.asynccontextmanager
async def scratch_database(url: str) -> AsyncIterator[str]:
    import asyncpg

    dsn = url.replace("postgresql+asyncpg://", "postgresql://")
    name = f"herald_bench_{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    try:
        yield f"{url.rpartition('/')[0]}/{name}"
    finally:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()


async def listen(session: aiohttp.ClientSession, base: str, chat: str, talk: Conversations,
                 connected: asyncio.Event) -> None:
    async with session.get(f"{base}/api/v1/chats/{chat}/events",
                           timeout=aiohttp.ClientTimeout(total=None, sock_read=None)) as resp:
        resp.raise_for_status()
        event, data = "message", []
        async for raw in resp.content:
            line = raw.decode().rstrip("\r\n")
            if line.startswith(": connected"):
                connected.set()
            if not line:
                if event == "message" and data:
                    payload = json.loads("\n".join(data))
                    if payload.get("role") == "assistant" and payload["text"].startswith("echo: "):
                        talk.answered(payload["text"])
                event, data = "message", []
            elif line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())


async def one_run(args: argparse.Namespace, instances: int, llm_url: str, token: str
                  ) -> tuple[LoadResult, list[Usage], list[int | None]]:
    async with scratch_database(args.database_url) as url:
        config = herald_config(llm_url, turns=32, max_queue=100, log_level=args.log_level,
                               platforms={"web": {"token_env": TOKEN_ENV}})
        config["database"] = {"url": url}
        daemons = []
        try:
            for _ in range(instances):
                cfg = {**config, "http": {"port": free_port()}}
                daemon = Daemon(cfg, {TOKEN_ENV: token}, home_prefix="herald-cluster-bench-",
                                profile=args.profile if not daemons else None)
                daemons.append(daemon)
                await asyncio.to_thread(daemon.wait_ready)
            talk = Conversations()
            headers = {"Authorization": f"Bearer {token}"}
            async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), headers=headers) as session:
                listeners = []
                for chat in range(args.chats):
                    connected = asyncio.Event()
                    listeners.append(asyncio.create_task(
                        listen(session, daemons[chat % instances].url, f"c{chat}", talk, connected)))
                    await asyncio.wait_for(connected.wait(), 10)
                turn = {chat: 0 for chat in range(args.chats)}

                async def ask(chat: int, text: str) -> None:
                    target = daemons[(chat + turn[chat]) % instances]
                    turn[chat] += 1
                    async with session.post(f"{target.url}/api/v1/messages",
                                            json={"chat_id": f"c{chat}", "user_id": "bench", "text": text}) as resp:
                        resp.raise_for_status()

                usages = []
                load = talk.run(args.chats, args.messages_per_chat, ask, tag=f"n{instances}-")
                result, first = await measure(daemons[0], load)
                usages.append(first)
                for listener in listeners:
                    listener.cancel()
                await asyncio.gather(*listeners, return_exceptions=True)
            codes = [await asyncio.to_thread(d.stop) for d in daemons]
            return result, usages, codes
        finally:
            for daemon in daemons:
                daemon.__exit__(None)


async def run(args: argparse.Namespace) -> int:
    if not args.database_url or not args.database_url.startswith("postgresql"):
        print("cluster_load needs a PostgreSQL server: --database-url postgresql+asyncpg://… "
              "(or HERALD_TEST_DATABASE_URL)", file=sys.stderr)
        return 2
    llm = echo_model(args.model_delay)
    llm.start()
    token = secrets.token_urlsafe(24)
    results = []
    try:
        for n in [int(x) for x in args.instances.split(",")]:
            results.append((n, *await one_run(args, n, llm.base_url, token)))
    finally:
        llm.stop()
    report = Report(label_width=36)
    print(f"\nherald cluster load on one PostgreSQL: {args.chats} chats x {args.messages_per_chat} messages, "
          f"web API round-robin, model delay {args.model_delay * 1000:g} ms")
    failed = False
    base_rate = None
    for n, result, usages, codes in results:
        print(f"\n {n} instance{'s' if n > 1 else ''}:")
        report.row("messages/s", f"{result.rate:.1f}",
                   "" if base_rate is None else f"(x{result.rate / base_rate:.2f} of one instance)")
        base_rate = base_rate or result.rate
        report.row("ingress-to-reply p50 / p99", f"{result.latency_ms(50):.0f} / {result.latency_ms(99):.0f} ms")
        report.delivery(result)
        report.row("exit codes on SIGTERM", " ".join(str(c) for c in codes))
        report.cpu(usages[0], result, cores=False)
        failed |= bool(result.lost or result.twice or any(c != 0 for c in codes))
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", default="1,2,3")
    parser.add_argument("--chats", type=int, default=30)
    parser.add_argument("--messages-per-chat", type=int, default=20)
    parser.add_argument("--model-delay", type=float, default=0.05, help="seconds the fake model takes per answer")
    parser.add_argument("--log-level", default="warning")
    parser.add_argument("--database-url", default=os.environ.get("HERALD_TEST_DATABASE_URL"))
    parser.add_argument("--profile", default=None, help="write the first instance's cProfile stats to this file")
    return run_async(run, parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
