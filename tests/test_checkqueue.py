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


def _wait_until(cond, timeout=60.0):
    """Poll until ``cond()`` holds (the bound only turns a hang into a failure; it is no timing goal)."""
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
        # b1 is admitted (a1 running, a2 and b1 waiting) before the gate opens: no fixed sleep
        await asyncio.to_thread(_wait_until, lambda: sum(q.stats()[k] for k in ("running", "waiting")) == 3)
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
            return q.in_line()

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


def test_five_names_from_one_address_cannot_lock_out_the_class():
    """Issue 19 §3: one person joins under five names and sends two sleeping checks per name. The
    address is capped (``max_per_address``), so an honest learner on another address is admitted
    (not 429), and when one of that person's running checks ends, the honest one goes next, before
    the person's waiting ones (the address running fewer gradings goes first)."""
    log: list = []

    async def scenario():
        q = CheckQueue(max_concurrent=2, max_queue=8, max_per_client=2, max_per_address=4)
        gates = {}
        evil = []
        for name in range(5):
            for n in range(2):
                key = f"evil{name}.{n}"
                gates[key] = threading.Event()
                evil.append(asyncio.ensure_future(
                    q.run(_blocker(gates[key], log, key), client=f"10.0.0.66#learner:evil{name}")))
                await asyncio.sleep(0)
        await asyncio.to_thread(_wait_until, lambda: q.stats()["running"] == 2 and q.in_line() == 2)
        refused = [f for f in evil if f.done() and isinstance(f.exception(), QueueFull)]
        assert len(refused) == 6 and all("per address" in str(f.exception()) for f in refused)
        gates["honest"] = threading.Event()
        honest = asyncio.ensure_future(q.run(_blocker(gates["honest"], log, "honest"), client="10.0.0.7#learner:ann"))
        await asyncio.to_thread(_wait_until, lambda: q.in_line() == 3)
        first = next(name for kind, name in log if kind == "start")
        gates[first].set()  # one of the person's two running checks ends
        await asyncio.to_thread(_wait_until, lambda: sum(kind == "start" for kind, _ in log) == 3)
        for g in gates.values():
            g.set()
        await asyncio.gather(*evil, honest, return_exceptions=True)
        return honest.result()

    assert asyncio.run(scenario()) == "honest"
    starts = [name for kind, name in log if kind == "start"]
    assert len(starts) == 5 and starts[2] == "honest", starts  # before the person's 2 waiting ones


def test_the_address_running_fewest_goes_next():
    """A runs two gradings and waits with a third; B then asks for one. When one of A's finishes, A
    still runs one and B none, so B goes next although A's third grading came first."""
    async def scenario():
        q = CheckQueue(max_concurrent=2, max_queue=8, max_per_client=3, max_per_address=6)
        gates, log = [threading.Event() for _ in range(4)], []
        a = [asyncio.ensure_future(q.run(_blocker(gates[i], log, f"a{i}"), client=f"A#learner:{i}"))
             for i in range(3)]
        await asyncio.to_thread(_wait_until, lambda: q.stats()["running"] == 2 and q.in_line() == 1)
        b = asyncio.ensure_future(q.run(_blocker(gates[3], log, "b"), client="B"))
        await asyncio.to_thread(_wait_until, lambda: q.in_line() == 2)
        first = [name for kind, name in log if kind == "start"]
        gates[int(first[0][1])].set()  # one of A's two running gradings ends
        await asyncio.to_thread(_wait_until, lambda: sum(kind == "start" for kind, _ in log) == 3)
        for g in gates:
            g.set()
        await asyncio.gather(*a, b)
        return [name for kind, name in log if kind == "start"]

    starts = asyncio.run(scenario())
    assert starts[2] == "b", starts


def test_max_per_address_is_validated():
    with pytest.raises(ValueError, match="max_per_address"):
        CheckQueue(max_per_address=0)
