"""Recording that never hides a result: the store errors that count as "cannot be written now",
and recording an attempt safely.

The learner's use cases live in :mod:`alignlings.practice.session` (``Practice``), which the CLI,
the web app and notebooks call; these helpers are its building blocks (and ``grade_and_record`` the
one-call form for a caller without a session).
"""

from __future__ import annotations

import logging
import sqlite3

from alignlings.practice.pack import Exercise
from alignlings.practice.verdict import Verdict

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


def grade_and_record(grader, store, exercise: Exercise, *, code: str | None = None,
                     fills: list[str] | None = None, lang: str = "en", source: str = "cli",
                     run_main: bool = True) -> tuple[Verdict, str]:
    """Grade a whole file (``code``) or one fill per blank (``fills``) and record the attempt.

    Returns the verdict and the code that was graded (for fills, the template with them in place).
    ``store`` may be None (nothing recorded)."""
    verdict: Verdict = grader.check(exercise.key, code, fills=fills, lang=lang, run_main=run_main)
    graded = code if code is not None else grader.submission(exercise, fills=fills).code
    if store is not None:
        record_safely(store, exercise, verdict, code=graded, source=source)
    return verdict, graded


def quiz_round_verdict(exercise: Exercise, right: int, total: int) -> Verdict:
    """A finished quiz round as a verdict: passed when every question was answered right."""
    return {"exercise": exercise.id, "passed": right == total, "blanks": [], "cases": [], "error": None,
            "isolation": "none (quiz)", "score": right, "total": total}


def record_quiz_round(store, exercise: Exercise, right: int, total: int, *, source: str) -> Verdict:
    verdict = quiz_round_verdict(exercise, right, total)
    record_safely(store, exercise, verdict, code="", source=source)
    return verdict
