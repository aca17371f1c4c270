"""Admission and fair ordering of gradings on a shared server.

At most ``max_concurrent`` gradings run at once. Each client (a learner's token, or the remote
address where there is none) may have at most ``max_per_client`` gradings running or waiting; one
more is refused at once (429), so one client holding ten slow checks cannot fill the queue. Waiting
gradings are served round-robin across clients: when a slot frees, the client that has waited
longest since its last turn goes next, whatever order the requests came in.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool


def client_key(request) -> str:
    """Who a grading belongs to, for fairness: the learner in a classroom, else the remote address."""
    learner = getattr(getattr(request, "state", None), "learner", None)
    if isinstance(learner, dict) and learner.get("id"):
        return "learner:" + str(learner["id"])
    client = getattr(request, "client", None)
    return (client.host if client else "") or "local"


class QueueFull(Exception):
    """The grading was refused (answered with 429 and this message)."""


class CheckQueue:
    """Bounded, per-client fair admission for gradings; thread-based, so it works whatever event
    loop serves the app. Admission is decided at once: a full queue or a client over its share is
    refused immediately, and a grading that waits longer than ``wait_seconds`` is refused too."""

    def __init__(self, max_concurrent: int = 2, max_queue: int = 8, wait_seconds: float = 120.0,
                 max_per_client: int = 2):
        if max_concurrent < 1 or max_queue < 0 or max_per_client < 1:
            raise ValueError("max_concurrent_checks and max_per_client must be >= 1 and max_queue >= 0")
        self.max_concurrent, self.max_queue, self.wait_seconds = max_concurrent, max_queue, wait_seconds
        self.max_per_client = max_per_client
        self._cond = threading.Condition()
        self._running = 0
        self._admitted: dict[str, int] = {}  # client -> gradings running or waiting
        self._waiting: OrderedDict[str, deque[int]] = OrderedDict()  # client -> its tickets, in turn order
        self._tickets = itertools.count()

    @property
    def capacity(self) -> int:
        return self.max_concurrent + self.max_queue

    def stats(self) -> dict[str, int]:
        with self._cond:
            total = sum(self._admitted.values())
            return {"running": self._running, "waiting": total - self._running,
                    "max_concurrent": self.max_concurrent, "max_queue": self.max_queue,
                    "max_per_client": self.max_per_client, "clients": len(self._admitted)}

    async def run(self, fn: Callable[[], Any], client: str = "") -> Any:
        self._admit(client)
        try:
            return await run_in_threadpool(self._run, fn, client)
        finally:
            with self._cond:
                self._admitted[client] -= 1
                if not self._admitted[client]:
                    del self._admitted[client]

    def _admit(self, client: str) -> None:
        with self._cond:
            total = sum(self._admitted.values())
            if total >= self.capacity:
                raise QueueFull(f"{total} gradings running or waiting (limit {self.capacity})")
            mine = self._admitted.get(client, 0)
            if mine >= self.max_per_client:
                raise QueueFull(f"you already have {mine} gradings running or waiting "
                                f"(limit {self.max_per_client} per learner); wait for them to finish")
            self._admitted[client] = mine + 1

    def _my_turn(self, client: str, ticket: int) -> bool:
        if self._running >= self.max_concurrent or not self._waiting:
            return False
        first_client, tickets = next(iter(self._waiting.items()))
        return first_client == client and tickets[0] == ticket

    def _run(self, fn: Callable[[], Any], client: str) -> Any:
        ticket = next(self._tickets)
        deadline = time.monotonic() + self.wait_seconds
        with self._cond:
            self._waiting.setdefault(client, deque()).append(ticket)
            while not self._my_turn(client, ticket):
                left = deadline - time.monotonic()
                if left <= 0:
                    self._leave(client, ticket)
                    self._cond.notify_all()
                    raise QueueFull(f"waited over {self.wait_seconds:.0f} s for a grading slot")
                self._cond.wait(timeout=left)
            self._leave(client, ticket)
            self._running += 1
            self._cond.notify_all()  # the next client in turn may also fit a free slot
        try:
            return fn()
        finally:
            with self._cond:
                self._running -= 1
                self._cond.notify_all()

    def _leave(self, client: str, ticket: int) -> None:
        """Take the ticket out of the line; a client with more waiting goes to the back (round-robin)."""
        tickets = self._waiting.get(client)
        if tickets is None:
            return
        was_first = tickets and tickets[0] == ticket
        tickets.remove(ticket) if ticket in tickets else None
        if not tickets:
            del self._waiting[client]
        elif was_first:
            self._waiting.move_to_end(client)
