"""The learner's progress: an embedded SQLite store shared by the CLI and the web app.

Everything is append-only history (attempts with their verdicts, hints taken, solutions
revealed, quiz answers, cloze results, resets); the summary a learner sees is computed from it.
``reset`` marks a point in time instead of deleting rows, so "start over" never loses history.

Concurrency: the CLI and a web server (threads) may write at once. The database runs in WAL mode
with a busy timeout, each thread (and each process) gets its own connection, and every write is one
``BEGIN IMMEDIATE`` transaction, so writers queue instead of failing or overwriting each other.

Moving between machines: ``export`` writes versioned JSON; ``import_`` merges it. Every row carries
a uuid, so importing the same export twice adds nothing.

PostgreSQL (a classroom served by several processes): ``ProgressStore("postgresql://...")`` runs the
same SQL through psycopg. A thin dialect layer (:class:`_PgConnection`) gives it the subset of
``sqlite3.Connection`` the store uses: ``?`` placeholders become ``%s``, ``INSERT OR IGNORE`` becomes
``ON CONFLICT DO NOTHING``, ``INTEGER PRIMARY KEY`` an identity column, ``PRAGMA user_version`` a
one-row ``alignlings_schema`` table, and ``BEGIN IMMEDIATE`` a transaction that takes one advisory
lock, so writers queue exactly as they do on SQLite. The migrations are the same for both. A store
opens at most ``ALIGNLINGS_DB_POOL_SIZE`` (default 10) connections, pooled by ``psycopg_pool``: each
statement, or each transaction, borrows one, so however many threads a server runs, several server
processes fit within PostgreSQL's ``max_connections``.

The schema is versioned with ``PRAGMA user_version``; ``MIGRATIONS[i]`` takes a database from
version ``i`` to ``i + 1`` and they run in order, each in its own transaction.

Rows are keyed by pack and exercise (a teacher's ``dpo-loss`` is not the built-in one): every
method takes ``pack=``, defaulting to the built-in pack, to which rows written before packs were
recorded (schema version 2, export version 1) belong.

Learners (a classroom, ``alignlings serve --classroom``): every row also names its learner ('' for
the one learner of a personal store). A store object reads and writes one learner's rows
(``for_learner`` gives a view of the same database bound to another learner); ``add_learner`` and
``learner_by_token`` keep the class list, with only a hash of each learner's token. Schema 6 keeps
the class code (``class_code``: a restart keeps the class), one token per browser or device of a
learner (``learner_tokens``), a recovery code per learner kept as a hash (``issue_recovery_code``,
``recover_learner``; each browser keeps a copy sealed with its own token, so only it can show the
code again: ``recovery_code``), and the teacher's ``rename_learner``, ``merge_learners`` and
``remove_learner`` (history kept, or exported and then deleted). Schema 7 keeps the teacher's
plan: tracks locked until their ``requires`` are solved (``lock_track``) and assignments with a
due time (``add_assignment``).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import secrets
import sqlite3
import threading
import uuid as uuidlib
import weakref
from collections.abc import Callable, Collection
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

EXPORT_FORMAT = "alignlings-progress"
EXPORT_VERSION = 3  # 2: rows carry "pack"; 3: "review_log" (spaced review); older files import as before
DEFAULT_PACK = "dpo-grpo"  # the built-in pack's id (alignlings.practice.pack.BUILTIN_PACK_ID)
BUSY_TIMEOUT_MS = 30_000
DB_NAME = "progress.sqlite3"

# kinds of rows in the `events` table
HINT, REVEAL, RESET = "hint", "reveal", "reset"
EVENT_KINDS = (HINT, REVEAL, RESET)


def default_db_path() -> Path:
    """``$ALIGNLINGS_HOME/progress.sqlite3`` if set, else the platform's user data folder."""
    home = os.environ.get("ALIGNLINGS_HOME")
    if home:
        return Path(home).expanduser() / DB_NAME
    import platformdirs

    return Path(platformdirs.user_data_dir("alignlings", appauthor=False)) / DB_NAME


_clock_lock = threading.Lock()
_last_now: datetime | None = None


def utcnow() -> str:
    """Now in UTC, ISO 8601 with microseconds and an explicit offset (sorts as text).

    Strictly increasing within a process, even where the system clock is coarse, so an attempt
    made right after a reset always sorts after it.
    """
    global _last_now
    with _clock_lock:
        now = datetime.now(timezone.utc)
        if _last_now is not None and now <= _last_now:
            now = _last_now + timedelta(microseconds=1)
        _last_now = now
    return now.isoformat(timespec="microseconds")


