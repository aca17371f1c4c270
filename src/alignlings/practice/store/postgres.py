"""PostgreSQL for the progress store (a classroom served by several processes): a bounded pool
of connections and a thin adapter (:class:`_PgConnection`) that gives psycopg the subset of
``sqlite3.Connection`` the store uses.

The store writes each statement once, in SQL both databases accept: ``?`` placeholders,
``INSERT ... ON CONFLICT DO NOTHING`` and ``ON CONFLICT (...) DO UPDATE`` upserts. What differs is
handled by name, never by rewriting SQL text with substring replacements:

- Placeholders: :func:`placeholders` tokenizes the statement (string literals ``'...'``, quoted
  identifiers ``"..."`` and comments are skipped whole) and numbers each remaining ``?`` as
  PostgreSQL's own ``$1, $2, ...``. The statement runs through psycopg's ``RawCursor``, which sends
  it and its parameters to the server as they are (server-side binding; psycopg prepares a
  statement it sees repeatedly, ``prepare_threshold``): ``%`` means nothing to it, so a ``%`` or a
  ``?`` inside a literal, and anything a learner wrote (always a parameter), reach the database
  unchanged. A ``$`` outside a literal is refused: the store's SQL has ``?`` placeholders only.
- ``RETURNING id``: the store asks for it where it needs a new row's id
  (:func:`~alignlings.practice.store.schema.insert_returning_id`) and reads it from the cursor.
- The schema's differences (an identity column for SQLite's ``INTEGER PRIMARY KEY``, the one-row
  ``alignlings_schema`` table for ``PRAGMA user_version``) are chosen by ``dialect`` in
  :mod:`~alignlings.practice.store.schema`; ``PRAGMA`` never reaches this adapter.
- Transactions: ``BEGIN IMMEDIATE`` (a write) takes one advisory lock, :data:`PG_WRITE_LOCK`, so
  writers queue as they do on SQLite; ``BEGIN``, ``COMMIT`` and ``ROLLBACK`` are whole statements
  the adapter runs on the transaction's own connection.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any

DIALECT = "postgresql"  # _PgConnection.dialect; a sqlite3.Connection has none ("sqlite")


def is_database_url(path: Any) -> bool:
    return isinstance(path, str) and path.startswith(("postgresql://", "postgres://"))


PG_WRITE_LOCK = 0x616C676E  # the advisory lock every write transaction takes ("algn")

_TOKEN = re.compile(r"""
      '(?:[^']|'')*'          # a string literal ('' is a quote inside it)
    | "(?:[^"]|"")*"          # a quoted identifier
    | --[^\n]*                # a comment to the end of the line
    | /\*.*?\*/               # a block comment
    | (?P<mark>\?)            # a placeholder
    | (?P<bad>['"$]|/\*)      # an unterminated literal, identifier or comment; a `$`
""", re.VERBOSE | re.DOTALL)


@functools.lru_cache(maxsize=1024)
def placeholders(sql: str) -> str:
    """``sql`` with its ``?`` placeholders numbered as PostgreSQL's ``$1, $2, ...``; nothing else
    changes (a ``?`` inside a string literal, a quoted identifier or a comment is text, not a
    placeholder). Raises ValueError for an unterminated literal or a ``$`` outside one."""
    count = 0

    def number(m: re.Match[str]) -> str:
        nonlocal count
        if m.group("bad"):
            raise ValueError(f"sql: expected the store's portable SQL (`?` placeholders, closed literals), "
                             f"got {m.group('bad')!r} at offset {m.start()} in {sql[:120]!r}")
        if m.group("mark"):
            count += 1
            return f"${count}"
        return m.group(0)

    return _TOKEN.sub(number, sql)


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
    """A statement's rows, read at once (``cur``: a psycopg cursor, another _PgCursor or None).

    No ``lastrowid``: a new row's id comes back from ``RETURNING id`` (``schema.insert_returning_id``)."""

    def __init__(self, cur):
        self._rows = list(cur.fetchall()) if cur is not None and (
            isinstance(cur, _PgCursor) or cur.description) else []
        self._next = 0

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
        db.execute("SELECT pg_advisory_xact_lock($1)", (PG_WRITE_LOCK,))
        db.execute("CREATE TABLE IF NOT EXISTS alignlings_schema (version INTEGER NOT NULL)")
        row: Any = db.execute("SELECT COUNT(*) FROM alignlings_schema").fetchone()
        if row[0] == 0:
            db.execute("INSERT INTO alignlings_schema (version) VALUES (0)")


def _connect_kwargs() -> dict[str, Any]:
    """Autocommit connections (transactions are explicit), rows read like ``sqlite3.Row``, and
    ``RawCursor``: ``$n`` placeholders bound by the server, no ``%`` escapes (the module docstring)."""
    import psycopg

    return {"autocommit": True, "row_factory": _pg_row_factory, "cursor_factory": psycopg.RawCursor}


def pg_pool(url: str):
    """A bounded pool of autocommit connections to ``url`` (``psycopg_pool``, the classroom extra)."""
    try:
        from psycopg_pool import ConnectionPool
    except ImportError:
        raise RuntimeError("a PostgreSQL progress store needs psycopg and psycopg_pool: "
                           "pip install 'alignlings[classroom]'") from None
    pool = ConnectionPool(url, min_size=1, max_size=pg_pool_size(), timeout=PG_POOL_TIMEOUT_S, open=False,
                          kwargs=_connect_kwargs(),
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

    dialect = DIALECT

    def __init__(self, url: str, pool=None):
        self._pool, self._tx, self._db = pool, None, None  # type: Any, Any, Any
        self.total_changes = 0
        if pool is None:
            import psycopg

            self._db = psycopg.connect(url, **_connect_kwargs())
            _pg_prepare(self._db)

    def execute(self, sql: str, args: tuple | list = ()) -> _PgCursor:
        text = sql.strip()
        upper = text.upper()
        if upper in ("BEGIN IMMEDIATE", "BEGIN"):
            db = self._tx = self._pool.getconn() if self._pool is not None else self._db
            try:
                db.execute("BEGIN")
                if upper == "BEGIN IMMEDIATE":
                    db.execute("SELECT pg_advisory_xact_lock($1)", (PG_WRITE_LOCK,))
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
        if upper.startswith("PRAGMA"):
            raise ValueError(f"sql: PRAGMA is SQLite's; on PostgreSQL the store chooses by `dialect` "
                             f"(alignlings.practice.store.schema), got {text[:80]!r}")
        query = placeholders(text)  # before borrowing a connection: bad SQL raises here
        db = self._tx if self._tx is not None else self._db
        if db is None:  # pooled, outside a transaction: a connection for this statement only
            with self._pool.connection() as db:
                return self._run(db, query, args)
        return self._run(db, query, args)

    def _release(self) -> None:
        db, self._tx = self._tx, None
        if db is not None and self._pool is not None:
            self._pool.putconn(db)  # the pool rolls back what is left open and drops a broken one

    def _run(self, db, query: str, args) -> _PgCursor:
        cur = db.execute(query, tuple(args))
        if cur.rowcount and cur.rowcount > 0 and cur.pgresult is not None and \
                cur.pgresult.command_status.split(b" ")[0] in (b"INSERT", b"UPDATE", b"DELETE"):
            self.total_changes += cur.rowcount
        return _PgCursor(cur)  # rows read now: a pooled connection goes back when this returns

    def executemany(self, sql: str, rows) -> None:
        for row in rows:  # one by one: rowcount then counts what each row changed
            self.execute(sql, row)

    def close(self) -> None:
        self._release()
        if self._db is not None:
            self._db.close()
