"""The progress database's schema: its tables, the migrations that build and change them (the same
for SQLite and PostgreSQL), and the small definitions every part of the store shares."""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid as uuidlib
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

DEFAULT_PACK = "dpo-grpo"  # the built-in pack's id (alignlings.practice.pack.BUILTIN_PACK_ID)

# kinds of rows in the `events` table
HINT, REVEAL, RESET = "hint", "reveal", "reset"
EVENT_KINDS = (HINT, REVEAL, RESET)


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
    """One progression key per kind of hint, the same for the CLI and the web app (``practice.session``).

    The web app's per-blank counters (``web.blank_hints_taken:ID``, or ``...:PACK/ID`` outside the
    built-in pack: ``{blank: taken}``, never recorded as hint events and blind to resets) become
    ``blank_hints/PACK/ID/N`` (``{"taken", "reset_at"}``, the CLI's form; both counts add up where
    both interfaces were used) with one hint event per hint they counted, dated when the counter last
    changed, so the hint count and the teacher's view include them. The exercise's own hints get their
    key ``hints/PACK/ID``: the hint events since the last reset less the per-blank ones. The web's
    quiz round start (``web.quiz_round_started:ID``) becomes ``quiz_round/PACK/ID``. Nothing is lost:
    every old value is carried over before its row is deleted."""
    def reset_at(learner: str, pack: str, exercise: str) -> str:
        return db.execute("SELECT MAX(created_at) FROM events WHERE learner = ? AND pack = ? AND exercise = ? "
                          "AND kind = ?", (learner, pack, exercise, RESET)).fetchone()[0] or ""

    def get(learner: str, key: str) -> Any:
        rows = db.execute("SELECT value FROM settings WHERE learner = ? AND key = ?", (learner, key)).fetchall()
        return json.loads(rows[0][0]) if rows else None

    def put(learner: str, key: str, value: Any, at: str) -> None:
        db.execute("INSERT INTO settings (learner, key, value, updated_at) VALUES (?, ?, ?, ?) "
                   "ON CONFLICT (learner, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                   (learner, key, json.dumps(value), at))

    def pack_and_id(rest: str) -> tuple[str, str]:
        pack, sep, exercise = rest.partition("/")
        return (pack, exercise) if sep else (DEFAULT_PACK, rest)

    old = db.execute("SELECT learner, key, value, updated_at FROM settings WHERE key LIKE ?", ("web.%",)).fetchall()
    for learner, key, text, at in ((r[0], r[1], r[2], r[3]) for r in old):
        try:
            value = json.loads(text)
        except ValueError:
            continue  # not ours to interpret: left as it is
        if key.startswith("web.blank_hints_taken:") and isinstance(value, dict):
            pack, exercise = pack_and_id(key.partition(":")[2])
            since = reset_at(learner, pack, exercise)
            for blank, taken in value.items():
                if not str(blank).isdigit() or isinstance(taken, bool) or not isinstance(taken, int) or taken < 1:
                    continue
                db.executemany("INSERT INTO events (uuid, learner, pack, exercise, kind, created_at) "
                               "VALUES (?, ?, ?, ?, ?, ?)",
                               [(str(uuidlib.uuid4()), learner, pack, exercise, HINT, at) for _ in range(taken)])
                if at > since:  # taken in the current window (before a reset they no longer count)
                    new_key = f"blank_hints/{pack}/{exercise}/{int(blank)}"
                    cur = get(learner, new_key)
                    had = (cur.get("taken", 0) if isinstance(cur, dict) and cur.get("reset_at") == since
                           and isinstance(cur.get("taken"), int) else 0)
                    put(learner, new_key, {"taken": had + taken, "reset_at": since}, at)
        elif key.startswith("web.quiz_round_started:") and isinstance(value, str):
            pack, exercise = pack_and_id(key.partition(":")[2])
            put(learner, f"quiz_round/{pack}/{exercise}", value, at)
        else:
            continue
        db.execute("DELETE FROM settings WHERE learner = ? AND key = ?", (learner, key))
    hinted = db.execute("SELECT DISTINCT learner, pack, exercise FROM events WHERE kind = ?", (HINT,)).fetchall()
    for learner, pack, exercise in ((r[0], r[1], r[2]) for r in hinted):
        since = reset_at(learner, pack, exercise)
        total = db.execute("SELECT COUNT(*) FROM events WHERE learner = ? AND pack = ? AND exercise = ? AND kind = ? "
                           "AND created_at > ?", (learner, pack, exercise, HINT, since)).fetchone()[0]
        prefix = f"blank_hints/{pack}/{exercise}/"
        per_blank = 0
        for r in db.execute("SELECT key, value FROM settings WHERE learner = ? AND key LIKE ?",
                            (learner, "blank_hints/%")).fetchall():
            if str(r[0]).startswith(prefix):
                v = json.loads(r[1])
                if isinstance(v, dict) and v.get("reset_at") == since and isinstance(v.get("taken"), int):
                    per_blank += v["taken"]
        if total - per_blank > 0 and get(learner, f"hints/{pack}/{exercise}") is None:
            put(learner, f"hints/{pack}/{exercise}", {"taken": total - per_blank, "reset_at": since}, utcnow())


def _v7(db: sqlite3.Connection) -> None:
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


def _v8(db: sqlite3.Connection) -> None:
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


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_v1, _v2, _v3, _v4, _v5, _v6, _v7, _v8]
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(db: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Apply the migrations a database lacks, each in its own transaction; returns the version.

    Safe when several processes open the same new database at once: the version is re-read
    under the write lock, so each migration runs exactly once.
    """
    current = db.execute("PRAGMA user_version").fetchone()[0]
    if 0 < target <= current <= len(MIGRATIONS):
        return current  # up to date: no write lock taken, so a store opens while another process writes
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


_TABLES = {
    "attempts": ("uuid", "pack", "exercise", "passed", "created_at", "code", "verdict", "source"),
    "events": ("uuid", "pack", "exercise", "kind", "created_at"),
    "quiz_answers": ("uuid", "pack", "question_id", "choice", "correct", "created_at"),
    "cloze_results": ("uuid", "pack", "snippet", "key", "token", "correct", "created_at"),
    "review_log": ("uuid", "pack", "item", "rating", "reviewed_at", "source", "duration_ms", "answer"),
}
REVIEW_KINDS = ("cloze", "misconception", "exercise", "quiz", "bug")  # an item key is "KIND/..." (practice.review)


def _pack(pack: Any) -> str:
    if not isinstance(pack, str) or not pack.strip():
        raise ValueError(f"pack: expected a pack id (a non-empty string), got {pack!r}")
    return pack


def _learner_id(learner: Any) -> str:
    if not isinstance(learner, str) or len(learner) > 64:
        raise ValueError(f"learner: expected a learner id (a string of at most 64 characters), got {learner!r}")
    return learner
