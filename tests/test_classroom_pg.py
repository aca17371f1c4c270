"""The classroom and the progress store on a real PostgreSQL server (``ALIGNLINGS_TEST_DATABASE_URL``,
which ``scripts/test.sh`` sets after installing and starting Debian's postgresql): the same class
flow as tests/test_classroom.py, the migrations from an empty database, and 100 learners checking
at once with nothing lost. The database's tables are dropped and rebuilt for each module."""

from __future__ import annotations

import os

import pytest

URL = os.environ.get("ALIGNLINGS_TEST_DATABASE_URL")
if not URL:
    pytest.skip("ALIGNLINGS_TEST_DATABASE_URL is not set: run `bash scripts/test.sh` as root (it installs and "
                "starts PostgreSQL) or point it at a database that these tests may wipe", allow_module_level=True)
psycopg = pytest.importorskip("psycopg")
pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

import test_classroom as solo  # noqa: E402
from alignlings.practice import store as pr  # noqa: E402
from alignlings.web.app import create_app  # noqa: E402

# the class flow of tests/test_classroom.py, run here on PostgreSQL (the fixture below)
from test_classroom import (  # noqa: E402, F401
    test_cross_site_writes_are_refused,
    test_each_learner_sees_only_their_own_progress,
    test_learners_never_reach_the_teacher_pages,
    test_nobody_gets_in_without_joining,
    test_the_teacher_sees_the_class_and_the_common_misconceptions,
)

# a restart keeps the class, recovery codes, rename/merge/remove (tests/test_classroom_identity.py), on PostgreSQL
from test_classroom_identity import (  # noqa: E402, F401
    test_a_learner_comes_back_on_another_browser_with_the_recovery_code,
    test_a_restart_without_a_code_keeps_the_class_and_its_learners,
    test_the_teacher_renames_merges_and_removes_learners,
)

# locked tracks and assignments (tests/test_classroom_plan.py), on PostgreSQL
from test_classroom_plan import (  # noqa: E402, F401
    test_a_locked_track_opens_for_each_learner_once_its_requires_are_solved,
    test_a_locked_track_refuses_quiz_answers_too,
    test_an_assignment_reports_who_finished_by_the_due_date,
)

# a class interview in the teacher's view (tests/test_interview.py), on PostgreSQL
from test_interview import test_a_class_interview_in_the_teachers_view  # noqa: E402, F401


@pytest.fixture()
def db():
    """The class kept in PostgreSQL (overrides the SQLite file of test_classroom_identity and test_classroom_plan)."""
    wipe()
    return URL


def wipe() -> None:
    with psycopg.connect(URL, autocommit=True) as db:
        db.execute("DROP SCHEMA public CASCADE")
        db.execute("CREATE SCHEMA public")


@pytest.fixture(scope="module")
def classroom():
    wipe()
    app = create_app(db_path=URL, token=solo.TEACHER, classroom=True, class_code=solo.CODE)
    assert app.state.ctx.store.url == URL
    with TestClient(app) as teacher:
        ann, bo, cy = (solo.join(app, n) for n in ("Ann", "Bo", "Cy"))
        assert ann.post("/api/exercises/dpo-loss/check", json={"fills": solo.RIGHT}).json()["passed"] is True
        for who in (bo, cy):
            v = who.post("/api/exercises/dpo-loss/check", json={"fills": solo.WRONG}).json()
            assert v["passed"] is False
        assert cy.post("/api/exercises/dpo-loss/hint").json()["index"] == 1
        assert cy.post("/api/exercises/grpo-loss/solution").status_code == 200
        yield app, teacher, {"Ann": ann, "Bo": bo, "Cy": cy}
    app.state.ctx.store.close()


def test_an_empty_database_gets_every_migration_and_the_store_works():
    wipe()
    store = pr.ProgressStore(URL)
    with psycopg.connect(URL) as db:
        assert db.execute("SELECT version FROM alignlings_schema").fetchone()[0] == pr.SCHEMA_VERSION
    assert pr.ProgressStore(URL).summary() == {}  # a second open migrates nothing
    lid, token = store.add_learner("Ann")
    ann = store.for_learner(lid)
    assert ann.record_attempt("dpo-loss", {"passed": True}, code="x") >= 1
    assert [ann.record_hint("dpo-loss", available=2) for _ in range(3)] == [1, 2, 2]
    ann.set_setting("k", 1)
    ann.set_setting("k", 2)
    assert ann.get_setting("k") == 2 and store.get_setting("k") is None
    assert ann.summary()["dpo-loss"] == {**ann.summary()["dpo-loss"], "solved": True, "attempts": 1, "hints": 2}
    assert store.summary() == {} and store.learner_by_token(token)["name"] == "Ann"
    exported = ann.export()
    bo = store.for_learner("bo")
    assert bo.import_(exported)["attempts"] == 0 and bo.import_(exported)["settings"] == 0
    assert len(store.history_mark()) == 6
    store.close()


