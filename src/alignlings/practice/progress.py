"""The learner's progress store; it lives in :mod:`alignlings.practice.store` (schema and migrations,
SQLite, PostgreSQL, export and import), re-exported here, private helpers included, for the code,
tests and notebooks written against this module: every top-level name of the store's four modules
(``tests/test_progress.py`` checks it). New code imports from ``alignlings.practice.store``.

Settings that tune the store (``BUSY_TIMEOUT_MS``, ``PG_POOL_TIMEOUT_S``) are read where they are
defined: set them on ``alignlings.practice.store.sqlite`` / ``.postgres``, not here.
"""

from __future__ import annotations

from alignlings.practice.store.schema import (  # noqa: F401 - re-exported
    ATTEMPT_LEVELS, DEFAULT_PACK, EVENT_KINDS, HINT, MIGRATIONS, RESET, REVEAL, SCHEMA_VERSION, _TABLES,
    _clock_lock, _id_column, _last_now, _learner_id, _pack, _script, _set_schema_version, _utc_iso, _v1, _v2, _v3,
    _v4, _v5, _v6, _v7, _v8, _v9, _v10, attempt_level, dialect, insert_returning_id, migrate, schema_version, utcnow,
)
from alignlings.practice.store.postgres import (  # noqa: F401 - re-exported
    DIALECT, PG_POOL_SIZE, PG_POOL_TIMEOUT_S, PG_WRITE_LOCK, _TOKEN, _connect_kwargs, _PgConnection, _PgCursor,
    _PgRow, _pg_prepare, _pg_row_factory, is_database_url, pg_pool, pg_pool_size, placeholders,
)
from alignlings.practice.store.transfer import (  # noqa: F401 - re-exported
    EXPORT_FORMAT, EXPORT_VERSION, MAX_CHOICE, MAX_IMPORT_DEPTH, _field, _known, _plain_json, _rows, _unicode,
    _uuid, _validate_export,
)
from alignlings.practice.store.sqlite import (  # noqa: F401 - re-exported
    BUSY_TIMEOUT_MS, DB_NAME, MAX_ASSIGNMENT_TITLE, MAX_LEARNER_NAME, RECOVERY_ALPHABET, ProgressStore, _Conn,
    _count_events, _insert_event, _learner_name, _progression, _recovery_hash, _refresh_states, _review_row, _seal,
    _seal_key, _token_hash, _unseal, cloze_due, connect, default_db_path, normalize_recovery_code,
)
