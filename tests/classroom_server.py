"""A real ``alignlings serve --classroom`` in a subprocess on 127.0.0.1 (a free port), for the browser
and load tests of the classroom: on SQLite (a fresh ``ALIGNLINGS_HOME``) or on PostgreSQL
(``ALIGNLINGS_TEST_DATABASE_URL``, whose ``public`` schema is wiped first)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from serving import served


TEACHER = "teacher-token-for-tests"
CODE = "CLASS234"
PG_URL = os.environ.get("ALIGNLINGS_TEST_DATABASE_URL")
PG_SKIP = ("ALIGNLINGS_TEST_DATABASE_URL is not set: run `bash scripts/test.sh` as root (it installs and starts "
           "PostgreSQL) or point it at a database that these tests may wipe")
BACKENDS = ["sqlite", "postgresql"]


def wipe_postgres(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        db.execute("DROP SCHEMA public CASCADE")
        db.execute("CREATE SCHEMA public")


@contextlib.contextmanager
def classroom_server(backend: str, home: Path, *, ready_s: float = 180.0, class_code: str | None = CODE,
                     wipe: bool = True) -> Iterator[str]:
    """Start the server, wait until its grader is warm, yield its base URL, stop it. ``class_code``
    None: no --class-code (the class's kept code); ``wipe`` False: keep the PostgreSQL class (a restart)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
    args = ["--classroom", "--token", TEACHER, "--joins-per-address", "10000"]
    if class_code is not None:
        args += ["--class-code", class_code]
    if backend == "postgresql":
        if not PG_URL:
            raise RuntimeError(PG_SKIP)
        if wipe:
            wipe_postgres(PG_URL)
        args += ["--database-url", PG_URL]
    lines: list[str] = []
    try:
        with served(args, home, ready_s=ready_s) as (url, lines):
            yield url
    finally:
        if any("Traceback" in x for x in lines):
            sys.stderr.write("".join(lines[-80:]))
