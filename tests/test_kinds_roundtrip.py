"""One list of every kind (issue 30 §2): exercise kinds and review-item kinds come from one registry
(practice.kinds) that the store's import validation, review and the pack loader ask. Seen before: a
predict item's review row (``predict/QUESTION``) made ``progress --export`` then ``--import`` fail
("KIND one of cloze, misconception, exercise, quiz, bug").

The property: for every registered exercise kind, a learner who works on one of its exercises
(checks, hints, answers), reviews its items and re-rates one, exports, and imports into a fresh home,
ends there with the same progress, events, answers and review log, on SQLite and on PostgreSQL
(``ALIGNLINGS_TEST_DATABASE_URL``, as tests/test_classroom_pg.py)."""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from alignlings.content import kinds
from alignlings.practice import review as rv
from alignlings.content.pack import load_pack
from alignlings.practice.session import Practice, UsageError
from alignlings.practice.store import ProgressStore

COURSE = load_pack()
URL = os.environ.get("ALIGNLINGS_TEST_DATABASE_URL")
BY_KIND = {name: [ex for ex in COURSE if ex.kind == name] for name in kinds.REGISTRY}


class FakeGrader:
    """A verdict as the test draws it: passed or not, with a misconception on blank 1 when it has one."""

    def __init__(self, passed: bool, misconception: str | None):
        self.passed, self.misconception = passed, misconception

    def check(self, exercise_id, code=None, *, fills=None, lang="en", run_main=True, quick=False):
        blanks = [{"index": 1, "passed": self.passed, "fill": "x",
                   "misconception": None if self.passed else self.misconception}]
        return {"exercise": exercise_id.rpartition("/")[2], "passed": self.passed, "blanks": blanks, "cases": [],
                "error": None, "isolation": "fake", "stdout": "", "seconds": 0.0}

    def close(self):
        pass


def _fake_run(ex, q, lang):  # a predict item's run (minutes of variants for real; not what is tested here)
    return {"result_text": "", "values": {}, "series": [], "chart": None, "explanation": "", "run_error": None,
            "cached": True}


def _stores(where: str, tmp: Path):
    """(the learner's store, a fresh home, how to export the learner, what to close): two SQLite
    files (``progress --export`` / ``--import``), or on PostgreSQL two new learners of a class, the
    first removed with their history deleted (the export the teacher is handed) before the import."""
    if where == "sqlite":
        mine = ProgressStore(tmp / "a.sqlite3")
        return mine, ProgressStore(tmp / "b.sqlite3"), mine.export, []
    if not URL:
        pytest.skip("ALIGNLINGS_TEST_DATABASE_URL is not set (scripts/test.sh sets it)")
    pytest.importorskip("psycopg")
    cls = ProgressStore(URL)
    a, b = (cls.add_learner(f"rt-{uuid.uuid4().hex[:12]}")[0] for _ in range(2))
    return cls.for_learner(a), cls.for_learner(b), lambda: cls.remove_learner(a, keep_history=False), [cls]


def _comparable(store, pack_ids) -> dict:
    data = store.export()
    out = {"summary": store.summary() if hasattr(store, "summary") else None}
    for table in ("attempts", "events", "quiz_answers", "cloze", "review_log"):
        out[table] = sorted((json.dumps(r, sort_keys=True) for r in data.get(table, [])))
    out["states"] = {p: {k: {f: v for f, v in row.items() if f != "updated_at"}  # when the row was written
                         for k, row in store.review_states(pack=p).items()} for p in sorted(pack_ids)}
    return out


def _work(practice: Practice, ex, draw) -> None:
    """What a learner does on ``ex`` as its kind allows: hints, checks, answers."""
    spec = ex.kind_spec
    if spec.graded_as_file:
        miscs = [m.id for m in ex.misconceptions] if spec.has_blanks else []
        for _ in range(draw(st.integers(1, 2))):
            passed = draw(st.booleans())
            grader = practice.grader()
            grader.passed, grader.misconception = passed, draw(st.sampled_from(miscs)) if miscs and not passed else None
            practice.check(ex, code=ex.buggy_source if spec.starts_from_buggy_file else "x = 1\n")
        if ex.texts("en").hints and draw(st.booleans()):
            practice.hint(ex)
    for q in ex.quiz if spec.answered_by_choice else ():
        practice.quiz_answer(ex, q, draw(st.integers(0, len(q.options) - 1)))
    for q in ex.predict if spec.name == "predict" else ():
        practice.predict_answer(ex, q.id, draw(st.integers(0, len(q.options) - 1)))


