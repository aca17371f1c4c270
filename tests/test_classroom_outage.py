"""A progress store that cannot be written never hides a verdict, on PostgreSQL too: psycopg's errors
(the server gone, no pooled connection in time) are ``service.STORE_ERRORS`` when psycopg is
installed. The real outage runs the store through a TCP relay to ``ALIGNLINGS_TEST_DATABASE_URL``
that the test cuts and restores (skipped without the variable)."""

from __future__ import annotations

import logging
import os
import socket
import threading
from urllib.parse import urlsplit, urlunsplit

import pytest

psycopg = pytest.importorskip("psycopg")

from alignlings.practice import store as pr  # noqa: E402
from alignlings.practice.store import postgres as pr_postgres  # noqa: E402
from alignlings.practice import service  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402
from alignlings.practice.session import Practice  # noqa: E402

URL = os.environ.get("ALIGNLINGS_TEST_DATABASE_URL")
PACK = load_pack()
EX = PACK.get("dpo-loss")
VERDICT = {"exercise": "dpo-loss", "passed": True, "blanks": [], "cases": [], "error": None}


class Grader:
    def check(self, exercise_id, code=None, *, fills=None, lang="en", run_main=True):
        return dict(VERDICT)


class DownStore:
    """A store whose server went away mid-class."""

    def record_attempt(self, *args, **kwargs):
        raise psycopg.OperationalError("connection to server at 127.0.0.1 failed: Connection refused")


def test_psycopg_errors_are_store_errors():
    from psycopg_pool import PoolClosed, PoolTimeout

    for error in (psycopg.OperationalError, psycopg.errors.AdminShutdown, PoolTimeout, PoolClosed):
        assert issubclass(error, service.STORE_ERRORS), error
    assert not issubclass(ValueError, service.STORE_ERRORS)  # a bug is not an outage


def test_a_database_outage_during_a_check_still_gives_the_verdict(caplog):
    with caplog.at_level(logging.ERROR, logger="alignlings.practice"):
        checked = Practice(DownStore(), PACK, Grader(), source="web").check(EX, code="x = 1")
    verdict, code = checked.verdict, checked.code
    assert checked.recorded is False
    assert verdict["passed"] is True and code == "x = 1"
    assert "could not record the attempt on" in caplog.text and "Connection refused" in caplog.text


def test_the_pool_size_is_checked(monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_DB_POOL_SIZE", "4")
    assert pr.postgres.pg_pool_size() == 4
    for bad in ("0", "many", "1e9"):
        monkeypatch.setenv("ALIGNLINGS_DB_POOL_SIZE", bad)
        with pytest.raises(ValueError, match="ALIGNLINGS_DB_POOL_SIZE: expected a whole number"):
            pr.postgres.pg_pool_size()


class Relay:
    """127.0.0.1:port -> the database's address; ``cut()`` drops it (listener and every connection),
    ``restore()`` listens on the same port again."""

    def __init__(self, host: str, port: int):
        self.target, self.port, self.socks, self.lock = (host, port), 0, [], threading.Lock()
        self.restore()

    def restore(self) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", self.port))
        self.port = self.listener.getsockname()[1]
        self.listener.listen(64)
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def _accept(self, listener) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.socks += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(): close() alone does not
        except OSError:
            pass
        self.listener.close()
        with self.lock:
            socks, self.socks = self.socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def wait_for(call, what: str, patience: float = 300.0):
    """``call()``'s result, run in a thread: fails (saying ``what``) only if it never comes, so a slow
    machine waits longer instead of failing a race against a clock."""
    done, out = threading.Event(), {}

    def run():
        try:
            out["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - raised again in the test's thread
            out["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(patience), f"still waiting for {what}: it hangs"
    if "error" in out:
        raise out["error"]
    return out["value"]


def wait_until(condition, what: str, patience: float = 300.0) -> None:
    """Poll ``condition()`` until it is true (it is retried, not timed)."""
    stop = threading.Event()
    for _ in range(int(patience / 0.5)):
        if condition():
            return
        stop.wait(0.5)
    raise AssertionError(f"still waiting for {what}")


@pytest.mark.skipif(not URL, reason="ALIGNLINGS_TEST_DATABASE_URL is not set: run `bash scripts/test.sh` as root "
                                    "(it starts PostgreSQL) or point it at a database these tests may write")
def test_a_real_outage_keeps_the_verdict_and_the_store_recovers(monkeypatch, caplog):
    u = urlsplit(URL)
    relay = Relay(u.hostname or "127.0.0.1", u.port or 5432)
    netloc = u.netloc.rsplit("@", 1)[0] + f"@127.0.0.1:{relay.port}"
    monkeypatch.setattr(pr_postgres, "PG_POOL_TIMEOUT_S", 2.0)
    store = pr.ProgressStore(urlunsplit(u._replace(netloc=netloc)))
    try:
        ann = store.for_learner(store.add_learner("Outage Ann")[0])
        assert service.record_safely(ann, EX, VERDICT, code="before", source="web") is True
        relay.cut()
        with caplog.at_level(logging.ERROR, logger="alignlings.practice"):
            # the check returns although the store cannot answer (the pool gives up after its timeout)
            graded = wait_for(lambda: Practice(ann, PACK, Grader(), source="web").check(EX, code="during"),
                              "the check's verdict while the database is down")
        verdict = graded.verdict
        assert verdict["passed"] is True and "could not record the attempt" in caplog.text
        relay.restore()
        wait_until(lambda: service.record_safely(ann, EX, VERDICT, code="after", source="web"),
                   "the store to reconnect after the outage")
        assert [a["code"] for a in ann.export()["attempts"]] == ["before", "after"]
    finally:
        relay.cut()
        store.close()