def _utc_iso(value: Any, where: str) -> str:
    """Normalise an imported timestamp to the store's format; naive times are taken as UTC."""
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected an ISO 8601 timestamp string, got {type(value).__name__}")
    if len(value) > 64:
        raise ValueError(f"{where}: expected an ISO 8601 timestamp, got {len(value)} characters")
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
        return dt.astimezone(timezone.utc).isoformat(timespec="microseconds")
    except (ValueError, OverflowError):  # OverflowError: year 1 or 9999 shifted out of range by its offset
        raise ValueError(f"{where}: not an ISO 8601 timestamp in range: {value[:40]!r}") from None


def cloze_due(seen: int, wrong: int, streak: int) -> float:
    """Sampling weight of a cloze position (1 for a position never seen).

    Wrong answers raise it (up to 4x for a position always answered wrong); each correct answer
    in a row since the last wrong one halves the extra and then the base, down to a floor, so a
    position the learner has mastered still comes back now and then.
    """
    if seen <= 0:
        return 1.0
    return max(0.2, (1.0 + 3.0 * wrong / seen) * 0.5 ** streak)


# -- schema ------------------------------------------------------------------------------------

def _script(db: sqlite3.Connection, sql: str) -> None:
    """Run statements one by one: ``executescript`` would commit the migration's transaction."""
    for statement in sql.split(";"):
        if statement.strip():
            db.execute(statement)


def _v1(db: sqlite3.Connection) -> None:
    _script(db, """
        CREATE TABLE attempts (
            id INTEGER PRIMARY KEY,
            uuid TEXT NOT NULL UNIQUE,
            exercise TEXT NOT NULL,
            passed INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            code TEXT NOT NULL,
            verdict TEXT NOT NULL
        );
        CREATE TABLE events (
            id INTEGER PRIMARY KEY,
            uuid TEXT NOT NULL UNIQUE,
            exercise TEXT NOT NULL,
            kind TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE TABLE quiz_answers (
            id INTEGER PRIMARY KEY,
            uuid TEXT NOT NULL UNIQUE,
            question_id TEXT NOT NULL,
            choice INTEGER NOT NULL,
            correct INTEGER NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE TABLE settings (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
    """)


def _v2(db: sqlite3.Connection) -> None:
    """Where an attempt came from (cli, web, notebook); the cloze drill's history; indexes."""
    _script(db, """
        ALTER TABLE attempts ADD COLUMN source TEXT NOT NULL DEFAULT 'cli';
        CREATE TABLE cloze_results (
            id INTEGER PRIMARY KEY,
            uuid TEXT NOT NULL UNIQUE,
            snippet TEXT NOT NULL,
            key TEXT NOT NULL,
            token TEXT NOT NULL,
            correct INTEGER NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE INDEX attempts_exercise ON attempts (exercise, created_at);
        CREATE INDEX events_exercise ON events (exercise, kind, created_at);
        CREATE INDEX quiz_question ON quiz_answers (question_id, created_at);
        CREATE INDEX cloze_snippet ON cloze_results (snippet, key, created_at);
    """)


def _v3(db: sqlite3.Connection) -> None:
    """Rows keyed by pack and exercise; existing rows belong to the built-in pack."""
    _script(db, f"""
        ALTER TABLE attempts ADD COLUMN pack TEXT NOT NULL DEFAULT '{DEFAULT_PACK}';
        ALTER TABLE events ADD COLUMN pack TEXT NOT NULL DEFAULT '{DEFAULT_PACK}';
        ALTER TABLE quiz_answers ADD COLUMN pack TEXT NOT NULL DEFAULT '{DEFAULT_PACK}';
        ALTER TABLE cloze_results ADD COLUMN pack TEXT NOT NULL DEFAULT '{DEFAULT_PACK}';
        DROP INDEX attempts_exercise;
        DROP INDEX events_exercise;
        DROP INDEX quiz_question;
        DROP INDEX cloze_snippet;
        CREATE INDEX attempts_exercise ON attempts (pack, exercise, created_at);
        CREATE INDEX events_exercise ON events (pack, exercise, kind, created_at);
        CREATE INDEX quiz_question ON quiz_answers (pack, question_id, created_at);
        CREATE INDEX cloze_snippet ON cloze_results (pack, snippet, key, created_at);
    """)


def _v4(db: sqlite3.Connection) -> None:
    """Spaced review (alignlings.practice.review): an append-only log of reviews, and each item's
    scheduler state, which is derived from its log (``n_logs`` says how many rows it folds in)."""
    _script(db, """
        CREATE TABLE review_log (
            id INTEGER PRIMARY KEY,
            uuid TEXT NOT NULL UNIQUE,
            pack TEXT NOT NULL,
            item TEXT NOT NULL,
            rating INTEGER NOT NULL,
            reviewed_at TEXT NOT NULL,
            source TEXT NOT NULL,
            duration_ms INTEGER,
            answer TEXT NOT NULL DEFAULT ''
        );
        CREATE TABLE review_state (
            pack TEXT NOT NULL,
            item TEXT NOT NULL,
            card TEXT NOT NULL,
            due TEXT NOT NULL,
            n_logs INTEGER NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (pack, item)
        );
        CREATE INDEX review_log_item ON review_log (pack, item, reviewed_at);
        CREATE INDEX review_state_due ON review_state (pack, due);
    """)


