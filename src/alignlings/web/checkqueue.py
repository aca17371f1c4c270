"""Admission and fair ordering of gradings on a shared server.

At most ``max_concurrent`` gradings run at once. Each client (a learner in a classroom, else the
remote address) may have at most ``max_per_client`` gradings running or waiting, and each remote
address at most ``max_per_address`` whatever names it joined under; one more is refused at once
(429). So one person with five names and ten sleeping checks holds at most ``max_per_address``
places and the honest learners still get in. Waiting gradings are served round-robin across
addresses (and, within one address, across its learners): when a slot frees, the address running
the fewest gradings goes next, among equals the one that has waited longest since its last turn,
whatever order the requests came in.

A client key is ``ADDRESS`` or ``ADDRESS#learner:ID`` (:func:`client_key`): the queue reads the
address from the key, so the routes only pass the key.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool


def address_of(request) -> str:
    """The remote address of a request ("local" when the server cannot tell)."""
    client = getattr(request, "client", None)
    return (client.host if client else "") or "local"


def client_key(request) -> str:
    """Who a grading belongs to, for fairness: ``ADDRESS#learner:ID`` in a classroom, else ``ADDRESS``."""
    learner = getattr(getattr(request, "state", None), "learner", None)
    if isinstance(learner, dict) and learner.get("id"):
        return f"{address_of(request)}#learner:{learner['id']}"
    return address_of(request)


def _address(client: str) -> str:
    return client.split("#", 1)[0]


class Stops:
    """The checks running or waiting for each (client, exercise): ``POST /api/exercises/ID/stop`` sets
    their events, which end their sandbox jobs (``sandbox.STOP``)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._events: dict[tuple[str, str], set[threading.Event]] = {}

    @contextlib.contextmanager
    def running(self, client: str, key: str):
        event = threading.Event()
        with self._lock:
            self._events.setdefault((client, key), set()).add(event)
        try:
            yield event
        finally:
            with self._lock:
                events = self._events.get((client, key), set())
                events.discard(event)
                if not events:
                    self._events.pop((client, key), None)

    def stop(self, client: str, key: str) -> int:
        """Stop this client's checks of ``key``; how many there were."""
        with self._lock:
            events = list(self._events.get((client, key), ()))
        for event in events:
            event.set()
        return len(events)


class QueueFull(Exception):
    """The grading was refused (answered with 429 and this message)."""