def _review(practice: Practice, ex, draw) -> None:
    """Every item of ``ex`` the learner has met is reviewed (a drawn rating) and one is re-rated."""
    engine = practice.review()
    engine.sync()
    met = [k for k in practice.store.review_states(pack=ex.pack) if engine.item(ex.pack, k).exercise == ex.key]
    for key in met:
        engine.answer(engine.item(ex.pack, key), draw(st.sampled_from([rv.AGAIN, rv.HARD, rv.GOOD, rv.EASY])),
                      duration_ms=draw(st.integers(0, 60_000)), answer="an answer")
    if met:
        try:
            practice.review_rate(ex.pack, met[0], draw(st.sampled_from(sorted(rv.RERATINGS))))
        except UsageError:
            pass  # only a right answer may be re-rated: the store keeps what it had


@pytest.mark.parametrize("where", ["sqlite", "postgresql"])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_kind_survives_an_export_and_an_import_into_a_fresh_home(where, data, monkeypatch):
    monkeypatch.setattr("alignlings.content.kinds.predict.measured", _fake_run)
    kind = data.draw(st.sampled_from(sorted(BY_KIND)), label="kind")
    ex = data.draw(st.sampled_from(BY_KIND[kind]), label="exercise")
    with tempfile.TemporaryDirectory() as tmp:
        mine, fresh, export, closers = _stores(where, Path(tmp))
        try:
            practice = Practice(mine, COURSE, FakeGrader(True, None))
            _work(practice, ex, data.draw)
            _review(practice, ex, data.draw)
            packs = {p.id for p in COURSE.packs}
            before = _comparable(mine, packs)
            exported = json.loads(json.dumps(export()))  # as `progress --export` writes it
            Practice(fresh, COURSE).import_(exported, only_loaded=True)
            after = _comparable(fresh, packs)
            assert after == before
            assert before["review_log"] or kind not in ("quiz", "bug-or-not", "predict")  # answers bring items
        finally:
            for s in (mine, fresh, *closers):
                s.close()


def test_a_predict_review_row_exports_and_imports(tmp_path, monkeypatch):
    """The seen bug: a predict answer, its review row, then export -> import refused the row."""
    monkeypatch.setattr("alignlings.content.kinds.predict.measured", _fake_run)
    ex = BY_KIND["predict"][0]
    mine = ProgressStore(tmp_path / "a.sqlite3")
    practice = Practice(mine, COURSE)
    q = ex.predict[0]
    practice.predict_answer(ex, q.id, q.answer)
    engine = practice.review()
    engine.sync()
    engine.answer(engine.item(ex.pack, f"predict/{q.id}"), rv.GOOD)
    data = json.loads(json.dumps(practice.export()))
    assert any(r["item"] == f"predict/{q.id}" for r in data["review_log"])
    fresh = ProgressStore(tmp_path / "b.sqlite3")
    counts = Practice(fresh, COURSE).import_(data, only_loaded=True)
    assert counts["review_log"] >= 1 and f"predict/{q.id}" in fresh.review_states(pack=ex.pack)


def test_review_items_come_from_the_registry_and_every_kind_says_what_it_is():
    """Every kind of review item some exercise brings is registered, and the store, review and the
    loader know the same ones; an unknown kind is refused with the registry's list."""
    from alignlings.practice.store.transfer import _validate_export

    brought = {item.kind for ex in COURSE for item in ex.kind_spec.review_items(rv, ex)}
    assert brought <= set(kinds.REVIEW_ITEM_KINDS) and set(rv.KINDS) == set(kinds.REVIEW_ITEM_KINDS)
    for spec in kinds.REGISTRY.values():
        assert set(spec.review_item_kinds) <= set(kinds.REVIEW_ITEM_KINDS.values())
    bad = {"format": "alignlings-progress", "version": 3, "review_log": [
        {"uuid": str(uuid.uuid4()), "pack": "dpo-grpo", "item": "essay/x", "rating": 3,
         "reviewed_at": "2026-01-01T00:00:00+00:00"}]}
    with pytest.raises(ValueError, match="KIND one of " + ", ".join(kinds.REVIEW_ITEM_KINDS)):
        _validate_export(bad)
    with pytest.raises(ValueError, match="already registered"):
        kinds.register(type("Other", (kinds.Kind,), {"name": "other-kind-for-test", "review_item_kinds": (
            kinds.ReviewItemKind("quiz", "exercise"),)})())
    assert "other-kind-for-test" not in kinds.REGISTRY