def _v5(db: sqlite3.Connection) -> None:
    """Learners (a classroom): a ``learner`` column on every history table ('' for the one learner
    of a personal store, so existing rows stay theirs), review states and settings keyed by learner
    too (those tables are rebuilt: a primary key cannot be altered), and the class list."""
    _script(db, """
        ALTER TABLE attempts ADD COLUMN learner TEXT NOT NULL DEFAULT '';
        ALTER TABLE events ADD COLUMN learner TEXT NOT NULL DEFAULT '';
        ALTER TABLE quiz_answers ADD COLUMN learner TEXT NOT NULL DEFAULT '';
        ALTER TABLE cloze_results ADD COLUMN learner TEXT NOT NULL DEFAULT '';
        ALTER TABLE review_log ADD COLUMN learner TEXT NOT NULL DEFAULT '';
        CREATE TABLE review_state_v5 (
            learner TEXT NOT NULL DEFAULT '',
            pack TEXT NOT NULL,
            item TEXT NOT NULL,
            card TEXT NOT NULL,
            due TEXT NOT NULL,
            n_logs INTEGER NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (learner, pack, item)
        );
        INSERT INTO review_state_v5 (learner, pack, item, card, due, n_logs, updated_at)
            SELECT '', pack, item, card, due, n_logs, updated_at FROM review_state;
        DROP TABLE review_state;
        ALTER TABLE review_state_v5 RENAME TO review_state;
        CREATE TABLE settings_v5 (
            learner TEXT NOT NULL DEFAULT '',
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (learner, key)
        );
        INSERT INTO settings_v5 (learner, key, value, updated_at) SELECT '', key, value, updated_at FROM settings;
        DROP TABLE settings;
        ALTER TABLE settings_v5 RENAME TO settings;
        CREATE TABLE learners (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            token_hash TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL
        );
        DROP INDEX attempts_exercise;
        DROP INDEX events_exercise;
        DROP INDEX quiz_question;
        DROP INDEX cloze_snippet;
        DROP INDEX review_log_item;
        CREATE INDEX attempts_exercise ON attempts (learner, pack, exercise, created_at);
        CREATE INDEX events_exercise ON events (learner, pack, exercise, kind, created_at);
        CREATE INDEX quiz_question ON quiz_answers (learner, pack, question_id, created_at);
        CREATE INDEX cloze_snippet ON cloze_results (learner, pack, snippet, key, created_at);
        CREATE INDEX review_log_item ON review_log (learner, pack, item, reviewed_at);
        CREATE INDEX review_state_due ON review_state (learner, pack, due);
    """)


def _v6(db: sqlite3.Connection) -> None:
    """The class itself (its code survives a restart), learners who come back (a recovery code, kept
    as a hash; one token per browser or device) and learners the teacher removed (history kept)."""
    _script(db, """
        CREATE TABLE class_info (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        ALTER TABLE learners ADD COLUMN recovery_hash TEXT;
        ALTER TABLE learners ADD COLUMN removed_at TEXT;
        CREATE TABLE learner_tokens (
            token_hash TEXT PRIMARY KEY,
            learner TEXT NOT NULL,
            sealed TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL
        );
        INSERT INTO learner_tokens (token_hash, learner, sealed, created_at)
            SELECT token_hash, id, '', created_at FROM learners;
        CREATE INDEX learner_tokens_learner ON learner_tokens (learner);
    """)


