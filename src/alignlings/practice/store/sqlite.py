"""The progress store itself (:class:`ProgressStore`): SQLite in WAL mode, or PostgreSQL through
:mod:`alignlings.practice.store.postgres`; one learner's rows per store object.

A classroom (schemas 7 and 8): the class code (``class_code``: a restart keeps the class), one token
per browser or device of a learner (``learner_tokens``), a recovery code per learner kept as a hash
(``issue_recovery_code``, ``recover_learner``; each browser keeps a copy sealed with its own token, so
only it can show the code again: ``recovery_code``), the teacher's ``rename_learner``,
``merge_learners`` and ``remove_learner`` (history kept, or exported and then deleted), and the
teacher's plan: tracks locked until their ``requires`` are solved (``lock_track``) and assignments
with a due time (``add_assignment``).

Why one long module: one store class serves SQLite and PostgreSQL with the same SQL (the dialect
adapter is ``store.postgres``), and each table's reads and writes sit beside each other so a
migration (``store.schema``) and its queries are read together; export and import are ``store.transfer``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import secrets
import sqlite3
import threading
import uuid as uuidlib
import weakref
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from alignlings.practice.store.postgres import _PgConnection, is_database_url, pg_pool
from alignlings.practice.store.schema import (
    _TABLES,
    DEFAULT_PACK,
    attempt_level,
    HINT,
    RESET,
    REVEAL,
    _learner_id,
    _pack,
    _utc_iso,
    insert_returning_id,
    migrate,
    utcnow,
)
from alignlings.practice.store.transfer import EXPORT_FORMAT, EXPORT_VERSION, _field, _unicode, _validate_export

BUSY_TIMEOUT_MS = 30_000
DB_NAME = "progress.sqlite3"


def default_db_path() -> Path:
    """``$ALIGNLINGS_HOME/progress.sqlite3`` if set, else the platform's user data folder."""
    home = os.environ.get("ALIGNLINGS_HOME")
    if home:
        return Path(home).expanduser() / DB_NAME
    import platformdirs

    return Path(platformdirs.user_data_dir("alignlings", appauthor=False)) / DB_NAME


def cloze_due(seen: int, wrong: int, streak: int) -> float:
    """Sampling weight of a cloze position (1 for a position never seen).

    Wrong answers raise it (up to 4x for a position always answered wrong); each correct answer
    in a row since the last wrong one halves the extra and then the base, down to a floor, so a
    position the learner has mastered still comes back now and then.
    """
    if seen <= 0:
        return 1.0
    return max(0.2, (1.0 + 3.0 * wrong / seen) * 0.5 ** streak)
MAX_LEARNER_NAME = 60
MAX_ASSIGNMENT_TITLE = 120


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


RECOVERY_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: copied by hand


def normalize_recovery_code(code: str) -> str:
    """``abcd efgh-jkmn`` -> ``ABCD-EFGH-JKMN``; '' when it cannot be a recovery code."""
    raw = "".join(ch for ch in code.upper() if ch.isalnum())
    if len(raw) != 12 or any(ch not in RECOVERY_ALPHABET for ch in raw):
        return ""
    return f"{raw[:4]}-{raw[4:8]}-{raw[8:]}"


def _recovery_hash(code: str) -> str:
    return hashlib.sha256(("alignlings-recovery:" + code).encode("utf-8")).hexdigest()


def _seal_key(token: str) -> bytes:
    return hashlib.sha256(("alignlings-recovery-seal:" + token).encode("utf-8")).digest()


def _seal(code: str, token: str) -> str:
    """The recovery code, readable only with the browser's token (a one-time pad from its hash)."""
    return bytes(a ^ b for a, b in zip(code.encode("ascii"), _seal_key(token))).hex()


def _unseal(sealed: str, token: str) -> str | None:
    try:
        return bytes(a ^ b for a, b in zip(bytes.fromhex(sealed), _seal_key(token))).decode("ascii")
    except (ValueError, UnicodeDecodeError):
        return None


def _learner_name(name: Any) -> str:
    if not isinstance(name, str):
        raise ValueError(f"name: expected a string, got {type(name).__name__}")
    name = " ".join(name.split())
    if not 1 <= len(name) <= MAX_LEARNER_NAME or not name.isprintable():
        raise ValueError(f"name: expected 1 to {MAX_LEARNER_NAME} printable characters, got {name[:80]!r}")
    _unicode(name, "name")
    return name


def connect(path: str | Path) -> sqlite3.Connection:
    """A raw connection configured like the store's (autocommit; transactions are explicit)."""
    if is_database_url(path):
        return _PgConnection(str(path))  # type: ignore[return-value]
    db = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                         check_same_thread=False)
    db.row_factory = sqlite3.Row
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    db.execute("PRAGMA foreign_keys = ON")
    return db


class _Conn:
    """A thread's connection, weakly tracked by its store so ``close`` can reach it."""

    __slots__ = ("db", "pid", "__weakref__")

    def __init__(self, db: sqlite3.Connection):
        self.db, self.pid = db, os.getpid()


