"""The grading queue: per-client limits and round-robin service, so one client cannot starve others."""

from __future__ import annotations

import asyncio
import threading

import pytest

from alignlings.web.checkqueue import CheckQueue, QueueFull


def _blocker(gate: threading.Event, log: list, name: str):
    def fn():
        log.append(("start", name))
        assert gate.wait(10), "the test never released this grading"
        log.append(("end", name))
        return name
    return fn


def _wait_until(cond, timeout=5.0):
    import time

    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def test_a_client_over_its_share_is_refused_but_others_are_admitted():
    async def scenario():
        q = CheckQueue(max_concurrent=1, max_queue=8, max_per_client=2)
        gate, log = threading.Event(), []
        a1 = asyncio.ensure_future(q.run(_blocker(gate, log, "a1"), client="a"))
        a2 = asyncio.ensure_future(q.run(_blocker(gate, log, "a2"), client="a"))
        await asyncio.sleep(0)
        with pytest.raises(QueueFull, match="per learner"):
            await q.run(lambda: "a3", client="a")
        b1 = asyncio.ensure_future(q.run(lambda: "b1", client="b"))
        await asyncio.sleep(0.05)
        gate.set()
        return await asyncio.gather(a1, a2, b1)

    assert asyncio.run(scenario()) == ["a1", "a2", "b1"]


def test_waiting_clients_are_served_in_turn():
    """Client a queues two gradings behind a running one; client b asks later for one. When the slot
    frees, b goes before a's second waiting grading."""
    order: list[str] = []

    async def scenario():
        q = CheckQueue(max_concurrent=1, max_queue=8, max_per_client=3)
        gate = threading.Event()
        first = asyncio.ensure_future(q.run(_blocker(gate, [], "a0"), client="a"))
        await asyncio.to_thread(_wait_until, lambda: q.stats()["running"] == 1)

        def note(name):
            return lambda: order.append(name) or name

        def in_line():  # tickets standing in the line (admission alone does not put one there)
            return sum(len(t) for t in q._waiting.values())

        a1 = asyncio.ensure_future(q.run(note("a1"), client="a"))
        await asyncio.to_thread(_wait_until, lambda: in_line() == 1)
        a2 = asyncio.ensure_future(q.run(note("a2"), client="a"))
        await asyncio.to_thread(_wait_until, lambda: in_line() == 2)
        b1 = asyncio.ensure_future(q.run(note("b1"), client="b"))
        await asyncio.to_thread(_wait_until, lambda: in_line() == 3)
        gate.set()
        await asyncio.gather(first, a1, a2, b1)

    asyncio.run(scenario())
    assert order == ["a1", "b1", "a2"]


def test_the_whole_queue_has_a_bound_and_a_wait_limit():
    async def scenario():
        q = CheckQueue(max_concurrent=1, max_queue=0, wait_seconds=0.2, max_per_client=5)
        gate = threading.Event()
        running = asyncio.ensure_future(q.run(_blocker(gate, [], "x"), client="x"))
        await asyncio.to_thread(_wait_until, lambda: q.stats()["running"] == 1)
        with pytest.raises(QueueFull, match="limit 1"):
            await q.run(lambda: None, client="y")
        gate.set()
        await running
        q2 = CheckQueue(max_concurrent=1, max_queue=1, wait_seconds=0.2, max_per_client=5)
        gate2 = threading.Event()
        hold = asyncio.ensure_future(q2.run(_blocker(gate2, [], "h"), client="h"))
        await asyncio.to_thread(_wait_until, lambda: q2.stats()["running"] == 1)
        with pytest.raises(QueueFull, match="waited over"):
            await q2.run(lambda: None, client="z")
        gate2.set()
        await hold
        assert q2.stats()["waiting"] == 0 and q2.stats()["running"] == 0

    asyncio.run(scenario())


def test_bad_settings_name_the_argument():
    with pytest.raises(ValueError, match="max_per_client"):
        CheckQueue(max_per_client=0)