class CheckQueue:
    """Bounded, per-client fair admission for gradings; thread-based, so it works whatever event
    loop serves the app. Admission is decided at once: a full queue or a client over its share is
    refused immediately, and a grading that waits longer than ``wait_seconds`` is refused too."""

    def __init__(self, max_concurrent: int = 2, max_queue: int = 8, wait_seconds: float = 120.0,
                 max_per_client: int = 2, max_per_address: int | None = None):
        if max_per_address is None:  # two learners' worth: a pair sharing a machine still both get in
            max_per_address = 2 * max_per_client
        if max_concurrent < 1 or max_queue < 0 or max_per_client < 1 or max_per_address < 1:
            raise ValueError("max_concurrent_checks, max_per_client and max_per_address must be >= 1 "
                             "and max_queue >= 0")
        self.max_concurrent, self.max_queue, self.wait_seconds = max_concurrent, max_queue, wait_seconds
        self.max_per_client, self.max_per_address = max_per_client, max_per_address
        self._cond = threading.Condition()
        self._running = 0
        self._admitted: dict[str, int] = {}  # client -> gradings running or waiting
        self._by_address: dict[str, int] = {}  # address -> gradings running or waiting
        self._running_by_address: dict[str, int] = {}  # address -> gradings running
        self._last_turn: dict[str, int] = {}  # address -> its last turn, or when it came (forgotten once idle)
        self._turns = itertools.count()
        # address -> its clients in turn order -> each client's tickets
        self._waiting: OrderedDict[str, OrderedDict[str, deque[int]]] = OrderedDict()
        self._tickets = itertools.count()
        self.stops = Stops()  # the page's "Stop" for the checks of this queue
        self._alone: set[tuple[str, str | None]] = set()  # (client, kind) of the runs a client may have one of

    @property
    def capacity(self) -> int:
        return self.max_concurrent + self.max_queue

    def stats(self) -> dict[str, int]:
        with self._cond:
            total = sum(self._admitted.values())
            return {"running": self._running, "waiting": total - self._running,
                    "max_concurrent": self.max_concurrent, "max_queue": self.max_queue,
                    "max_per_client": self.max_per_client, "clients": len(self._admitted)}

    def in_line(self) -> int:
        """Gradings standing in the line for a slot (admitted ones not yet in it are not counted)."""
        with self._cond:
            return sum(len(t) for clients in self._waiting.values() for t in clients.values())

    async def run(self, fn: Callable[[], Any], client: str = "", *, alone: str | None = None) -> Any:
        """Run ``fn`` when its turn comes. ``alone``: a kind of run a client may have only one of at a
        time (``"predict"``: one predict run per learner); a second is refused at once."""
        self._admit(client, alone)
        try:
            return await run_in_threadpool(self._run, fn, client)
        finally:
            self._release(client, alone)

    def _release(self, client: str, alone: str | None = None) -> None:
        with self._cond:
            self._alone.discard((client, alone))
            _drop(self._admitted, client)
            _drop(self._by_address, _address(client))
            if _address(client) not in self._by_address:
                self._last_turn.pop(_address(client), None)

    def _admit(self, client: str, alone: str | None = None) -> None:
        with self._cond:
            if alone is not None and (client, alone) in self._alone:
                raise QueueFull(f"you already have a {alone} run going (one at a time); wait for it to finish")
            total = sum(self._admitted.values())
            if total >= self.capacity:
                raise QueueFull(f"{total} gradings running or waiting (limit {self.capacity})")
            mine = self._admitted.get(client, 0)
            if mine >= self.max_per_client:
                raise QueueFull(f"you already have {mine} gradings running or waiting "
                                f"(limit {self.max_per_client} per learner); wait for them to finish")
            address = _address(client)
            here = self._by_address.get(address, 0)
            if here >= self.max_per_address:
                raise QueueFull(f"{here} gradings from your address are running or waiting "
                                f"(limit {self.max_per_address} per address); wait for them to finish")
            self._admitted[client] = mine + 1
            self._by_address[address] = here + 1
            if alone is not None:
                self._alone.add((client, alone))

    def _next(self) -> tuple[str, str, int] | None:
        """The grading whose turn it is: of the waiting addresses, the one running the fewest
        gradings (among equals, the one that has waited longest since its last turn, or since it came);
        its first client in turn; its first ticket."""
        if self._running >= self.max_concurrent or not self._waiting:
            return None
        address = min(self._waiting, key=lambda a: (self._running_by_address.get(a, 0), self._last_turn[a]))
        client, tickets = next(iter(self._waiting[address].items()))
        return address, client, tickets[0]

    def _my_turn(self, client: str, ticket: int) -> bool:
        nxt = self._next()
        return nxt is not None and nxt[1] == client and nxt[2] == ticket

    def _run(self, fn: Callable[[], Any], client: str) -> Any:
        ticket = next(self._tickets)
        deadline = time.monotonic() + self.wait_seconds
        address = _address(client)
        with self._cond:
            self._waiting.setdefault(address, OrderedDict()).setdefault(client, deque()).append(ticket)
            self._last_turn.setdefault(address, next(self._turns))
            while not self._my_turn(client, ticket):
                left = deadline - time.monotonic()
                if left <= 0:
                    self._leave(client, ticket)
                    self._cond.notify_all()
                    raise QueueFull(f"waited over {self.wait_seconds:.0f} s for a grading slot")
                self._cond.wait(timeout=left)
            self._leave(client, ticket, served=True)
            self._running += 1
            self._running_by_address[address] = self._running_by_address.get(address, 0) + 1
            self._last_turn[address] = next(self._turns)
            self._cond.notify_all()  # the next client in turn may also fit a free slot
        try:
            return fn()
        finally:
            with self._cond:
                self._running -= 1
                _drop(self._running_by_address, address)
                self._cond.notify_all()

    def _leave(self, client: str, ticket: int, served: bool = False) -> None:
        """Take the ticket out of the line. When it was served, its client goes to the back of its
        address's line and its address to the back of the line of addresses (round-robin)."""
        address = _address(client)
        clients = self._waiting.get(address)
        tickets = clients.get(client) if clients is not None else None
        if clients is None or tickets is None:
            return
        if ticket in tickets:
            tickets.remove(ticket)
        if not tickets:
            del clients[client]
        elif served:
            clients.move_to_end(client)
        if not clients:
            del self._waiting[address]
        elif served:
            self._waiting.move_to_end(address)


def _drop(counts: dict[str, int], key: str) -> None:
    counts[key] -= 1
    if not counts[key]:
        del counts[key]