def test_a_hundred_learners_check_at_once_and_nothing_is_lost():
    """100 simulated learners record attempts and hints at once, through 32 worker threads (a
    server's thread pool: one connection each, within PostgreSQL's default 100 connections)."""
    from concurrent.futures import ThreadPoolExecutor

    wipe()
    store = pr.ProgressStore(URL)
    ids = [store.add_learner(f"learner {i}")[0] for i in range(100)]

    def learner(lid: str) -> None:
        mine = store.for_learner(lid)
        for n in range(3):
            mine.record_attempt("dpo-loss", {"passed": n == 2}, code=str(n), source="web")
            mine.record_hint("dpo-loss", available=2)

    with ThreadPoolExecutor(max_workers=32) as pool:
        for future in [pool.submit(learner, lid) for lid in ids]:
            future.result(timeout=120)  # re-raises a learner's error
    rows = {lid: store.for_learner(lid).summary()["dpo-loss"] for lid in ids}
    assert all(r["attempts"] == 3 and r["solved"] and r["hints"] == 2 for r in rows.values())
    with psycopg.connect(URL) as db:
        assert db.execute("SELECT COUNT(*) FROM attempts").fetchone()[0] == 300
        assert db.execute("SELECT COUNT(*) FROM events WHERE kind = 'hint'").fetchone()[0] == 200
    store.close()


def test_a_question_mark_or_percent_in_a_string_literal_reaches_postgresql_unchanged():
    """A learner's code with ``?``, ``%s``, ``%%``, quotes and ``$1`` is recorded and read back exactly,
    and a query whose string literal holds the same code finds it: the adapter numbers only the
    placeholders outside literals (a substring rewrite of ``?`` to ``%s`` made that literal two
    placeholders and the query failed)."""
    wipe()
    store = pr.ProgressStore(URL)
    code = "print('why?', \"%s of %d\" % (a, b), 100 %% 7, '$1', x ?? y)  -- not a comment /* nor this */"
    verdict = {"passed": False, "message": "unexpected '?' near %s"}
    rid = store.record_attempt("dpo-loss", verdict, code=code)
    [row] = store.attempts("dpo-loss")
    assert row["code"] == code and row["verdict"]["message"] == verdict["message"]
    literal = code.replace("'", "''")
    db = pr.connect(URL)
    try:
        found = db.execute(f"SELECT id, '?' AS mark, '%s' AS pct FROM attempts WHERE code = '{literal}' AND learner = ?",
                           ("",)).fetchall()
        assert [(r["id"], r["mark"], r["pct"]) for r in found] == [(rid, "?", "%s")]
        assert db.execute("SELECT ? || '?' || ? AS t -- a '?' here is a comment", ("a", "b")).fetchone()["t"] == "a?b"
    finally:
        db.close()
    store.close()


def test_the_schema_differences_are_chosen_by_dialect_not_by_rewriting_sql():
    """Every history table's ``id`` is an identity column, a new attempt's id is the one ``RETURNING``
    gave, the version lives in ``alignlings_schema``, and a SQLite ``PRAGMA`` is refused, not faked."""
    wipe()
    store = pr.ProgressStore(URL)
    ids = [store.record_attempt("dpo-loss", {"passed": n == 1}, code=str(n)) for n in range(2)]
    assert [a["id"] for a in store.attempts("dpo-loss")] == ids and ids[0] < ids[1]
    with psycopg.connect(URL) as db:
        identity = dict(db.execute("SELECT table_name, is_identity FROM information_schema.columns "
                                   "WHERE column_name = 'id' AND table_schema = 'public' "
                                   "AND table_name = ANY(%s)", (["attempts", *pr.schema._TABLES],)).fetchall())
    assert identity == dict.fromkeys(("attempts", "events", "quiz_answers", "cloze_results", "review_log"), "YES")
    from alignlings.practice.store.schema import schema_version

    db = pr.connect(URL)
    try:
        assert schema_version(db) == pr.SCHEMA_VERSION
        with pytest.raises(ValueError, match="PRAGMA is SQLite's"):
            db.execute("PRAGMA user_version")
    finally:
        db.close()
    store.close()
