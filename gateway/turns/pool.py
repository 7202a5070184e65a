"""The turn threads: a thread pool whose threads for ``max_concurrent_turns`` turns are started up front.

A thread the pool starts when a turn arrives is started on the loop, and ``Thread.start()`` waits until the new
thread runs: with the GIL busy that held the loop ~15 ms each time the pool grew (seen as loop lag while 64 turns
sat in the model call and new chats' turns needed threads). Started in a thread of their own at start-up, the
threads a turn needs are there; only turns past the limit (those lending their slot while waiting for a person)
still grow the pool from the loop.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import structlog

log = structlog.get_logger("herald.turns")

# Threads beyond the turn limit only ever wait for a person (a turn lends its slot then); this bounds how many can.
MAX_WAITING_TURNS = 512


def turn_pool(limit: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=limit + MAX_WAITING_TURNS, thread_name_prefix="turn")


class ThreadStarter:
    """Has ``count`` of the pool's threads running: ``count`` tasks that each hold a thread until all of them run.
    ``run`` blocks (call it off the loop); ``abort`` lets them all go at once (a shutdown during start-up)."""

    def __init__(self, pool: ThreadPoolExecutor, count: int, timeout: float = 30.0) -> None:
        self.pool, self.count, self.timeout = pool, count, timeout
        self._barrier = threading.Barrier(count + 1)

    def run(self) -> None:
        try:
            for _ in range(self.count):
                self.pool.submit(self._hold)
        except RuntimeError:  # the pool was shut down meanwhile
            self.abort()
            return
        try:
            self._barrier.wait(self.timeout)
        except threading.BrokenBarrierError:
            if not self._aborted:
                log.warning("turn_threads_not_started", wanted=self.count)

    def abort(self) -> None:
        self._aborted = True
        self._barrier.abort()

    _aborted = False

    def _hold(self) -> None:
        try:
            self._barrier.wait(self.timeout)
        except threading.BrokenBarrierError:
            pass