class ProgressStore:
    """One learner's progress in a SQLite file (default: :func:`default_db_path`).

    ``learner``: whose rows this object reads and writes ('' is the one learner of a personal store).
    """

    learner = ""
    _pool = None  # PostgreSQL: the store's connection pool (pg_pool)

    def __init__(self, path: str | Path | None = None, *, learner: str = ""):
        self.learner = _learner_id(learner)
        self.url = str(path) if is_database_url(path) else None
        if self.url is not None:  # PostgreSQL: `path` names the database (its password left out)
            from urllib.parse import urlsplit

            u = urlsplit(self.url)
            self.path: Path | str = f"{u.scheme}://{u.hostname or ''}{u.path}"
        else:
            self.path = Path(path).expanduser() if path is not None else default_db_path()
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._all: weakref.WeakSet[_Conn] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = False
        self._pool = pg_pool(self.url) if self.url is not None else None  # shared by for_learner views
        db = self._db()
        mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0] if self.url is None else "wal"
        if str(mode).lower() != "wal":  # e.g. a file system without shared memory support
            raise RuntimeError(f"{self.path}: could not switch the progress database to WAL mode (got {mode})")
        migrate(db)

    # -- connections ---------------------------------------------------------------------------
    def _db(self) -> sqlite3.Connection:
        """This thread's connection (a new one after a fork: connections never cross processes).

        Only the thread holds it strongly: when a thread ends, its connection is closed with it.
        """
        if self._closed:
            raise RuntimeError(f"{self.path}: the progress store is closed")
        holder = getattr(self._local, "conn", None)
        if holder is None or holder.pid != os.getpid():
            db: Any = _PgConnection(self.url, self._pool) if self.url is not None else connect(self.path)
            if self.url is None:
                db.execute("PRAGMA synchronous = NORMAL")  # safe in WAL: a crash loses no committed data
            holder = self._local.conn = _Conn(db)
            with self._lock:
                self._all.add(holder)
        return holder.db

    def _write(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        """Run ``fn`` in one write transaction, taken up front so writers queue on busy_timeout."""
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            out = fn(db)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return out

    def _read(self, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
        return self._db().execute(sql, args).fetchall()

    def close(self) -> None:
        with self._lock:
            holders, self._all = list(self._all), weakref.WeakSet()
        for holder in holders:
            if holder.pid == os.getpid():
                try:
                    holder.db.close()
                except Exception:  # noqa: BLE001 - closing what may already be broken (sqlite3 or psycopg)
                    pass
        self._local = threading.local()
        self._closed = True
        if self._pool is not None:
            self._pool.close()

    def __enter__(self):
        return self

    # -- learners (a classroom) ------------------------------------------------------------------
    def for_learner(self, learner: str) -> ProgressStore:
        """A view of the same database (same connections) that reads and writes ``learner``'s rows."""
        view = copy.copy(self)
        view.learner = _learner_id(learner)
        return view

    def add_learner(self, name: str) -> tuple[str, str]:
        """Add a learner to the class list; returns ``(learner id, token)``. Only a hash of the token
        is stored: the token is the learner's key (their cookie), shown once."""
        name = _learner_name(name)
        learner, token = uuidlib.uuid4().hex[:16], secrets.token_urlsafe(24)
        now = utcnow()

        def insert(db):
            db.execute("INSERT INTO learners (id, name, token_hash, created_at) VALUES (?, ?, ?, ?)",
                       (learner, name, _token_hash(token), now))
            db.execute("INSERT INTO learner_tokens (token_hash, learner, created_at) VALUES (?, ?, ?)",
                       (_token_hash(token), learner, now))

        self._write(insert)
        return learner, token

    def learner_by_token(self, token: str) -> dict | None:
        """``{"id", "name", "created_at"}`` of the learner whose token this is (any of their
        browsers' or devices'), else None; a removed learner's tokens are gone."""
        if not isinstance(token, str) or not token or len(token) > 200:
            return None
        rows = self._read("SELECT l.id, l.name, l.created_at FROM learner_tokens t JOIN learners l ON l.id = t.learner "
                          "WHERE t.token_hash = ? AND l.removed_at IS NULL", (_token_hash(token),))
        return {"id": rows[0]["id"], "name": rows[0]["name"], "created_at": rows[0]["created_at"]} if rows else None

    def learners(self, *, removed: bool = False) -> list[dict]:
        """The class list, in the order they joined: ``{"id", "name", "created_at"}`` (with
        ``removed=True``, the learners the teacher removed with their history kept, and ``removed_at``)."""
        if removed:
            return [{"id": r["id"], "name": r["name"], "created_at": r["created_at"], "removed_at": r["removed_at"]}
                    for r in self._read("SELECT id, name, created_at, removed_at FROM learners "
                                        "WHERE removed_at IS NOT NULL ORDER BY created_at, id")]
        return [{"id": r["id"], "name": r["name"], "created_at": r["created_at"]}
                for r in self._read("SELECT id, name, created_at FROM learners WHERE removed_at IS NULL "
                                    "ORDER BY created_at, id")]

    def learner_info(self, learner: str) -> dict | None:
        """One learner of the class list (not removed), or None."""
        rows = self._read("SELECT id, name, created_at FROM learners WHERE id = ? AND removed_at IS NULL",
                          (_learner_id(learner),))
        return {"id": rows[0]["id"], "name": rows[0]["name"], "created_at": rows[0]["created_at"]} if rows else None

    # -- the class and the way back (schema 6) ---------------------------------------------------
    def class_code(self, new: Callable[[], str]) -> str:
        """The class code kept in the database; the first call (of any server sharing it) stores
        ``new()``, so a restart, or a second server, accepts the same code."""
        candidate = new()

        def get(db):
            db.execute("INSERT INTO class_info (key, value, updated_at) VALUES ('code', ?, ?) ON CONFLICT DO NOTHING",
                       (candidate, utcnow()))
            return db.execute("SELECT value FROM class_info WHERE key = 'code'").fetchone()[0]

        return self._write(get)

    def set_class_code(self, code: str) -> None:
        """Keep ``code`` as the class code (``serve --class-code``): the old one stops working."""
        if not isinstance(code, str) or not code.strip():
            raise ValueError(f"code: expected a non-empty class code, got {code!r}")
        self._write(lambda db: db.execute(
            "INSERT INTO class_info (key, value, updated_at) VALUES ('code', ?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            (code, utcnow())))

    def issue_recovery_code(self, learner: str, token: str | None = None) -> str:
        """A new recovery code for ``learner`` (the old one stops working); returns it.

        Only its hash is stored, plus, for the browser whose ``token`` is given, a copy sealed with
        that token, so that browser's progress page can show it again (``recovery_code``) while
        someone who reads the database cannot."""
        learner = _learner_id(learner)
        if self.learner_info(learner) is None:
            raise ValueError(f"learner: no learner {learner!r} in the class")
        code = "-".join("".join(secrets.choice(RECOVERY_ALPHABET) for _ in range(4)) for _ in range(3))

        def update(db):
            db.execute("UPDATE learners SET recovery_hash = ? WHERE id = ?", (_recovery_hash(code), learner))
            db.execute("UPDATE learner_tokens SET sealed = '' WHERE learner = ?", (learner,))
            if token:
                db.execute("UPDATE learner_tokens SET sealed = ? WHERE token_hash = ? AND learner = ?",
                           (_seal(code, token), _token_hash(token), learner))

        self._write(update)
        return code

    def recovery_code(self, token: str) -> str | None:
        """The recovery code of the learner signed in with ``token``, when this browser holds it."""
        if not isinstance(token, str) or not token or len(token) > 200:
            return None
        rows = self._read("SELECT t.sealed, l.recovery_hash FROM learner_tokens t JOIN learners l ON l.id = t.learner "
                          "WHERE t.token_hash = ? AND l.removed_at IS NULL", (_token_hash(token),))
        if not rows or not rows[0]["sealed"] or not rows[0]["recovery_hash"]:
            return None
        code = _unseal(rows[0]["sealed"], token)
        return code if code is not None and _recovery_hash(code) == rows[0]["recovery_hash"] else None

    def recover_learner(self, code: str) -> tuple[dict, str] | None:
        """Sign in again as the learner whose recovery code this is, on another browser or device:
        returns ``(learner, new token)`` (the other browsers stay signed in), else None."""
        if not isinstance(code, str) or not normalize_recovery_code(code):
            return None
        code = normalize_recovery_code(code)
        rows = self._read("SELECT id, name, created_at FROM learners WHERE recovery_hash = ? AND removed_at IS NULL",
                          (_recovery_hash(code),))
        if not rows:
            return None
        learner = {"id": rows[0]["id"], "name": rows[0]["name"], "created_at": rows[0]["created_at"]}
        token = secrets.token_urlsafe(24)
        self._write(lambda db: db.execute(
            "INSERT INTO learner_tokens (token_hash, learner, sealed, created_at) VALUES (?, ?, ?, ?)",
            (_token_hash(token), learner["id"], _seal(code, token), utcnow())))
        return learner, token

    def rename_learner(self, learner: str, name: str) -> dict:
        """Give a learner another name (as the teacher sees it); returns the learner."""
        learner, name = _learner_id(learner), _learner_name(name)
        if self.learner_info(learner) is None:
            raise ValueError(f"learner: no learner {learner!r} in the class")
        self._write(lambda db: db.execute("UPDATE learners SET name = ? WHERE id = ?", (name, learner)))
        return self.learner_info(learner)  # type: ignore[return-value]

    def merge_learners(self, into: str, other: str) -> dict:
        """Move all of ``other``'s history (attempts, hints, answers, reviews; settings ``into`` lacks)
        to ``into`` and drop ``other`` from the class list; ``other``'s browsers sign in as ``into``
        from now on. Returns how many rows moved per table. Review schedules are rebuilt from the
        merged log on the next review (``refresh_review_states``)."""
        into, other = _learner_id(into), _learner_id(other)
        if into == other:
            raise ValueError("other: expected another learner than the one merged into")
        for who, arg in ((into, "into"), (other, "other")):
            if self.learner_info(who) is None:
                raise ValueError(f"{arg}: no learner {who!r} in the class")

        def merge(db):
            moved = {}
            for table in _TABLES:
                before = db.total_changes
                db.execute(f"UPDATE {table} SET learner = ? WHERE learner = ?", (into, other))
                moved[table] = db.total_changes - before
            # (SQLite reads ON CONFLICT after a SELECT only when the SELECT has a WHERE, as this one has)
            db.execute("INSERT INTO settings (learner, key, value, updated_at) "
                       "SELECT ?, key, value, updated_at FROM settings WHERE learner = ? ON CONFLICT DO NOTHING",
                       (into, other))
            db.execute("DELETE FROM settings WHERE learner = ?", (other,))
            db.execute("DELETE FROM review_state WHERE learner = ? OR learner = ?", (into, other))
            db.execute("UPDATE learner_tokens SET learner = ?, sealed = '' WHERE learner = ?", (into, other))
            db.execute("DELETE FROM learners WHERE id = ?", (other,))
            return moved

        return self._write(merge)

    def remove_learner(self, learner: str, *, keep_history: bool = True) -> dict:
        """Take a learner off the class list: they can no longer sign in (tokens and recovery code
        dropped). With ``keep_history`` (the default) their rows stay, still counted per exercise
        in a report of removed learners (``learners(removed=True)``); otherwise every row of theirs
        is deleted, and this returns their export (``export``) first so nothing is lost unseen."""
        learner = _learner_id(learner)
        if not learner or self.learner_info(learner) is None:
            raise ValueError(f"learner: no learner {learner!r} in the class")
        exported = self.for_learner(learner).export()

        def remove(db):
            db.execute("DELETE FROM learner_tokens WHERE learner = ?", (learner,))
            if keep_history:
                db.execute("UPDATE learners SET removed_at = ?, recovery_hash = NULL WHERE id = ?", (utcnow(), learner))
                return
            for table in (*_TABLES, "settings", "review_state"):
                db.execute(f"DELETE FROM {table} WHERE learner = ?", (learner,))
            db.execute("DELETE FROM learners WHERE id = ?", (learner,))

        self._write(remove)
        return exported

    # -- the teacher's plan: locked tracks and assignments (schema 7) ------------------------------
    def lock_track(self, track: str, locked: bool = True) -> None:
        """Lock ``track`` (a course track key, ``pack/id``) until a learner has solved its
        ``requires`` (the web layer decides what that means), or unlock it."""
        if not isinstance(track, str) or not track.strip() or len(track) > 200:
            raise ValueError(f"track: expected a track key (pack/id), got {track!r}")
        if locked:
            self._write(lambda db: db.execute(
                "INSERT INTO track_locks (track, locked_at) VALUES (?, ?) ON CONFLICT DO NOTHING", (track, utcnow())))
        else:
            self._write(lambda db: db.execute("DELETE FROM track_locks WHERE track = ?", (track,)))

    def locked_tracks(self) -> set[str]:
        """The keys of the tracks the teacher locked."""
        return {r["track"] for r in self._read("SELECT track FROM track_locks")}

    def add_assignment(self, title: str, exercises: list[str], due: str) -> dict:
        """Keep an assignment: ``title`` (1 to 120 characters), ``exercises`` (course keys, at least
        one, no repeats) and ``due`` (ISO 8601; a naive time is UTC). Returns it with its ``id``."""
        if not isinstance(title, str) or not " ".join(title.split()) or len(title) > MAX_ASSIGNMENT_TITLE:
            raise ValueError(f"title: expected 1 to {MAX_ASSIGNMENT_TITLE} characters, got {title!r}")
        if (not isinstance(exercises, list) or not exercises
                or not all(isinstance(e, str) and e and len(e) <= 200 for e in exercises)):
            raise ValueError(f"exercises: expected a non-empty list of exercise keys, got {exercises!r}")
        if len(set(exercises)) != len(exercises):
            raise ValueError("exercises: expected each exercise once, got repeats")
        row = {"id": uuidlib.uuid4().hex[:12], "title": " ".join(title.split()), "exercises": list(exercises),
               "due": _utc_iso(due, "due"), "created_at": utcnow()}
        self._write(lambda db: db.execute(
            "INSERT INTO assignments (id, title, exercises, due, created_at) VALUES (?, ?, ?, ?, ?)",
            (row["id"], row["title"], json.dumps(row["exercises"]), row["due"], row["created_at"])))
        return row

    def assignments(self) -> list[dict]:
        """The assignments, soonest due first: ``{"id", "title", "exercises", "due", "created_at"}``."""
        return [{"id": r["id"], "title": r["title"], "exercises": json.loads(r["exercises"]), "due": r["due"],
                 "created_at": r["created_at"]}
                for r in self._read("SELECT id, title, exercises, due, created_at FROM assignments "
                                    "ORDER BY due, created_at, id")]

    def assignment(self, assignment: str) -> dict | None:
        return next((a for a in self.assignments() if a["id"] == assignment), None)

    def remove_assignment(self, assignment: str) -> None:
        """Forget an assignment (the learners' work stays: it is their history)."""
        if self.assignment(assignment) is None:
            raise ValueError(f"assignment: no assignment {assignment!r}")
        self._write(lambda db: db.execute("DELETE FROM assignments WHERE id = ?", (assignment,)))

    # -- class interviews (practice.interview) ------------------------------------------------------
    def add_class_interview(self, row: dict) -> dict:
        """Keep a class interview (``id``, ``title``, ``seed``, ``minutes``, ``track``, ``items``,
        ``level``, ``due``); the caller (``practice.interview``) validates it."""
        row = {**row, "due": _utc_iso(row["due"], "due"), "created_at": utcnow()}
        self._write(lambda db: db.execute(
            "INSERT INTO class_info (key, value, updated_at) VALUES (?, ?, ?)",
            (f"interview/{row['id']}", json.dumps(row), row["created_at"])))
        return row

    def class_interviews(self) -> list[dict]:
        """The class interviews, soonest due first."""
        rows = [json.loads(r["value"]) for r in self._read(
            "SELECT value FROM class_info WHERE key LIKE 'interview/%' ORDER BY key")]
        return sorted(rows, key=lambda r: (r["due"], r["created_at"], r["id"]))

    def remove_class_interview(self, interview: str) -> None:
        """Forget a class interview (what the learners did stays in their history)."""
        if not any(r["id"] == interview for r in self.class_interviews()):
            raise ValueError(f"interview: no class interview {interview!r}")
        self._write(lambda db: db.execute("DELETE FROM class_info WHERE key = ?", (f"interview/{interview}",)))

    def settings_of_everyone(self, prefix: str) -> list[tuple[str, Any]]:
        """(learner, value) of every learner's settings whose key starts with ``prefix`` (the teacher's
        view of the learners' interviews)."""
        like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        return [(r["learner"], json.loads(r["value"])) for r in self._read(
            "SELECT learner, value FROM settings WHERE key LIKE ? ESCAPE '\\' ORDER BY learner, key", (like,))]

    def __exit__(self, *exc):
        self.close()

    # -- resets --------------------------------------------------------------------------------
    def _reset_at(self, exercise: str, pack: str) -> str:
        """When the exercise was last reset ('' if never): summaries count what came after."""
        row = self._read("SELECT MAX(created_at) FROM events WHERE learner = ? AND pack = ? AND exercise = ? "
                         "AND kind = ?", (self.learner, _pack(pack), exercise, RESET))
        return row[0][0] or ""

    def _resets(self, pack: str) -> dict[str, str]:
        rows = self._read("SELECT exercise, MAX(created_at) FROM events WHERE learner = ? AND pack = ? AND kind = ? "
                          "GROUP BY exercise", (self.learner, _pack(pack), RESET))
        return {r[0]: r[1] for r in rows}

    def reset(self, exercise: str, *, pack: str = DEFAULT_PACK) -> None:
        """Start the exercise over: its summary restarts; its history stays (``attempts`` flags it)."""
        self._write(lambda db: _insert_event(db, exercise, RESET, _pack(pack), self.learner))

    # -- attempts ------------------------------------------------------------------------------
    def record_attempt(self, exercise: str, verdict: dict, *, code: str, source: str = "cli",
                       pack: str = DEFAULT_PACK) -> int:
        """Store one graded attempt; returns its row id."""
        passed = bool(verdict.get("passed"))
        level = attempt_level(verdict)  # 4 or 5: graded at that level (practice.levels), solved on its own
        text = json.dumps(verdict, ensure_ascii=False, default=str)
        pack = _pack(pack)

        def insert(db):
            return insert_returning_id(
                db, "INSERT INTO attempts (uuid, learner, pack, exercise, passed, created_at, code, verdict, source, "
                "level) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (str(uuidlib.uuid4()), self.learner, pack, exercise, int(passed), utcnow(), code, text, source, level))

        return self._write(insert)

    def attempts(self, exercise: str, *, pack: str = DEFAULT_PACK) -> list[dict]:
        """Every attempt at the exercise, oldest first, including those before a reset
        (``before_reset`` is True for them; ``reset_at`` is the last reset or None)."""
        reset_at = self._reset_at(exercise, pack)
        rows = self._read("SELECT id, uuid, passed, created_at, code, verdict, source, level FROM attempts "
                          "WHERE learner = ? AND pack = ? AND exercise = ? ORDER BY created_at, id",
                          (self.learner, _pack(pack), exercise))
        return [{"id": r["id"], "uuid": r["uuid"], "passed": bool(r["passed"]), "created_at": r["created_at"],
                 "code": r["code"], "verdict": json.loads(r["verdict"]), "source": r["source"],
                 "level": int(r["level"] or 0), "before_reset": bool(reset_at) and r["created_at"] <= reset_at, "reset_at": reset_at or None}
                for r in rows]

    # -- hints and solutions -------------------------------------------------------------------
    def record_hint(self, exercise: str, *, pack: str = DEFAULT_PACK, available: int | None = None) -> int:
        """Record one more hint taken; returns how many have been taken since the last reset.

        With ``available`` (the exercise's number of hints) nothing is recorded once all were
        taken, and the count never exceeds it: asking again re-shows the last hint.
        """
        pack = _pack(pack)
        if available is not None and (isinstance(available, bool) or not isinstance(available, int)
                                      or available < 0):
            raise ValueError(f"available: expected a non-negative int, got {available!r}")

        def insert(db):
            if available is None or _count_events(db, exercise, HINT, pack, self.learner) < available:
                _insert_event(db, exercise, HINT, pack, self.learner)
            return _count_events(db, exercise, HINT, pack, self.learner)

        return self._write(insert)

    def hints_taken(self, exercise: str, *, pack: str = DEFAULT_PACK) -> int:
        return _count_events(self._db(), exercise, HINT, _pack(pack), self.learner)

    def take_hint(self, exercise: str, *, key: str, limit: int, pack: str = DEFAULT_PACK) -> int:
        """One more hint on the progression ``key`` (a setting ``{"taken", "reset_at"}``: the
        exercise's own hints or one blank's), recorded as one hint event, in one transaction; at
        ``limit`` nothing is recorded. Returns the hints taken on ``key`` since the exercise's last reset."""
        pack = _pack(pack)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"limit: expected a non-negative int, got {limit!r}")

        def take(db):
            taken, since = _progression(db, self.learner, pack, exercise, key)
            if taken < limit:
                _insert_event(db, exercise, HINT, pack, self.learner)
                taken += 1
                db.execute("INSERT INTO settings (learner, key, value, updated_at) VALUES (?, ?, ?, ?) "
                           "ON CONFLICT (learner, key) DO UPDATE SET value = excluded.value, "
                           "updated_at = excluded.updated_at",
                           (self.learner, key, json.dumps({"taken": taken, "reset_at": since}), utcnow()))
            return taken

        return self._write(take)

    def hint_progress(self, exercise: str, *, key: str, pack: str = DEFAULT_PACK) -> int:
        """How many hints of the progression ``key`` were taken since the exercise's last reset."""
        return _progression(self._db(), self.learner, _pack(pack), exercise, key)[0]

    def record_solution_revealed(self, exercise: str, *, pack: str = DEFAULT_PACK) -> None:
        self._write(lambda db: _insert_event(db, exercise, REVEAL, _pack(pack), self.learner))

    # -- quiz ------------------------------------------------------------------------------------
    def record_quiz_answer(self, question_id: str, choice: int, correct: bool, *, pack: str = DEFAULT_PACK,
                           exercise: str = "") -> None:
        """Record an answer to question ``question_id`` of ``exercise`` (its id in ``pack``; '' for an
        answer whose exercise is not known, which any exercise of the pack asking that id claims)."""
        if not isinstance(exercise, str) or len(exercise) > 200:
            raise ValueError(f"exercise: expected an exercise id (a string of at most 200 characters), got {exercise!r}")
        self._write(lambda db: db.execute(
            "INSERT INTO quiz_answers (uuid, learner, pack, exercise, question_id, choice, correct, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (str(uuidlib.uuid4()), self.learner, _pack(pack), exercise, question_id, int(choice), int(bool(correct)),
             utcnow())))

    def quiz_answers(self, *, pack: str = DEFAULT_PACK, exercise: str | None = None) -> dict[str, dict]:
        """question id -> the last answer: ``choice``, ``correct``, ``attempts`` (answers so far), ``answered_at``;
        with ``exercise``, only the answers to that exercise's questions (and those recorded before
        answers named their exercise)."""
        out: dict[str, dict] = {}
        sql = ("SELECT question_id, choice, correct, created_at FROM quiz_answers WHERE learner = ? AND pack = ?"
               + (" AND exercise IN (?, '')" if exercise is not None else "") + " ORDER BY created_at, id")
        args: tuple = (self.learner, _pack(pack)) + ((exercise,) if exercise is not None else ())
        for r in self._read(sql, args):
            n = out.get(r["question_id"], {}).get("attempts", 0)
            out[r["question_id"]] = {"choice": r["choice"], "correct": bool(r["correct"]), "attempts": n + 1,
                                     "answered_at": r["created_at"]}
        return out

    # -- cloze -----------------------------------------------------------------------------------
    def record_cloze(self, snippet: str, results: list[dict], *, pack: str = DEFAULT_PACK) -> None:
        """Store one round of the cloze drill: each result ``{"key", "token", "correct"}``."""
        rows = []
        now = utcnow()
        for i, r in enumerate(results):
            try:
                rows.append((str(uuidlib.uuid4()), self.learner, _pack(pack), snippet, str(r["key"]), str(r["token"]),
                             int(bool(r["correct"])), now))
            except (KeyError, TypeError):
                raise ValueError(f"results[{i}]: expected a dict with 'key', 'token' and 'correct', "
                                 f"got {r!r}") from None
        self._write(lambda db: db.executemany(
            "INSERT INTO cloze_results (uuid, learner, pack, snippet, key, token, correct, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows))

    def cloze_stats(self, snippet: str, *, pack: str = DEFAULT_PACK) -> dict[str, dict]:
        """position key -> ``seen``, ``wrong``, ``right``, ``streak`` (correct answers in a row, latest
        first), ``token`` (as last recorded) and ``due`` (the sampling weight, see :func:`cloze_due`)."""
        stats: dict[str, dict] = {}
        rows = self._read("SELECT key, token, correct FROM cloze_results WHERE learner = ? AND pack = ? "
                          "AND snippet = ? ORDER BY created_at, id", (self.learner, _pack(pack), snippet))
        for r in rows:
            s = stats.setdefault(r["key"], {"seen": 0, "wrong": 0, "streak": 0, "token": r["token"]})
            s["seen"] += 1
            s["token"] = r["token"]
            if r["correct"]:
                s["streak"] += 1
            else:
                s["wrong"] += 1
                s["streak"] = 0
        for s in stats.values():
            s["right"] = s["seen"] - s["wrong"]
            s["due"] = cloze_due(s["seen"], s["wrong"], s["streak"])
        return stats

    # -- spaced review ---------------------------------------------------------------------------
    # The log is the truth; a state row is the scheduler's card after replaying its item's log.
    # Every write inserts log rows and recomputes the touched items' states in one transaction,
    # from the whole log read under the write lock, so concurrent writers never lose a review.
    def record_reviews(self, rows: list[dict], replay: Callable[[list[dict]], tuple[str, str]], *,
                       pack: str = DEFAULT_PACK) -> int:
        """Append review rows (``item``, ``rating`` 1-4, ``reviewed_at`` ISO 8601, optional ``uuid``,
        ``source``, ``duration_ms``, ``answer``) and refresh each touched item's state with
        ``replay(logs) -> (card_json, due_iso)``; returns how many rows were new (a uuid already
        stored is skipped, so replaying history twice adds nothing)."""
        pack = _pack(pack)
        prepared = []
        for i, r in enumerate(rows):
            w = f"rows[{i}]"
            if not isinstance(r, dict):
                raise ValueError(f"{w}: expected a dict, got {type(r).__name__}")
            item = _field(r, "item", str, w)
            rating = _field(r, "rating", int, w)
            if not 1 <= rating <= 4:
                raise ValueError(f"{w}.rating: expected 1 (again) to 4 (easy), got {rating}")
            duration = r.get("duration_ms")
            if duration is not None and (isinstance(duration, bool) or not isinstance(duration, int) or duration < 0):
                raise ValueError(f"{w}.duration_ms: expected a non-negative int or None, got {duration!r}")
            prepared.append((str(r.get("uuid") or uuidlib.uuid4()), self.learner, pack, item, rating,
                             _utc_iso(r.get("reviewed_at"), w + ".reviewed_at"), str(r.get("source", "review")),
                             duration, str(r.get("answer", ""))[:4000]))

        def insert(db):
            before = db.total_changes
            db.executemany("INSERT INTO review_log (uuid, learner, pack, item, rating, reviewed_at, source, "
                           "duration_ms, answer) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING", prepared)
            added = db.total_changes - before
            if added:
                _refresh_states(db, self.learner, pack, sorted({r[3] for r in prepared}), replay)
            return added

        return self._write(insert)

    def rerate_review(self, uuid: str, rating: int, replay: Callable[[list[dict]], tuple[str, str]], *,
                      pack: str = DEFAULT_PACK) -> bool:
        """Change the rating of one review row (the learner said a right answer was hard or easy)
        and refresh its item's state; False when no row of this learner has ``uuid``."""
        pack = _pack(pack)
        if isinstance(rating, bool) or not isinstance(rating, int) or not 1 <= rating <= 4:
            raise ValueError(f"rating: expected 1 (again) to 4 (easy), got {rating!r}")

        def update(db):
            row = db.execute("SELECT item FROM review_log WHERE learner = ? AND pack = ? AND uuid = ?",
                             (self.learner, pack, uuid)).fetchone()
            if row is None:
                return False
            db.execute("UPDATE review_log SET rating = ? WHERE learner = ? AND pack = ? AND uuid = ?",
                       (rating, self.learner, pack, uuid))
            _refresh_states(db, self.learner, pack, [row[0]], replay)
            return True

        return self._write(update)

    def refresh_review_states(self, replay: Callable[[list[dict]], tuple[str, str]], *,
                              pack: str = DEFAULT_PACK) -> int:
        """Recompute the states whose log has rows they do not fold in (after an import); returns how many."""
        pack = _pack(pack)

        def refresh(db):
            stale = [r[0] for r in db.execute(
                "SELECT l.item FROM review_log l LEFT JOIN review_state s ON s.learner = l.learner "
                "AND s.pack = l.pack AND s.item = l.item WHERE l.learner = ? AND l.pack = ? GROUP BY l.item "
                "HAVING COUNT(*) != COALESCE(MAX(s.n_logs), -1)", (self.learner, pack))]
            _refresh_states(db, self.learner, pack, stale, replay)
            return len(stale)

        return self._write(refresh)

    def history_mark(self) -> tuple:
        """Changes whenever a row is added to any history table (a cheap "anything new?" test)."""
        sql = "SELECT " + ", ".join(f"(SELECT MAX(id) FROM {t}) AS m{i}" for i, t in enumerate((*_TABLES, "events")))
        row = self._read(sql)[0]
        return tuple(row[i] for i in range(len(_TABLES) + 1))

    def review_sources(self, *, pack: str = DEFAULT_PACK) -> dict[str, list[dict]]:
        """The history spaced review derives its items from, oldest first: ``quiz`` answers
        (uuid, question_id, correct, created_at), ``cloze`` results (uuid, snippet, key, correct,
        created_at), ``attempts`` (uuid, exercise, passed, created_at, blanks: each verdict blank's
        index, passed and misconception) and ``events`` (uuid, exercise, kind, created_at)."""
        pack = _pack(pack)
        quiz = [dict(r) for r in self._read(
            "SELECT uuid, question_id, correct, created_at FROM quiz_answers WHERE learner = ? AND pack = ? "
            "ORDER BY created_at, id", (self.learner, pack))]
        cloze = [dict(r) for r in self._read(
            "SELECT uuid, snippet, key, correct, created_at FROM cloze_results WHERE learner = ? AND pack = ? "
            "ORDER BY created_at, id", (self.learner, pack))]
        attempts = []
        for r in self._read("SELECT uuid, exercise, passed, created_at, verdict, level FROM attempts WHERE learner = ? "
                            "AND pack = ? ORDER BY created_at, id", (self.learner, pack)):
            try:
                blanks = json.loads(r["verdict"]).get("blanks") or []
            except (ValueError, AttributeError):
                blanks = []
            attempts.append({"uuid": r["uuid"], "exercise": r["exercise"], "passed": bool(r["passed"]),
                             "created_at": r["created_at"], "level": int(r["level"] or 0),
                             "blanks": [{"index": b.get("index"), "passed": b.get("passed"),
                                         "misconception": b.get("misconception")}
                                        for b in blanks if isinstance(b, dict)]})
        events = [dict(r) for r in self._read(
            "SELECT uuid, exercise, kind, created_at FROM events WHERE learner = ? AND pack = ? ORDER BY created_at, id",
            (self.learner, pack))]
        return {"quiz": quiz, "cloze": cloze, "attempts": attempts, "events": events}

    def review_log(self, *, pack: str = DEFAULT_PACK, item: str | None = None) -> list[dict]:
        """Review rows, oldest first (one item's, or the pack's)."""
        sql, args = "SELECT * FROM review_log WHERE learner = ? AND pack = ?", [self.learner, _pack(pack)]
        if item is not None:
            sql, args = sql + " AND item = ?", args + [item]
        return [_review_row(r) for r in self._read(sql + " ORDER BY reviewed_at, id", tuple(args))]

    def review_states(self, *, pack: str = DEFAULT_PACK) -> dict[str, dict]:
        """item -> ``card`` (the scheduler's JSON), ``due`` (ISO 8601 UTC), ``n_logs``, ``updated_at``."""
        rows = self._read("SELECT item, card, due, n_logs, updated_at FROM review_state WHERE learner = ? AND pack = ?",
                          (self.learner, _pack(pack)))
        return {r["item"]: {"card": r["card"], "due": r["due"], "n_logs": r["n_logs"],
                            "updated_at": r["updated_at"]} for r in rows}

    # -- summary ---------------------------------------------------------------------------------
    def summary(self, pack: str = DEFAULT_PACK) -> dict[str, dict]:
        """exercise -> ``solved``, ``attempts``, ``hints``, ``revealed``, ``solved_at``, ``last_attempt_at``,
        for one pack, counting only what happened after the exercise's last reset."""
        return self._summaries(_pack(pack), self.learner).get(self.learner, {})

    def class_summaries(self, pack: str = DEFAULT_PACK) -> dict[str, dict[str, dict]]:
        """learner id -> :meth:`summary` of that learner, for every learner of the database at once
        (three queries, whatever the size of the class)."""
        return self._summaries(_pack(pack), None)

    def class_attempt_blanks(self, pack: str = DEFAULT_PACK) -> list[dict]:
        """Every learner's failed attempts in one pack, oldest first: ``learner``, ``exercise`` and the
        verdict's ``blanks`` (index, passed, misconception); one query (the teacher's misconception table)."""
        out = []
        for r in self._read("SELECT learner, exercise, verdict FROM attempts WHERE pack = ? AND passed = 0 "
                            "ORDER BY created_at, id", (_pack(pack),)):
            try:
                blanks = json.loads(r["verdict"]).get("blanks") or []
            except (ValueError, AttributeError):
                blanks = []
            out.append({"learner": r["learner"], "exercise": r["exercise"],
                        "blanks": [{"index": b.get("index"), "passed": b.get("passed"),
                                    "misconception": b.get("misconception")} for b in blanks if isinstance(b, dict)]})
        return out

    def level_summary(self, pack: str = DEFAULT_PACK) -> dict[str, dict[int, dict]]:
        """exercise -> level (4, 5) -> ``solved``, ``attempts``, ``solved_at``: the attempts graded at
        levels 4 and 5 (``practice.levels``), each level on its own, since the exercise's last reset."""
        return self._level_summaries(_pack(pack), self.learner).get(self.learner, {})

    def class_level_summaries(self, pack: str = DEFAULT_PACK) -> dict[str, dict[str, dict[int, dict]]]:
        """learner id -> :meth:`level_summary` of that learner, for every learner at once."""
        return self._level_summaries(_pack(pack), None)

    def _level_summaries(self, pack: str, learner: str | None) -> dict[str, dict[str, dict[int, dict]]]:
        where, args = ("learner = ? AND pack = ?", (learner, pack)) if learner is not None else ("pack = ?", (pack,))
        resets = {(r[0], r[1]): r[2] for r in self._read(
            f"SELECT learner, exercise, MAX(created_at) FROM events WHERE {where} AND kind = ? "
            "GROUP BY learner, exercise", (*args, RESET))}
        out: dict[str, dict[str, dict[int, dict]]] = {}
        for r in self._read(f"SELECT learner, exercise, level, passed, created_at FROM attempts WHERE {where} "
                            "AND level > 0 ORDER BY created_at, id", args):
            if r["created_at"] <= resets.get((r["learner"], r["exercise"]), ""):
                continue
            e = out.setdefault(r["learner"], {}).setdefault(r["exercise"], {}).setdefault(
                int(r["level"]), {"solved": False, "attempts": 0, "solved_at": None})
            e["attempts"] += 1
            if r["passed"] and not e["solved"]:
                e["solved"], e["solved_at"] = True, r["created_at"]
        return out

    def _summaries(self, pack: str, learner: str | None) -> dict[str, dict[str, dict]]:
        where, args = ("learner = ? AND pack = ?", (learner, pack)) if learner is not None else ("pack = ?", (pack,))
        resets = {(r[0], r[1]): r[2] for r in self._read(
            f"SELECT learner, exercise, MAX(created_at) FROM events WHERE {where} AND kind = ? "
            "GROUP BY learner, exercise", (*args, RESET))}
        out: dict[str, dict[str, dict]] = {}

        def entry(who: str, ex: str) -> dict:
            return out.setdefault(who, {}).setdefault(ex, {
                "solved": False, "attempts": 0, "hints": 0, "revealed": False, "solved_at": None,
                "last_attempt_at": None})

        for r in self._read(f"SELECT learner, exercise, passed, created_at FROM attempts WHERE {where} "
                            "AND level = 0 ORDER BY created_at, id", args):
            e = entry(r["learner"], r["exercise"])
            if r["created_at"] <= resets.get((r["learner"], r["exercise"]), ""):
                continue
            e["attempts"] += 1
            e["last_attempt_at"] = r["created_at"]
            if r["passed"] and not e["solved"]:
                e["solved"], e["solved_at"] = True, r["created_at"]
        for r in self._read(f"SELECT learner, exercise, kind, created_at FROM events WHERE {where} "
                            "ORDER BY created_at, id", args):
            e = entry(r["learner"], r["exercise"])
            if r["kind"] == RESET or r["created_at"] <= resets.get((r["learner"], r["exercise"]), ""):
                continue
            if r["kind"] == HINT:
                e["hints"] += 1
            elif r["kind"] == REVEAL:
                e["revealed"] = True
        return out

    def packs(self) -> list[str]:
        """The ids of the packs that have any rows, sorted."""
        rows = self._read(" UNION ".join(f"SELECT DISTINCT pack FROM {t} WHERE learner = ?" for t in _TABLES)
                          + " ORDER BY 1", (self.learner,) * len(_TABLES))
        return [r[0] for r in rows]

    # -- first run and settings ------------------------------------------------------------------
    def is_first_run(self) -> bool:
        return self.get_setting("welcomed_at") is None

    def mark_welcomed(self) -> None:
        if self.is_first_run():
            self.set_setting("welcomed_at", utcnow())

    def get_setting(self, key: str, default=None):
        rows = self._read("SELECT value FROM settings WHERE learner = ? AND key = ?", (self.learner, key))
        return json.loads(rows[0][0]) if rows else default

    def set_setting(self, key: str, value) -> None:
        """Store a JSON-able value (ValueError otherwise)."""
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"setting {key!r}: value is not JSON-able: {exc}") from None
        self._write(lambda db: db.execute(
            "INSERT INTO settings (learner, key, value, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (learner, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            (self.learner, key, text, utcnow())))

    # -- export / import -------------------------------------------------------------------------
    def export(self) -> dict:
        """Everything of this store's learner, as JSON-able data: ``{"format": "alignlings-progress", "version": 3, ...}``
        (every row names its ``pack``). Review states are not exported: they are derived from
        ``review_log``, and rebuilt from it after an import (``refresh_review_states``)."""
        db, me = self._db(), (self.learner,)
        db.execute("BEGIN")  # one consistent snapshot
        try:
            attempts = [{"uuid": r["uuid"], "pack": r["pack"], "exercise": r["exercise"], "passed": bool(r["passed"]),
                         "created_at": r["created_at"], "code": r["code"], "verdict": json.loads(r["verdict"]),
                         "source": r["source"]}
                        for r in db.execute("SELECT * FROM attempts WHERE learner = ? ORDER BY created_at, id", me)]
            events = [{"uuid": r["uuid"], "pack": r["pack"], "exercise": r["exercise"], "kind": r["kind"],
                       "created_at": r["created_at"]}
                      for r in db.execute("SELECT * FROM events WHERE learner = ? ORDER BY created_at, id", me)]
            quiz = [{"uuid": r["uuid"], "pack": r["pack"], "exercise": r["exercise"], "question_id": r["question_id"],
                     "choice": r["choice"],
                     "correct": bool(r["correct"]), "created_at": r["created_at"]}
                    for r in db.execute("SELECT * FROM quiz_answers WHERE learner = ? ORDER BY created_at, id", me)]
            cloze = [{"uuid": r["uuid"], "pack": r["pack"], "snippet": r["snippet"], "key": r["key"], "token": r["token"],
                      "correct": bool(r["correct"]), "created_at": r["created_at"]}
                     for r in db.execute("SELECT * FROM cloze_results WHERE learner = ? ORDER BY created_at, id", me)]
            settings = {r["key"]: {"value": json.loads(r["value"]), "updated_at": r["updated_at"]}
                        for r in db.execute("SELECT * FROM settings WHERE learner = ? ORDER BY key", me)}
            reviews = [_review_row(r) for r in db.execute("SELECT * FROM review_log WHERE learner = ? ORDER BY reviewed_at, id", me)]
        finally:
            db.execute("COMMIT")
        return {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "exported_at": utcnow(),
                "attempts": attempts, "events": events, "quiz_answers": quiz, "cloze": cloze, "settings": settings,
                "review_log": reviews}

    def import_(self, data: dict, *, exercises: Collection[str] | None = None,
                questions: Collection[str] | None = None, packs: Collection[str] | None = None) -> dict:
        """Merge an export into this store; returns how many rows of each kind were new.

        Rows are matched by uuid, so importing the same export twice adds nothing. A setting is
        taken when it is missing here or was changed later there. Everything is validated before
        anything is written; bad data raises ValueError naming the field: wrong types, integers
        or timestamps out of range, strings that are not valid Unicode, verdicts or settings nested
        deeper than ``MAX_IMPORT_DEPTH``, and (when given) exercise ids not in ``exercises``
        (attempts, events, cloze snippets), quiz question ids not in ``questions`` or pack ids
        not in ``packs``.
        """
        rows = _validate_export(data, exercises=exercises, questions=questions, packs=packs)

        def merge(db):
            counts = {}
            for table, cols in _TABLES.items():
                sql = (f"INSERT INTO {table} (learner, {', '.join(cols)}) "
                       f"VALUES (?, {', '.join('?' * len(cols))}) ON CONFLICT DO NOTHING")
                before = db.total_changes
                db.executemany(sql, [(self.learner, *(r[c] for c in cols)) for r in rows[table]])
                counts[table] = db.total_changes - before
            before = db.total_changes
            for key, s in rows["settings"].items():
                db.execute(
                    "INSERT INTO settings (learner, key, value, updated_at) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (learner, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at "
                    "WHERE excluded.updated_at > settings.updated_at", (self.learner, key, s["value"], s["updated_at"]))
            counts["settings"] = db.total_changes - before
            return counts

        counts = self._write(merge)
        return {"attempts": counts["attempts"], "events": counts["events"], "quiz_answers": counts["quiz_answers"],
                "cloze": counts["cloze_results"], "settings": counts["settings"], "review_log": counts["review_log"]}


def _review_row(r: sqlite3.Row) -> dict:
    return {"uuid": r["uuid"], "pack": r["pack"], "item": r["item"], "rating": r["rating"],
            "reviewed_at": r["reviewed_at"], "source": r["source"], "duration_ms": r["duration_ms"],
            "answer": r["answer"]}


def _refresh_states(db: sqlite3.Connection, learner: str, pack: str, items: list[str],
                    replay: Callable[[list[dict]], tuple[str, str]]) -> None:
    now = utcnow()
    for item in items:
        logs = [_review_row(r) for r in db.execute(
            "SELECT * FROM review_log WHERE learner = ? AND pack = ? AND item = ? ORDER BY reviewed_at, id",
            (learner, pack, item))]
        if not logs:
            db.execute("DELETE FROM review_state WHERE learner = ? AND pack = ? AND item = ?", (learner, pack, item))
            continue
        card, due = replay(logs)
        db.execute("INSERT INTO review_state (learner, pack, item, card, due, n_logs, updated_at) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?) "
                   "ON CONFLICT (learner, pack, item) DO UPDATE SET card = excluded.card, due = excluded.due, "
                   "n_logs = excluded.n_logs, updated_at = excluded.updated_at",
                   (learner, pack, item, card, _utc_iso(due, "replay due"), len(logs), now))


def _insert_event(db: sqlite3.Connection, exercise: str, kind: str, pack: str, learner: str) -> None:
    db.execute("INSERT INTO events (uuid, learner, pack, exercise, kind, created_at) VALUES (?, ?, ?, ?, ?, ?)",
               (str(uuidlib.uuid4()), learner, pack, exercise, kind, utcnow()))


def _progression(db: sqlite3.Connection, learner: str, pack: str, exercise: str, key: str) -> tuple[int, str]:
    """``(taken, reset_at)`` of a hint progression: what its setting says when it was written since
    the exercise's last reset, else 0."""
    since = db.execute("SELECT MAX(created_at) FROM events WHERE learner = ? AND pack = ? AND exercise = ? "
                       "AND kind = ?", (learner, pack, exercise, RESET)).fetchone()[0] or ""
    rows = db.execute("SELECT value FROM settings WHERE learner = ? AND key = ?", (learner, key)).fetchall()
    try:
        seen = json.loads(rows[0][0]) if rows else {}
    except ValueError:
        seen = {}
    taken = seen.get("taken") if isinstance(seen, dict) and seen.get("reset_at") == since else 0
    return (taken if isinstance(taken, int) and not isinstance(taken, bool) and taken > 0 else 0), since


def _count_events(db: sqlite3.Connection, exercise: str, kind: str, pack: str, learner: str) -> int:
    reset = db.execute("SELECT MAX(created_at) FROM events WHERE learner = ? AND pack = ? AND exercise = ? "
                       "AND kind = ?", (learner, pack, exercise, RESET)).fetchone()[0] or ""
    return db.execute("SELECT COUNT(*) FROM events WHERE learner = ? AND pack = ? AND exercise = ? AND kind = ? "
                      "AND created_at > ?", (learner, pack, exercise, kind, reset)).fetchone()[0]
