"""Recording that never hides a result: the store errors that count as "cannot be written now",
and recording an attempt safely.

The learner's use cases live in :mod:`alignlings.practice.session` (``Practice``), which the CLI,
the web app and notebooks call; these helpers are its building blocks. Grading and recording a check
is :meth:`Practice.check <alignlings.practice.session.Practice.check>` alone (it passes the gate first).
"""

from __future__ import annotations

import logging
import sqlite3

from alignlings.content.exercise import Exercise
from alignlings.grading.verdict import Verdict

log = logging.getLogger("alignlings.practice")


def _store_errors() -> tuple[type[BaseException], ...]:
    errors: tuple[type[BaseException], ...] = (sqlite3.Error, OSError)
    try:  # a classroom on PostgreSQL (the optional extra): its outages count like a locked SQLite file
        import psycopg
    except ImportError:
        return errors
    return (*errors, psycopg.Error)  # psycopg_pool's PoolTimeout and PoolClosed are psycopg.Errors too


STORE_ERRORS: tuple[type[BaseException], ...] = _store_errors()
"""What a progress store raises when it cannot be written (a full disk, a locked or read-only file;
on PostgreSQL, when psycopg is installed, any ``psycopg.Error``: the server down or restarting, no free
connection in the pool in time)."""


def record_safely(store, exercise: Exercise, verdict: Verdict, *, code: str, source: str) -> bool:
    """Record an attempt; False (and a log line) when the store cannot be written."""
    try:
        store.record_attempt(exercise.id, verdict, code=code, source=source, pack=exercise.pack)
        return True
    except STORE_ERRORS:
        log.exception("could not record the attempt on %s", exercise.key)
        return False


def quiz_round_verdict(exercise: Exercise, right: int, total: int) -> Verdict:
    """A finished quiz round as a verdict: passed when every question was answered right."""
    return {"exercise": exercise.id, "passed": right == total, "blanks": [], "cases": [], "error": None,
            "isolation": "none (quiz)", "score": right, "total": total}

