"""The turn threads (gateway/turns/pool.py): started up front, off the loop, so a turn does not wait on the loop
for its thread to start."""

from __future__ import annotations

import threading

from gateway.turns.pool import ThreadStarter, turn_pool


def _turn_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("turn_")}


def test_the_threads_for_the_turn_limit_run_before_any_turn_arrives():
    before = _turn_threads()
    pool = turn_pool(4)
    try:
        ThreadStarter(pool, 4).run()
        started = _turn_threads() - before
        assert len(started) == 4 and all(t.is_alive() for t in started)
        # and they take turns as any of the pool's threads do
        assert [f.result(10) for f in [pool.submit(lambda n=n: n * 2) for n in range(8)]] == list(range(0, 16, 2))
    finally:
        pool.shutdown(wait=True)


def test_a_pool_shut_down_first_is_left_alone():
    pool = turn_pool(2)
    pool.shutdown()
    before = _turn_threads()
    ThreadStarter(pool, 2).run()  # returns, raising nothing: a start-up that failed stops its pool first
    assert _turn_threads() - before == set()


def test_a_shutdown_during_start_up_lets_the_waiting_threads_go():
    """Started threads wait for the rest; a shutdown then must not leave them (and the exit) waiting."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.support.polling import wait_until_sync

    pool = ThreadPoolExecutor(max_workers=2)  # room for two of the three: the start-up cannot finish
    starter = ThreadStarter(pool, 3)
    runner = threading.Thread(target=starter.run)
    runner.start()
    wait_until_sync(lambda: starter._barrier.n_waiting == 3, what="two threads and the starter waiting")
    starter.abort()
    runner.join(10)
    assert not runner.is_alive()
    pool.shutdown(wait=True)  # the held threads were let go, and the third task finds the start-up over