def _v7(db: sqlite3.Connection) -> None:
    """The teacher's course plan: tracks locked until their ``requires`` are solved, and
    assignments (a set of exercises, by course key, with a due time in UTC)."""
    _script(db, """
        CREATE TABLE track_locks (
            track TEXT PRIMARY KEY,
            locked_at TEXT NOT NULL
        );
        CREATE TABLE assignments (
            id TEXT PRIMARY KEY,
            title TEXT NOT NULL,
            exercises TEXT NOT NULL,
            due TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
    """)


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1, _v2, _v3, _v4, _v5, _v6, _v7]
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
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(db: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Apply the migrations a database lacks, each in its own transaction; returns the version.

    Safe when several processes open the same new database at once: the version is re-read
    under the write lock, so each migration runs exactly once.
    """
    while True:
        db.execute("BEGIN IMMEDIATE")
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > len(MIGRATIONS):
                raise RuntimeError(
                    f"progress database schema version {version} is newer than this alignlings "
                    f"knows ({len(MIGRATIONS)}); upgrade alignlings")
            if version >= target:
                db.execute("COMMIT")
                return version
            MIGRATIONS[version](db)
            db.execute(f"PRAGMA user_version = {version + 1}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise


def is_database_url(path: Any) -> bool:
    return isinstance(path, str) and path.startswith(("postgresql://", "postgres://"))


PG_WRITE_LOCK = 0x616C676E  # the advisory lock every write transaction takes ("algn")


class _PgRow(dict):
    """A psycopg row read like ``sqlite3.Row``: by column name or by position."""

    def __getitem__(self, key):
        if isinstance(key, int):
            return list(self.values())[key]
        return super().__getitem__(key)


def _pg_row_factory(cursor):
    names = [c.name for c in cursor.description or ()]
    return lambda values: _PgRow(zip(names, values))


class _PgCursor:
    """A statement's rows, read at once (``cur``: a psycopg cursor, another _PgCursor or None)."""

    def __init__(self, cur, lastrowid=None):
        self._rows = list(cur.fetchall()) if cur is not None and (
            isinstance(cur, _PgCursor) or cur.description) else []
        self._next, self.lastrowid = 0, lastrowid

    def fetchone(self):
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self):
        rows, self._next = self._rows[self._next:], len(self._rows)
        return rows

    def __iter__(self):
        return iter(self.fetchall())


PG_POOL_SIZE = 10
"""Connections to PostgreSQL one store (one ``serve`` process) opens at most; ``ALIGNLINGS_DB_POOL_SIZE``
overrides it. Every thread borrows one per statement or per transaction, so a server's 40 worker
threads (or a test's 100) never need more: several processes fit PostgreSQL's default 100 slots."""
PG_POOL_TIMEOUT_S = 10.0
"""How long a statement waits for a free pooled connection (or for the server to come back) before
``psycopg_pool.PoolTimeout`` (a ``psycopg.Error``: ``service.STORE_ERRORS`` keeps the verdict)."""


def pg_pool_size() -> int:
    raw = os.environ.get("ALIGNLINGS_DB_POOL_SIZE", "").strip()
    if not raw:
        return PG_POOL_SIZE
    try:
        size = int(raw)
    except ValueError:
        size = 0
    if not 1 <= size <= 1000:
        raise ValueError(f"ALIGNLINGS_DB_POOL_SIZE: expected a whole number from 1 to 1000, got {raw!r}")
    return size


def _pg_prepare(db) -> None:
    """The one-row version table that stands in for SQLite's ``PRAGMA user_version``."""
    with db.transaction():
        db.execute("SELECT pg_advisory_xact_lock(%s)", (PG_WRITE_LOCK,))
        db.execute("CREATE TABLE IF NOT EXISTS alignlings_schema (version INTEGER NOT NULL)")
        row: Any = db.execute("SELECT COUNT(*) FROM alignlings_schema").fetchone()
        if row[0] == 0:
            db.execute("INSERT INTO alignlings_schema (version) VALUES (0)")


def pg_pool(url: str):
    """A bounded pool of autocommit connections to ``url`` (``psycopg_pool``, the classroom extra)."""
    try:
        from psycopg_pool import ConnectionPool
    except ImportError:
        raise RuntimeError("a PostgreSQL progress store needs psycopg and psycopg_pool: "
                           "pip install 'alignlings[classroom]'") from None
    pool = ConnectionPool(url, min_size=1, max_size=pg_pool_size(), timeout=PG_POOL_TIMEOUT_S, open=False,
                          kwargs={"autocommit": True, "row_factory": _pg_row_factory},
                          check=ConnectionPool.check_connection, name="alignlings-progress")
    pool.open(wait=False)
    try:
        with pool.connection() as db:
            _pg_prepare(db)
    except BaseException:
        pool.close()
        raise
    return pool


