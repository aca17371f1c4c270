"""practice/session.py on its own: the class report's cost, and results that a store failure
never hides (the interfaces' side of both is tests/test_interfaces_agree.py)."""

from __future__ import annotations

import sqlite3

import pytest

from alignlings.content.pack import load_pack
from alignlings.practice.store import ProgressStore
from alignlings.practice.session import Practice, UsageError

COURSE = load_pack()
DPO = COURSE.get("dpo-loss")
QUIZ = next(ex for ex in COURSE if ex.kind == "quiz")


def _verdict(passed: bool, misconception: str | None = None) -> dict:
    blank = {"index": 4, "passed": passed, "misconception": misconception}
    return {"exercise": DPO.id, "passed": passed, "blanks": [blank], "cases": []}


def test_the_class_report_costs_the_same_few_queries_for_any_class_size(tmp_path):
    store = ProgressStore(tmp_path / "class.sqlite3")
    reads: list[str] = []
    real = store._read

    def counted(sql, args=()):
        reads.append(sql)
        return real(sql, args)

    def report_queries(n_learners: int) -> int:
        while len(store.learners()) < n_learners:
            learner, _ = store.add_learner(f"learner {len(store.learners())}")
            mine = store.for_learner(learner)
            mine.record_attempt(DPO.id, _verdict(False, "sum-not-mean"), code="x", pack=DPO.pack)
            mine.record_hint(DPO.id, pack=DPO.pack)
        store._read = counted  # type: ignore[method-assign]
        reads.clear()
        report = Practice(store, COURSE).class_report()
        store._read = real  # type: ignore[method-assign]
        assert len({r["learner"] for r in report.progress}) == n_learners
        assert report.misconceptions[0]["learners"] == n_learners
        return len(reads)

    # the class list, then per pack: resets, attempts, events (the summaries), resets and attempts at
    # levels 4 and 5 (the level summaries) and failed attempts
    assert report_queries(2) == report_queries(12) == 1 + 6 * len(COURSE.packs)
    row = next(r for r in Practice(store, COURSE).class_report().progress if r["exercise"] == DPO.key)
    assert row["status"] == "attempted" and row["hints"] == 1 and row["attempts"] == 1
    store.close()


class _Broken:
    """A store every write of which fails like a locked database; reads answer like an empty one."""

    learner = ""

    def __getattr__(self, name):
        if name.startswith(("record", "take", "set_", "reset", "mark", "import_")):
            def fail(*a, **kw):
                raise sqlite3.OperationalError("database is locked")
            return fail
        empty = {"summary": {}, "quiz_answers": {}, "cloze_stats": {}, "attempts": [], "get_setting": None,
                 "hint_progress": 0, "is_first_run": True}
        return lambda *a, **kw: empty[name]


class _Grader:
    def check(self, key, code=None, *, fills=None, **kw):
        return {"exercise": key, "passed": True, "blanks": [], "cases": [], "error": None}

    def submission(self, ex, fills=None):
        return type("S", (), {"code": "graded"})()


def test_a_store_that_cannot_be_written_hides_no_result(caplog):
    practice = Practice(_Broken(), COURSE, _Grader())
    checked = practice.check(DPO, fills=["a"] * 4)
    assert checked.verdict["passed"] and not checked.recorded
    hints = [practice.hint(DPO) for _ in range(2)]
    assert [h.index for h in hints] == [1, 1] and hints[0].text == DPO.texts("en").hints[0]
    assert practice.hint(DPO, 1).text == DPO.texts("en").blank_hints[0][0]
    shown = practice.reveal(DPO)
    assert shown.solution and shown.answers and not shown.recorded
    assert not practice.reset(DPO).recorded
    practice.quiz_start(QUIZ)
    for q in QUIZ.quiz:
        answer = practice.quiz_answer(QUIZ, q, q.answer)
        assert answer.correct and answer.options[q.answer].why and not answer.recorded
    assert answer.score == {"right": len(QUIZ.quiz), "total": len(QUIZ.quiz), "passed": True}
    assert practice.cloze_open(DPO) is True  # shown (and said), though it could not be recorded
    assert practice.welcome() is True
    assert "database is locked" in caplog.text


def test_bad_requests_name_their_argument():
    practice = Practice(_Broken(), COURSE)
    with pytest.raises(UsageError) as bad:
        practice.hint(DPO, 99)
    assert bad.value.argument == "blank" and not bad.value.missing
    with pytest.raises(UsageError) as none:
        practice.hint(QUIZ, 1)
    assert none.value.argument == "blank"
    with pytest.raises(UsageError) as ratio:
        practice.cloze_draw(DPO, ratio=0)
    assert ratio.value.argument == "ratio"
    with pytest.raises(UsageError) as unknown:
        practice.exercise("no-such-exercise")
    assert unknown.value.missing
    with pytest.raises(UsageError, match="expected 0..") as choice:
        practice.quiz_answer(QUIZ, QUIZ.quiz[0], 99)
    assert choice.value.argument == "choice"


def test_review_rate_re_rates_only_the_right_answer_just_given(tmp_path):
    """A right answer is Good (Hard after a hint, Again when wrong); the learner may then call it
    hard or too easy: the same review is re-rated (no row added) and the item re-scheduled."""
    import uuid
    from datetime import datetime, timedelta, timezone

    from alignlings.practice import review as rv

    t0 = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)
    store = ProgressStore(tmp_path / "p.sqlite3")
    questions = QUIZ.quiz[:3]
    store.import_({"format": "alignlings-progress", "version": 2, "quiz_answers": [
        {"uuid": str(uuid.uuid4()), "pack": QUIZ.pack, "question_id": q.id, "choice": q.answer, "correct": True,
         "created_at": t0.isoformat()} for q in questions]})
    practice = Practice(store, COURSE, clock=rv.FixedClock(t0 + timedelta(days=3)))
    a, b, c = (f"quiz/{q.id}" for q in questions)
    first = practice.review_answer(QUIZ.pack, a, questions[0].answer, seconds=0.5)
    assert first.rating == "good"  # fast is not easy
    easy = practice.review_rate(QUIZ.pack, a, "easy")
    assert easy.recorded and easy.rating == "easy" and easy.schedule["interval_days"] > first.schedule["interval_days"]
    log = store.review_log(pack=QUIZ.pack, item=a)
    assert [(r["source"], r["rating"]) for r in log] == [("quiz", rv.GOOD), ("review", rv.EASY)]
    hard = practice.review_rate(QUIZ.pack, a, "hard")
    assert hard.schedule["interval_days"] < first.schedule["interval_days"]
    assert len(store.review_log(pack=QUIZ.pack, item=a)) == 2
    with pytest.raises(UsageError) as err:
        practice.review_rate(QUIZ.pack, a, "again")
    assert err.value.argument == "rating"
    # another item answered since: the first is no longer "just answered"
    assert practice.review_answer(QUIZ.pack, b, questions[1].answer).rating == "good"
    with pytest.raises(UsageError, match="just reviewed") as err:
        practice.review_rate(QUIZ.pack, a, "easy")
    assert err.value.argument == "item"
    # a wrong answer is Again and stays Again
    wrong = (questions[2].answer + 1) % len(questions[2].options)
    assert practice.review_answer(QUIZ.pack, c, wrong).rating == "again"
    with pytest.raises(UsageError, match="wrong"):
        practice.review_rate(QUIZ.pack, c, "easy")
    store.close()
