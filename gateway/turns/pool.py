"""The turn threads: a thread pool whose threads for ``max_concurrent_turns`` turns are started up front.

A thread the pool starts when a turn arrives is started on the loop, and ``Thread.start()`` waits until the new
thread runs: with the GIL busy that held the loop ~15 ms each time the pool grew (seen as loop lag while 64 turns
sat in the model call and new chats' turns needed threads). Started in a thread of their own at start-up, the
threads a turn needs are there; only turns past the limit (those lending their slot while waiting for a person)
still grow the pool from the loop. The runner starts them before it takes any message; a turn that arrives while
they start anyway ends the start there (the threads started so far are let go to take it), as it would otherwise
queue behind the tasks holding them (on a busy machine, for longer than a turn's timeout).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import structlog

log = structlog.get_logger("herald.turns")
T = TypeVar("T")

# Threads beyond the turn limit only ever wait for a person (a turn lends its slot then); this bounds how many can.
MAX_WAITING_TURNS = 512


class TurnPool(ThreadPoolExecutor):
    def __init__(self, limit: int, waiting: int = MAX_WAITING_TURNS, timeout: float = 30.0) -> None:
        super().__init__(max_workers=limit + waiting, thread_name_prefix="turn")
        self.limit, self._timeout = limit, timeout
        self._starting = threading.Barrier(limit + 1)
        self._holding = False
        self._let_go = False  # the start was ended on purpose (a turn came first, or a shutdown): no warning

    def start_threads(self) -> None:
        """Have ``limit`` threads running: as many tasks that each hold a thread until all of them run. Blocks:
        call it off the loop."""
        self._holding = True
        try:
            self._hold_threads()
        finally:
            self._holding = False

    def _hold_threads(self) -> None:
        try:
            for _ in range(self.limit):
                if self._starting.broken:  # a turn came first: it has the threads started so far
                    return
                super().submit(self._hold)
        except RuntimeError:  # shut down meanwhile (a start that failed), or no thread could be started
            self._starting.abort()  # those started so far are not held for the rest
            return
        try:
            self._starting.wait(self._timeout)
        except threading.BrokenBarrierError:
            if not self._let_go:
                log.warning("turn_threads_not_started", wanted=self.limit)

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        if self._holding:  # real work would queue behind the tasks holding the threads: let them go
            self._let_go = True
            self._starting.abort()
        return super().submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._let_go = True
        self._starting.abort()  # threads still held for start-up go at once, and the shutdown does not wait on them
        super().shutdown(wait, cancel_futures=cancel_futures)

    def _hold(self) -> None:
        try:
            self._starting.wait(self._timeout)
        except threading.BrokenBarrierError:
            pass