class _PgConnection:
    """The subset of ``sqlite3.Connection`` the store uses, on PostgreSQL (see the module docstring).

    With ``pool`` (a store's: :func:`pg_pool`), a statement outside a transaction borrows a pooled
    connection for itself only, and ``BEGIN`` borrows one until ``COMMIT`` or ``ROLLBACK``; without,
    it owns one connection (``connect(url)``, for scripts and tests)."""

    def __init__(self, url: str, pool=None):
        self._pool, self._tx, self._db = pool, None, None  # type: Any, Any, Any
        self.total_changes = 0
        if pool is None:
            import psycopg

            self._db = psycopg.connect(url, autocommit=True, row_factory=_pg_row_factory)
            _pg_prepare(self._db)

    @staticmethod
    def translate(sql: str) -> str:
        sql = sql.replace("%", "%%").replace("?", "%s")
        sql = sql.replace("INTEGER PRIMARY KEY", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY")
        if "INSERT OR IGNORE" in sql:
            sql = sql.replace("INSERT OR IGNORE", "INSERT") + " ON CONFLICT DO NOTHING"
        return sql

    def execute(self, sql: str, args: tuple | list = ()) -> _PgCursor:
        text = sql.strip()
        upper = text.upper()
        if upper in ("BEGIN IMMEDIATE", "BEGIN"):
            db = self._tx = self._pool.getconn() if self._pool is not None else self._db
            try:
                db.execute("BEGIN")
                if upper == "BEGIN IMMEDIATE":
                    db.execute("SELECT pg_advisory_xact_lock(%s)", (PG_WRITE_LOCK,))
            except BaseException:
                self._release()
                raise
            return _PgCursor(None)
        if upper in ("COMMIT", "ROLLBACK"):
            try:
                if self._tx is not None:
                    self._tx.execute(upper)
            finally:
                self._release()
            return _PgCursor(None)
        db = self._tx if self._tx is not None else self._db
        if db is None:  # pooled, outside a transaction: a connection for this statement only
            with self._pool.connection() as db:
                return self._run(db, text, upper, args)
        return self._run(db, text, upper, args)

    def _release(self) -> None:
        db, self._tx = self._tx, None
        if db is not None and self._pool is not None:
            self._pool.putconn(db)  # the pool rolls back what is left open and drops a broken one

    def _run(self, db, text: str, upper: str, args) -> _PgCursor:
        if upper.startswith("PRAGMA USER_VERSION ="):
            db.execute("UPDATE alignlings_schema SET version = %s", (int(text.split("=")[1]),))
            return _PgCursor(None)
        if upper == "PRAGMA USER_VERSION":
            return _PgCursor(db.execute("SELECT version FROM alignlings_schema"))
        if upper.startswith("PRAGMA"):
            return _PgCursor(db.execute("SELECT 'wal'"))  # SQLite's tuning: nothing to do here
        returning = upper.startswith("INSERT INTO ATTEMPTS")
        cur = db.execute(self.translate(text) + (" RETURNING id" if returning else ""), tuple(args))
        if cur.rowcount and cur.rowcount > 0 and upper.startswith(("INSERT", "UPDATE", "DELETE")):
            self.total_changes += cur.rowcount
        out = _PgCursor(cur)  # rows read now: a pooled connection goes back when this returns
        if returning:
            out.lastrowid = out._rows[0][0]
        return out

    def executemany(self, sql: str, rows) -> None:
        for row in rows:  # one by one: rowcount then counts what each row changed
            self.execute(sql, row)

    def close(self) -> None:
        self._release()
        if self._db is not None:
            self._db.close()


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
        mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if self.url is None and str(mode).lower() != "wal":  # e.g. a file system without shared memory support
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
            db = (_PgConnection(self.url, self._pool) if self.url is not None
                  else connect(self.path))
            db.execute("PRAGMA synchronous = NORMAL")  # safe in WAL: a crash loses no committed data
            holder = self._local.conn = _Conn(db)  # type: ignore[arg-type]
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
            db.execute("INSERT OR IGNORE INTO class_info (key, value, updated_at) VALUES ('code', ?, ?)",
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
            db.execute("INSERT OR IGNORE INTO settings (learner, key, value, updated_at) "
                       "SELECT ?, key, value, updated_at FROM settings WHERE learner = ?", (into, other))
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
                "INSERT OR IGNORE INTO track_locks (track, locked_at) VALUES (?, ?)", (track, utcnow())))
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
        text = json.dumps(verdict, ensure_ascii=False, default=str)
        pack = _pack(pack)

        def insert(db):
            cur = db.execute(
                "INSERT INTO attempts (uuid, learner, pack, exercise, passed, created_at, code, verdict, source) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (str(uuidlib.uuid4()), self.learner, pack, exercise, int(passed), utcnow(), code, text, source))
            return cur.lastrowid

        return self._write(insert)

    def attempts(self, exercise: str, *, pack: str = DEFAULT_PACK) -> list[dict]:
        """Every attempt at the exercise, oldest first, including those before a reset
        (``before_reset`` is True for them; ``reset_at`` is the last reset or None)."""
        reset_at = self._reset_at(exercise, pack)
        rows = self._read("SELECT id, uuid, passed, created_at, code, verdict, source FROM attempts "
                          "WHERE learner = ? AND pack = ? AND exercise = ? ORDER BY created_at, id",
                          (self.learner, _pack(pack), exercise))
        return [{"id": r["id"], "uuid": r["uuid"], "passed": bool(r["passed"]), "created_at": r["created_at"],
                 "code": r["code"], "verdict": json.loads(r["verdict"]), "source": r["source"],
                 "before_reset": bool(reset_at) and r["created_at"] <= reset_at, "reset_at": reset_at or None}
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

    def record_solution_revealed(self, exercise: str, *, pack: str = DEFAULT_PACK) -> None:
        self._write(lambda db: _insert_event(db, exercise, REVEAL, _pack(pack), self.learner))

    # -- quiz ------------------------------------------------------------------------------------
    def record_quiz_answer(self, question_id: str, choice: int, correct: bool, *, pack: str = DEFAULT_PACK) -> None:
        self._write(lambda db: db.execute(
            "INSERT INTO quiz_answers (uuid, learner, pack, question_id, choice, correct, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (str(uuidlib.uuid4()), self.learner, _pack(pack), question_id, int(choice), int(bool(correct)), utcnow())))

    def quiz_answers(self, *, pack: str = DEFAULT_PACK) -> dict[str, dict]:
        """question id -> the last answer: ``choice``, ``correct``, ``attempts`` (answers so far), ``answered_at``."""
        out: dict[str, dict] = {}
        rows = self._read("SELECT question_id, choice, correct, created_at FROM quiz_answers WHERE learner = ? "
                          "AND pack = ? ORDER BY created_at, id", (self.learner, _pack(pack)))
        for r in rows:
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
            db.executemany("INSERT OR IGNORE INTO review_log (uuid, learner, pack, item, rating, reviewed_at, source, "
                           "duration_ms, answer) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", prepared)
            added = db.total_changes - before
            if added:
                _refresh_states(db, self.learner, pack, sorted({r[3] for r in prepared}), replay)
            return added

        return self._write(insert)

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
        for r in self._read("SELECT uuid, exercise, passed, created_at, verdict FROM attempts WHERE learner = ? "
                            "AND pack = ? ORDER BY created_at, id", (self.learner, pack)):
            try:
                blanks = json.loads(r["verdict"]).get("blanks") or []
            except (ValueError, AttributeError):
                blanks = []
            attempts.append({"uuid": r["uuid"], "exercise": r["exercise"], "passed": bool(r["passed"]),
                             "created_at": r["created_at"],
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
        pack = _pack(pack)
        resets = self._resets(pack)
        out: dict[str, dict] = {}

        def entry(ex):
            return out.setdefault(ex, {"solved": False, "attempts": 0, "hints": 0, "revealed": False,
                                       "solved_at": None, "last_attempt_at": None})

        for r in self._read("SELECT exercise, passed, created_at FROM attempts WHERE learner = ? AND pack = ? "
                            "ORDER BY created_at, id", (self.learner, pack)):
            e = entry(r["exercise"])
            if r["created_at"] <= resets.get(r["exercise"], ""):
                continue
            e["attempts"] += 1
            e["last_attempt_at"] = r["created_at"]
            if r["passed"] and not e["solved"]:
                e["solved"], e["solved_at"] = True, r["created_at"]
        for r in self._read("SELECT exercise, kind, created_at FROM events WHERE learner = ? AND pack = ? "
                            "ORDER BY created_at, id", (self.learner, pack)):
            e = entry(r["exercise"])
            if r["kind"] == RESET or r["created_at"] <= resets.get(r["exercise"], ""):
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
            quiz = [{"uuid": r["uuid"], "pack": r["pack"], "question_id": r["question_id"], "choice": r["choice"],
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
                sql = (f"INSERT OR IGNORE INTO {table} (learner, {', '.join(cols)}) "
                       f"VALUES (?, {', '.join('?' * len(cols))})")
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


_TABLES = {
    "attempts": ("uuid", "pack", "exercise", "passed", "created_at", "code", "verdict", "source"),
    "events": ("uuid", "pack", "exercise", "kind", "created_at"),
    "quiz_answers": ("uuid", "pack", "question_id", "choice", "correct", "created_at"),
    "cloze_results": ("uuid", "pack", "snippet", "key", "token", "correct", "created_at"),
    "review_log": ("uuid", "pack", "item", "rating", "reviewed_at", "source", "duration_ms", "answer"),
}
REVIEW_KINDS = ("cloze", "misconception", "exercise", "quiz", "bug")  # an item key is "KIND/..." (practice.review)


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


def _pack(pack: Any) -> str:
    if not isinstance(pack, str) or not pack.strip():
        raise ValueError(f"pack: expected a pack id (a non-empty string), got {pack!r}")
    return pack


def _learner_id(learner: Any) -> str:
    if not isinstance(learner, str) or len(learner) > 64:
        raise ValueError(f"learner: expected a learner id (a string of at most 64 characters), got {learner!r}")
    return learner


def _insert_event(db: sqlite3.Connection, exercise: str, kind: str, pack: str, learner: str) -> None:
    db.execute("INSERT INTO events (uuid, learner, pack, exercise, kind, created_at) VALUES (?, ?, ?, ?, ?, ?)",
               (str(uuidlib.uuid4()), learner, pack, exercise, kind, utcnow()))


def _count_events(db: sqlite3.Connection, exercise: str, kind: str, pack: str, learner: str) -> int:
    reset = db.execute("SELECT MAX(created_at) FROM events WHERE learner = ? AND pack = ? AND exercise = ? "
                       "AND kind = ?", (learner, pack, exercise, RESET)).fetchone()[0] or ""
    return db.execute("SELECT COUNT(*) FROM events WHERE learner = ? AND pack = ? AND exercise = ? AND kind = ? "
                      "AND created_at > ?", (learner, pack, exercise, kind, reset)).fetchone()[0]


# -- validating an export ------------------------------------------------------------------------

MAX_IMPORT_DEPTH = 32  # nesting of an imported verdict or setting value
MAX_CHOICE = 1 << 16  # a quiz choice is an option index


def _field(row: dict, name: str, types: type | tuple[type, ...], where: str):
    if name not in row:
        raise ValueError(f"{where}.{name}: missing")
    value = row[name]
    if not isinstance(value, types) or (types is int and isinstance(value, bool)):
        expected = types.__name__ if isinstance(types, type) else " or ".join(t.__name__ for t in types)
        raise ValueError(f"{where}.{name}: expected {expected}, got {type(value).__name__}")
    if isinstance(value, str):
        _unicode(value, f"{where}.{name}")
    return value


def _unicode(value: str, where: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate ("\ud800" in the JSON): SQLite cannot store it
        raise ValueError(f"{where}: not valid Unicode text (a lone surrogate)") from None


def _known(value: str, known: Collection[str] | None, what: str, where: str) -> str:
    if known is not None and value not in known:
        raise ValueError(f"{where}: {value[:80]!r} is not {what} of the loaded packs")
    return value


def _plain_json(value: Any, where: str) -> None:
    """A verdict or setting value: JSON nested at most MAX_IMPORT_DEPTH deep, finite numbers, valid text.

    Checked iteratively (a deep value cannot overflow the stack here) so that storing it and
    serving it back (``json.dumps``, Starlette's ``allow_nan=False``) cannot fail later.
    """
    stack = [(value, 1, where)]
    while stack:
        item, depth, path = stack.pop()
        if depth > MAX_IMPORT_DEPTH:
            raise ValueError(f"{where}: nested deeper than {MAX_IMPORT_DEPTH} levels")
        if isinstance(item, dict):
            for key, sub in item.items():
                _unicode(key, f"{path} key")
                stack.append((sub, depth + 1, f"{path}.{key[:40]}"))
        elif isinstance(item, list):
            stack.extend((sub, depth + 1, f"{path}[{i}]") for i, sub in enumerate(item))
        elif isinstance(item, str):
            _unicode(item, path)
        elif isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{path}: expected a finite number, got {item!r}")
        elif item is not None and not isinstance(item, (bool, int, float)):
            raise ValueError(f"{path}: expected JSON data, got {type(item).__name__}")


def _uuid(row: dict, where: str) -> str:
    value = _field(row, "uuid", str, where)
    try:
        return str(uuidlib.UUID(value))
    except ValueError:
        raise ValueError(f"{where}.uuid: not a uuid: {value!r}") from None


def _rows(data: dict, name: str) -> list[dict]:
    items = data.get(name, [])
    if not isinstance(items, list):
        raise ValueError(f"{name}: expected a list, got {type(items).__name__}")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValueError(f"{name}[{i}]: expected an object, got {type(item).__name__}")
    return items


def _validate_export(data: Any, *, exercises: Collection[str] | None = None,
                     questions: Collection[str] | None = None,
                     packs: Collection[str] | None = None) -> dict[str, Any]:
    """Check an export and turn it into rows for the tables (timestamps normalised to UTC).

    ``exercises`` / ``questions`` / ``packs``: when given, the ids an export may name (``import_``).
    """
    if not isinstance(data, dict):
        raise ValueError(f"progress data: expected a JSON object, got {type(data).__name__}")
    if data.get("format") != EXPORT_FORMAT:
        raise ValueError(f"format: expected {EXPORT_FORMAT!r}, got {data.get('format')!r}")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= EXPORT_VERSION:
        raise ValueError(f"version: expected an integer from 1 to {EXPORT_VERSION}, got {version!r}")
    out: dict[str, Any] = {t: [] for t in _TABLES}

    def pack_of(r: dict, w: str) -> str:  # version 1 rows predate packs: the built-in pack's
        pack = _pack(_field(r, "pack", str, w)) if "pack" in r else DEFAULT_PACK
        return _known(pack, packs, "one", w + ".pack")

    for i, r in enumerate(_rows(data, "attempts")):
        w = f"attempts[{i}]"
        verdict = _field(r, "verdict", dict, w)
        _plain_json(verdict, w + ".verdict")
        out["attempts"].append({
            "uuid": _uuid(r, w), "pack": pack_of(r, w), "exercise": _known(_field(r, "exercise", str, w), exercises, "an exercise",
                                                    w + ".exercise"),
            "passed": int(_field(r, "passed", bool, w)), "created_at": _utc_iso(r.get("created_at"), w + ".created_at"),
            "code": _field(r, "code", str, w), "verdict": json.dumps(verdict, ensure_ascii=False),
            "source": _field(r, "source", str, w) if "source" in r else "cli",
        })
    for i, r in enumerate(_rows(data, "events")):
        w = f"events[{i}]"
        kind = _field(r, "kind", str, w)
        if kind not in EVENT_KINDS:
            raise ValueError(f"{w}.kind: expected one of {', '.join(EVENT_KINDS)}, got {kind!r}")
        exercise = _known(_field(r, "exercise", str, w), exercises, "an exercise", w + ".exercise")
        out["events"].append({"uuid": _uuid(r, w), "pack": pack_of(r, w), "exercise": exercise, "kind": kind,
                              "created_at": _utc_iso(r.get("created_at"), w + ".created_at")})
    for i, r in enumerate(_rows(data, "quiz_answers")):
        w = f"quiz_answers[{i}]"
        choice = _field(r, "choice", int, w)
        if not 0 <= choice < MAX_CHOICE:
            raise ValueError(f"{w}.choice: expected an option index from 0 to {MAX_CHOICE - 1}, got {choice}")
        question = _known(_field(r, "question_id", str, w), questions, "a quiz question", w + ".question_id")
        out["quiz_answers"].append({"uuid": _uuid(r, w), "pack": pack_of(r, w), "question_id": question, "choice": choice,
                                    "correct": int(_field(r, "correct", bool, w)),
                                    "created_at": _utc_iso(r.get("created_at"), w + ".created_at")})
    for i, r in enumerate(_rows(data, "cloze")):
        w = f"cloze[{i}]"
        snippet = _known(_field(r, "snippet", str, w), exercises, "an exercise", w + ".snippet")
        out["cloze_results"].append({"uuid": _uuid(r, w), "pack": pack_of(r, w), "snippet": snippet,
                                     "key": _field(r, "key", str, w), "token": _field(r, "token", str, w),
                                     "correct": int(_field(r, "correct", bool, w)),
                                     "created_at": _utc_iso(r.get("created_at"), w + ".created_at")})
    for i, r in enumerate(_rows(data, "review_log")):
        w = f"review_log[{i}]"
        item = _field(r, "item", str, w)
        kind, sep, rest = item.partition("/")
        if not sep or kind not in REVIEW_KINDS or not rest or len(item) > 400:
            raise ValueError(f"{w}.item: expected KIND/..., KIND one of {', '.join(REVIEW_KINDS)}, got {item[:80]!r}")
        if kind == "quiz":
            _known(rest, questions, "a quiz question", w + ".item")
        else:
            _known(rest.split("/")[0], exercises, "an exercise", w + ".item")
        rating = _field(r, "rating", int, w)
        if not 1 <= rating <= 4:
            raise ValueError(f"{w}.rating: expected 1 (again) to 4 (easy), got {rating}")
        duration = r.get("duration_ms")
        if duration is not None and (isinstance(duration, bool) or not isinstance(duration, int)
                                     or not 0 <= duration < 1 << 40):
            raise ValueError(f"{w}.duration_ms: expected a non-negative int or null, got {duration!r}")
        out["review_log"].append({"uuid": _uuid(r, w), "pack": pack_of(r, w), "item": item, "rating": rating,
                                  "reviewed_at": _utc_iso(r.get("reviewed_at"), w + ".reviewed_at"),
                                  "source": _field(r, "source", str, w) if "source" in r else "review",
                                  "duration_ms": duration,
                                  "answer": _field(r, "answer", str, w) if "answer" in r else ""})
    settings = data.get("settings", {})
    if not isinstance(settings, dict):
        raise ValueError(f"settings: expected an object, got {type(settings).__name__}")
    out["settings"] = {}
    for key, s in settings.items():
        w = f"settings[{key[:40]!r}]"
        _unicode(key, w)
        if not isinstance(s, dict) or "value" not in s:
            raise ValueError(f"{w}: expected an object with 'value' and 'updated_at'")
        _plain_json(s["value"], w + ".value")
        out["settings"][key] = {"value": json.dumps(s["value"], ensure_ascii=False),
                                "updated_at": _utc_iso(s.get("updated_at"), w + ".updated_at")}
    return out
