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
same SQL through psycopg, written once in the SQL both databases accept (``?`` placeholders,
``ON CONFLICT`` upserts). The adapter (:class:`_PgConnection`, see its module's docstring) numbers
the placeholders as PostgreSQL's ``$n`` by tokenizing each statement (never inside a string literal,
a quoted identifier or a comment) and lets the driver bind the parameters; what differs (an identity
column for ``INTEGER PRIMARY KEY``, a one-row ``alignlings_schema`` table for ``PRAGMA user_version``,
``RETURNING id`` for ``lastrowid``) is chosen by ``schema.dialect``, and ``BEGIN IMMEDIATE`` is a
transaction that takes one advisory lock, so writers queue exactly as they do on SQLite. A store
opens at most ``ALIGNLINGS_DB_POOL_SIZE`` (default 10) connections, pooled by ``psycopg_pool``: each
statement, or each transaction, borrows one, so however many threads a server runs, several server
processes fit within PostgreSQL's ``max_connections``.

The schema is versioned with ``PRAGMA user_version`` (``schema.schema_version``); ``MIGRATIONS[i]`` takes a database from
version ``i`` to ``i + 1`` and they run in order, each in its own transaction.

Rows are keyed by pack and exercise (a teacher's ``dpo-loss`` is not the built-in one): every
method takes ``pack=``, defaulting to the built-in pack, to which rows written before packs were
recorded (schema version 2, export version 1) belong.

Learners (a classroom, ``alignlings serve --classroom``): every row also names its learner ('' for
the one learner of a personal store). A store object reads and writes one learner's rows
(``for_learner`` gives a view of the same database bound to another learner); ``add_learner`` and
``learner_by_token`` keep the class list, with only a hash of each learner's token.

The store is a package along its seams: :mod:`~alignlings.practice.store.schema` (tables and the
migrations, one list for both databases), :mod:`~alignlings.practice.store.sqlite` (the store),
:mod:`~alignlings.practice.store.postgres` (the PostgreSQL adapter) and
:mod:`~alignlings.practice.store.transfer` (export format and import validation).
``alignlings.practice.store`` re-exports all of it for the code and data written against it.
"""

from alignlings.practice.store.schema import DEFAULT_PACK, HINT, RESET, REVEAL, SCHEMA_VERSION, migrate, utcnow
from alignlings.practice.store.sqlite import DB_NAME, ProgressStore, connect, default_db_path
from alignlings.practice.store.transfer import EXPORT_FORMAT, EXPORT_VERSION

__all__ = ["DB_NAME", "DEFAULT_PACK", "EXPORT_FORMAT", "EXPORT_VERSION", "HINT", "RESET", "REVEAL", "SCHEMA_VERSION",
           "ProgressStore", "connect", "default_db_path", "migrate", "utcnow"]
