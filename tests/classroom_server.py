"""A real ``alignlings serve --classroom`` in a subprocess on 127.0.0.1 (a free port), for the browser
and load tests of the classroom: on SQLite (a fresh ``ALIGNLINGS_HOME``) or on PostgreSQL
(``ALIGNLINGS_TEST_DATABASE_URL``, whose ``public`` schema is wiped first)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

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
def classroom_server(backend: str, home: Path, *, ready_s: float = 180.0) -> Iterator[str]:
    """Start the server, wait until its grader is warm, yield its base URL, stop it."""
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
    env = {**os.environ, "ALIGNLINGS_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-c", "from alignlings.cli.app import main; main()", "serve", "--classroom",
           "--port", "0", "--no-browser", "--token", TEACHER, "--class-code", CODE]
    if backend == "postgresql":
        if not PG_URL:
            raise RuntimeError(PG_SKIP)
        wipe_postgres(PG_URL)
        cmd += ["--database-url", PG_URL]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "serving at" in line:
                found.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        if not found.wait(90):
            raise RuntimeError("the classroom server did not start:\n" + "".join(lines))
        url = re.search(r"(http://\S+)", next(x for x in lines if "serving at" in x)).group(1).rstrip("/")
        url = re.sub(r"/join$", "", url)
        deadline = time.time() + ready_s
        while True:
            try:
                if httpx.get(f"{url}/api/health", timeout=2).json().get("grader") == "ready":
                    break
            except (httpx.HTTPError, ValueError):
                pass
            if time.time() > deadline:
                raise RuntimeError("the grader did not warm up:\n" + "".join(lines))
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        server_errors = [x for x in lines if "Traceback" in x]
        if server_errors:
            sys.stderr.write("".join(lines[-80:]))
