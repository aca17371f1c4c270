"""Answers are keyed by (exercise, question) (issue 34, schema 10): a question id that a quiz and a
predict item of one pack both ask (dev check rejects that; tests/test_devcheck_mistakes.py) no longer
mixes their answers, in the learner's own round or in the teacher's report; a store of schema 8 keeps
its answers readable after the migration, on SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from alignlings.cli.app import app
from alignlings.practice import report
from alignlings.content.pack import load_pack
from alignlings.practice.session import Practice
from alignlings.practice.store import ProgressStore, connect, migrate

PG_URL = os.environ.get("ALIGNLINGS_TEST_DATABASE_URL")
PG_SKIP = "ALIGNLINGS_TEST_DATABASE_URL is not set (scripts/test.sh sets it up as root)"
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.skipif(not PG_URL, reason=PG_SKIP))]
runner = CliRunner()


@pytest.fixture(scope="module")
def shared_id_pack(tmp_path_factory):
    """A pack whose quiz and predict item both ask a question with the id "shared"."""
    pack = tmp_path_factory.mktemp("keys") / "keys"
    for kind in ("quiz", "predict"):
        out = runner.invoke(app, ["dev", "new", f"my-{kind}", "--kind", kind, "--pack", str(pack)])
        assert out.exit_code == 0, out.output
    for name, old in (("my-quiz/quiz.toml", 'id = "my-quiz-q1"'), ("my-predict/predict.toml", 'id = "my-predict"')):
        path = pack / name
        path.write_text(path.read_text(encoding="utf-8").replace(old, 'id = "shared"'), encoding="utf-8")
    return pack


def open_store(backend: str, tmp_path: Path) -> str:
    """A fresh database for ``backend``: its path or URL."""
    if backend == "sqlite":
        return str(tmp_path / "progress.db")
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as db:
        db.execute("DROP SCHEMA public CASCADE")
        db.execute("CREATE SCHEMA public")
    return str(PG_URL)


def old_connection(backend: str, where: str):
    if backend == "sqlite":
        return connect(where)
    from alignlings.practice.store.postgres import _PgConnection

    return _PgConnection(where)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_quiz_answer_is_not_a_prediction_of_the_same_id(shared_id_pack, tmp_path, backend, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    course = load_pack(str(shared_id_pack))
    quiz, predict = course.get("my-quiz"), course.get("my-predict")
    store = ProgressStore(open_store(backend, tmp_path))
    try:
        lid, _ = store.add_learner("Ann")
        practice = Practice(store.for_learner(lid), course)
        q = quiz.quiz[0]
        practice.quiz_answer(quiz, q, q.answer)  # the quiz only, right: it closes the quiz's round
        assert practice.quiz_round(quiz).answered == {"shared": q.answer}
        assert practice.quiz_answers(predict.pack, predict.id) == {}  # the predict item was never answered
        (row,) = report.learner_rows(store, course)
        assert (row["predictions"], row["predictions_right"]) == (0, 0)
        assert [s["exercise"] for s in row["solved"]] == ["my-quiz"]
        rows = {r["exercise"]: r for r in report.exercise_rows(store, course)}
        assert (rows["my-quiz"]["answered"], rows["my-quiz"]["solved"]) == (1, 1)
        assert (rows["my-predict"]["answered"], rows["my-predict"]["solved"], rows["my-predict"]["stuck"]) == (0, 0, 0)
    finally:
        store.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_answers_recorded_before_schema_9_still_count(tmp_path, backend, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    where = open_store(backend, tmp_path)
    db = old_connection(backend, where)
    assert migrate(db, target=8) == 8
    db.execute("BEGIN")
    db.execute("INSERT INTO learners (id, name, token_hash, created_at) VALUES ('ann', 'Ann', 'h', "
               "'2026-01-01T00:00:00+00:00')")
    db.execute("INSERT INTO quiz_answers (uuid, learner, pack, question_id, choice, correct, created_at) VALUES "
               "('00000000-0000-4000-8000-000000000001', 'ann', 'dpo-grpo', 'bt-probability', 0, 0, '2026-01-01T00:00:01+00:00')")
    db.execute("COMMIT")
    db.close()
    store = ProgressStore(where)  # migrates to the latest (the exercise column: schema 10)
    try:
        course = load_pack()
        concepts = course.get("concepts")
        assert store.for_learner("ann").quiz_answers(pack="dpo-grpo", exercise="concepts")["bt-probability"]["choice"] == 0
        (row,) = report.learner_rows(store, course)
        assert [(w["exercise"], w["question"]) for w in row["wrong_choices"]] == [("concepts", "bt-probability")]
        exported = store.for_learner("ann").export()
        assert exported["quiz_answers"][0]["exercise"] == ""
        # an export of schema 10 carries the exercise, and imports into another store
        store.for_learner("ann").record_quiz_answer("dpo-key-idea", 1, True, pack="dpo-grpo", exercise=concepts.id)
        with ProgressStore(str(tmp_path / "other.db")) as other:
            assert other.import_(store.for_learner("ann").export())["quiz_answers"] == 2
            assert {(r["question_id"], r["exercise"]) for r in other.export()["quiz_answers"]} == {
                ("bt-probability", ""), ("dpo-key-idea", "concepts")}
    finally:
        store.close()


def test_dev_check_names_the_repeated_id(shared_id_pack, tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "400")
    pack = tmp_path / "keys"
    shutil.copytree(shared_id_pack, pack)
    out = runner.invoke(app, ["dev", "check", "--pack", str(pack)])
    assert f"{pack / 'my-predict' / 'predict.toml'}:5: question id 'shared' is already used by 'my-quiz' " \
           "(my-quiz/quiz.toml:2)" in out.output, out.output
