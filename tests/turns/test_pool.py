"""The turn threads (gateway/turns/pool.py): started up front, off the loop, so a turn does not wait on the loop
for its thread to start."""

from __future__ import annotations

import threading

from gateway.turns.pool import TurnPool
from tests.support.polling import wait_until_sync


def _turn_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("turn_")}


def test_the_threads_for_the_turn_limit_run_before_any_turn_arrives():
    before = _turn_threads()
    pool = TurnPool(4)
    try:
        pool.start_threads()
        started = _turn_threads() - before
        assert len(started) == 4 and all(t.is_alive() for t in started)
        # and they take turns as any of the pool's threads do
        assert [f.result(10) for f in [pool.submit(lambda n=n: n * 2) for n in range(8)]] == list(range(0, 16, 2))
    finally:
        pool.shutdown(wait=True)


def test_a_pool_shut_down_first_is_left_alone():
    pool = TurnPool(2)
    pool.shutdown()
    before = _turn_threads()
    pool.start_threads()  # returns, raising nothing: a start-up that failed stops its pool first
    assert _turn_threads() - before == set()


def test_a_shutdown_during_start_up_lets_the_waiting_threads_go():
    """Started threads wait for the rest; a shutdown then must not leave them (and the exit) waiting."""
    pool = TurnPool(3, waiting=-1)  # room for two of the three: the start-up cannot finish
    starter = threading.Thread(target=pool.start_threads)
    starter.start()
    wait_until_sync(lambda: pool._starting.n_waiting == 3, what="two threads and the starter waiting")
    pool.shutdown(wait=True)  # returns: the held threads were let go, and the third task finds the start-up over
    starter.join(10)
    assert not starter.is_alive()


def test_a_turn_arriving_while_the_threads_start_does_not_wait_for_the_start():
    """The start-up's tasks hold the threads until all of them run; a turn queued behind them waited as long (on a
    busy machine, past a turn's timeout). It takes a thread at once instead, and the pool goes on serving."""
    pool = TurnPool(3, waiting=-1)  # room for two of the three: left alone, the start-up would wait its timeout
    starter = threading.Thread(target=pool.start_threads)
    starter.start()
    try:
        wait_until_sync(lambda: pool._starting.n_waiting == 3, what="two threads and the starter waiting")
        assert pool.submit(lambda: "answered").result(10) == "answered"
        starter.join(10)
        assert not starter.is_alive()
        assert [f.result(10) for f in [pool.submit(lambda n=n: n + 1) for n in range(4)]] == [1, 2, 3, 4]
    finally:
        pool.shutdown(wait=True)


def test_a_thread_that_cannot_be_started_ends_the_start_and_holds_no_other(monkeypatch):
    """Out of threads (a process limit): the start gives up at once, and the threads it did start are free."""
    pool = TurnPool(3)
    real_start, started = threading.Thread.start, []

    def start(thread: threading.Thread) -> None:
        if thread.name.startswith("turn_") and started:
            raise RuntimeError("can't start new thread")
        started.append(thread)
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    try:
        pool.start_threads()  # returns: it does not wait out the barrier's timeout
        monkeypatch.undo()
        wait_until_sync(lambda: pool._starting.n_waiting == 0, what="the started thread let go")
        assert pool.submit(lambda: "answered").result(10) == "answered"
    finally:
        monkeypatch.undo()
        pool.shutdown(wait=True)
