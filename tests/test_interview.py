"""The mock interview (issue 32 §2): a reproducible draw, a clock, no hints or solutions while it
runs, answers recorded where they always are (so spaced review picks them up), a report; the CLI
through its runner, the web API in-process, and a class interview in the teacher's view (SQLite here;
tests/test_classroom_pg.py runs the class test on PostgreSQL)."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta

import pytest
from typer.testing import CliRunner

from alignlings.cli.app import app as cli_app
from alignlings.practice import interview as iv
from alignlings.grading import levels
from alignlings.content import questionbank
from alignlings.content.pack import default_pack_paths, load_pack
from alignlings.practice.session import Locked, Practice, UsageError
from alignlings.practice.store import ProgressStore

COURSE = load_pack(default_pack_paths())


class FakeGrader:
    """Passes a file exactly when it is the reference (the real grader is tested elsewhere)."""

    def check(self, key, code=None, *, fills=None, lang="en", run_main=True, **kw):
        ex = COURSE.exercises[key]
        passed = bool(code) and code.strip() == ex.kind_spec.solution_file(ex, lang).strip()
        cases = [{"name": "visible", "label": {"en": "the spec's example", "zh": "题目中的例子"}, "kind": "visible",
                  "passed": passed, "message": "" if passed else "your output differs", "misconception": None}]
        return {"exercise": key, "passed": passed, "blanks": [], "cases": cases, "error": None}

    def level(self, grader, key, code, level, *, lang="en", run_main=True, variant=None):
        """``levels.check_level`` for this fake: passes when the file is the reference at that level."""
        ex = COURSE.exercises[key]
        verdict = self.check(key, code.strip() == levels.reference_at(ex, level).strip() and
                             ex.kind_spec.solution_file(ex, lang))
        return {**verdict, "level": level, "misconception": None}

    def submission(self, ex, fills):  # pragma: no cover - only files are sent here
        raise AssertionError

    def close(self):
        pass


@pytest.fixture(autouse=True)
def fake_level_checks(monkeypatch):
    fake = FakeGrader()
    monkeypatch.setattr(levels, "check_level", fake.level)


def written(ex, item):
    """The right answer to a file item: the reference at the item's level (or a drill's fixed file)."""
    return levels.reference_at(ex, item["level"]) if item["level"] else ex.kind_spec.solution_file(ex, "en")


@pytest.fixture()
def practice(tmp_path):
    store = ProgressStore(tmp_path / "p.sqlite3")
    p = Practice(store, COURSE, FakeGrader())
    yield p
    store.close()


def _right_choice(item):
    return iv.question_of(COURSE, item)[1].answer


def test_the_same_seed_draws_the_same_items_and_each_slot_is_filled():
    a = iv.draw(COURSE, iv.Spec.checked(11))
    assert a == iv.draw(COURSE, iv.Spec.checked(11))
    assert [i["slot"] for i in a] == list(iv.DEFAULT_PLAN)
    assert len({(i["exercise"], i["question"]) for i in a}) == len(a)  # nothing asked twice
    write = next(i for i in a if i["slot"] == "write")
    assert write["level"] in (4, 5) and COURSE.exercises[write["exercise"]].kind_spec.has_blanks
    seeds = {tuple((i["exercise"], i["question"]) for i in iv.draw(COURSE, iv.Spec.checked(s))) for s in range(8)}
    assert len(seeds) > 1  # the seed matters
    one = iv.draw(COURSE, iv.Spec.checked(3, track="foundations", items=3))
    assert one[1]["slot"] == "write" and one[1]["exercise"] in COURSE.track("foundations").exercises
    # the track's own interview questions (packs' interview/<track>.toml) fill its concept slots
    assert one[0]["exercise"] == iv.BANK + "dpo-grpo/foundations" and one[0]["from_track"]
    concepts = [i for s in range(30) for i in iv.draw(COURSE, iv.Spec.checked(s, track="spot-the-bug"))
                if i["slot"] == "concept"]
    assert concepts and all(i["exercise"] == iv.BANK + "bug-drills/spot-the-bug" for i in concepts)


@pytest.mark.parametrize("kw, argument", [({"minutes": 0}, "minutes"), ({"items": 99}, "items"),
                                          ({"level": 3}, "level"), ({"seed": -1}, "seed"),
                                          ({"track": "nope"}, "track")])
def test_bad_input_names_the_argument(practice, kw, argument):
    with pytest.raises(UsageError) as err:
        practice.interview_start(**{"seed": 1, **kw})
    assert err.value.argument == argument


def test_an_interview_refuses_help_records_answers_and_reports(practice):
    view = practice.interview_start(seed=5, minutes=30, items=4)
    items = view["items"]
    assert [i["slot"] for i in items] == ["concept", "write", "bug", "predict"]
    assert "answer" not in str(items[0]).lower() or "correct" not in items[0]  # nothing of the key before the end
    write_ex = COURSE.exercises[items[1]["exercise"]]
    # no hints, solutions, cloze drill, quiz answers or review answers while it runs
    for call in (lambda: practice.hint(write_ex), lambda: practice.reveal(write_ex),
                 lambda: practice.cloze_open(write_ex)):
        with pytest.raises(Locked, match="interview"):
            call()
    # a choice is final; the right one for item 0, a wrong one for the predict item
    practice.interview_answer(0, choice=_right_choice(items[0]))
    with pytest.raises(UsageError, match="final"):
        practice.interview_answer(0, choice=0)
    with pytest.raises(UsageError) as err:
        practice.interview_answer(0, code="x = 1")
    assert err.value.argument == "choice"
    wrong = (_right_choice(items[3]) + 1) % len(items[3]["options"])
    practice.interview_answer(3, choice=wrong)
    # a file: wrong first, then the reference (the last submission counts)
    first = practice.interview_answer(1, code=items[1]["start"])
    assert first["passed"] is False and "1 of 1" in first["summary"]
    right = practice.interview_answer(1, code=written(write_ex, items[1]))
    assert right["passed"] is True
    rep = practice.interview_finish()
    assert (rep["right"], rep["total"]) == (2, 4)
    by = {r["index"]: r for r in rep["items"]}
    assert by[0]["correct"] and by[1]["correct"] and not by[3]["correct"] and not by[2]["answered"]
    assert by[3]["feedback"] and by[3]["misconceptions"]  # why the chosen option is wrong
    # the wrong prediction is in spaced review; the unanswered bug is to practise again
    assert rep["review_next"] == [f"predict/{items[3]['question']}"]
    assert rep["practise_next"] == [f"alignlings start {items[2]['exercise']}"]
    # recorded where it always is: the quiz answers and the attempts (so review picks them up)
    assert items[0]["question"] in practice.quiz_answers(iv.question_of(COURSE, items[0])[0])
    assert any(a["passed"] for a in practice.attempts(write_ex))
    practice._review = None  # a fresh review engine reads the new history
    assert practice.review_counts()["items"] >= 2  # the two answers are scheduled
    # over: help comes back, answers are refused
    practice.hint(write_ex)
    with pytest.raises(UsageError, match="no interview"):
        practice.interview_answer(2, code="")


def test_the_clock_ends_an_interview_for_every_interface(practice, monkeypatch):
    practice.interview_start(seed=2, minutes=1, items=2)
    later = iv.now_utc() + timedelta(minutes=2)
    monkeypatch.setattr(type(practice), "_interview_now", lambda self: later)
    assert practice.interview_current() is None
    with pytest.raises(UsageError):
        practice.interview_answer(0, choice=0)
    rep = practice.interview_report()
    assert rep["finished_at"] and rep["right"] == 0 and len(rep["practise_next"]) == 2 and not rep["review_next"]


def test_the_cli_runs_a_three_item_interview_and_reports(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ALIGNLINGS_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.setattr("alignlings.grading.grader.Grader", lambda course: FakeGrader())
    items = iv.draw(COURSE, iv.Spec.checked(21, items=3))
    assert [i["slot"] for i in items] == ["concept", "write", "bug"]
    letter = "ABCD"[_right_choice(items[0])]
    runner = CliRunner()
    # item 1 right, then pause on item 2: the clock keeps running and a new run resumes
    r = runner.invoke(cli_app, ["interview", "--seed", "21", "--items", "3", "--lang", "en"], input=f"{letter}\nq\n")
    assert r.exit_code == 0, r.output
    assert "3 items" in r.output and "Paused" in r.output
    path = next((tmp_path / "ws" / "interview").glob("*/2-*.py"))
    assert f"level {items[1]['level']}" in path.read_text().splitlines()[0]  # the level file, its header first
    ex = COURSE.exercises[items[1]["exercise"]]
    path.write_text(written(ex, items[1]))
    r = runner.invoke(cli_app, ["interview", "--lang", "en"], input="\nn\n")  # submit the file, skip the bug
    assert r.exit_code == 0, r.output
    assert "Every case passes" in r.output
    assert "Interview report: 2/3 right" in r.output
    assert f"alignlings start {items[2]['exercise']}" in r.output and "Practise again" in r.output
    assert path.read_text() == written(ex, items[1])  # never overwritten
    r = runner.invoke(cli_app, ["interview", "--report", "--lang", "zh"])
    assert r.exit_code == 0 and "面试报告：答对 2/3" in r.output, r.output
    r = runner.invoke(cli_app, ["interview", "--minutes", "0"])
    assert r.exit_code == 2 and "minutes" in r.output


def test_the_web_page_and_api(tmp_path):
    from fastapi.testclient import TestClient

    from alignlings.web.app import create_app

    app = create_app(db_path=tmp_path / "w.sqlite3", grader=FakeGrader(), warm_up=False)
    c = TestClient(app)
    assert c.get("/api/interview").status_code == 404
    assert "interview-start" in c.get("/interview").text
    view = c.post("/api/interview/start", json={"seed": 21, "items": 3}).json()
    page = c.get("/interview?lang=zh").text
    assert "interview-clock" in page and "第 1 题，共 3 题" in page
    assert c.post("/api/exercises/dpo-loss/hint").status_code == 403  # no hints while it runs
    ok = c.post("/api/interview/answer", json={"index": 0, "choice": _right_choice(view["items"][0])})
    assert ok.status_code == 200 and "correct" not in ok.json()
    assert c.post("/api/interview/answer", json={"index": 0, "choice": 0}).status_code == 422
    r = c.post("/api/interview/answer", json={"index": 1, "code": "def f(:"})
    assert r.status_code == 200 and r.json()["passed"] is False
    rep = c.post("/api/interview/finish").json()
    assert rep["right"] == 1 and rep["total"] == 3
    page = c.get("/interview?lang=en").text
    assert "interview-report" in page and "1 of 3 right" in page


def test_a_class_interview_in_the_teachers_view(db):
    from test_classroom_identity import CODE, join, make_app, teacher

    app = make_app(db, class_code=CODE)
    t = teacher(app)
    (ann, _), (bo, _) = join(app, "Ann"), join(app, "Bo", address="10.0.0.2")
    assert ann.post("/api/teacher/interviews", json={"title": "x", "due": "2099-01-01"}).status_code in (401, 403)
    assert t.post("/api/teacher/interviews", json={"title": "", "due": "2099-01-01"}).status_code == 422
    given = t.post("/api/teacher/interviews", json={"title": "Week 3 mock", "due": "2099-01-01", "seed": 21,
                                                     "items": 3, "minutes": 30}).json()
    assert "Week 3 mock" in ann.get("/interview").text
    a = ann.post("/api/interview/start", json={"assignment": given["id"]}).json()
    b = bo.post("/api/interview/start", json={"assignment": given["id"]}).json()
    assert [(i["exercise"], i["question"]) for i in a["items"]] == [(i["exercise"], i["question"]) for i in b["items"]]
    assert a["minutes"] == 30
    ann.post("/api/interview/answer", json={"index": 0, "choice": _right_choice(a["items"][0])})
    ann.post("/api/interview/finish")
    res = t.get("/api/teacher/interviews").json()["interviews"][0]
    rows = {r["name"]: r for r in res["learners"]}
    assert rows["Ann"]["status"] == "finished" and rows["Ann"]["right"] == 1 and rows["Ann"]["on_time"] is True
    assert rows["Bo"]["status"] == "running" and rows["Bo"]["right"] is None
    assert [(r["answered"], r["right"]) for r in res["per_item"]] == [(1, 1), (0, 0), (0, 0)]
    page = t.get(f"/teacher/interviews/{given['id']}").text
    assert "Week 3 mock" in page and "Ann" in page
    assert "模拟面试" in t.get("/teacher?lang=zh").text
    table = list(csv.DictReader(io.StringIO(t.get(f"/teacher/interviews/{given['id']}/results.csv").text)))
    assert {(r["name"], r["status"], r["right"]) for r in table} == {("Ann", "finished", "1"), ("Bo", "running", "")}
    items = list(csv.DictReader(io.StringIO(t.get(f"/teacher/interviews/{given['id']}/items.csv").text)))
    assert [r["right"] for r in items] == ["1", "0", "0"] and re.match(r"\w", items[0]["title"])


@pytest.fixture()
def db(tmp_path):
    return tmp_path / "c.sqlite3"


def test_a_tracks_interview_question_comes_back_in_review_and_travels_in_an_export(tmp_path):
    store = ProgressStore(tmp_path / "a.sqlite3")
    p = Practice(store, COURSE, FakeGrader())
    view = p.interview_start(seed=3, track="foundations", items=1)
    item = view["items"][0]
    assert item["exercise"] == iv.BANK + "dpo-grpo/foundations"
    pack_id, q = iv.question_of(COURSE, item)
    wrong = (q.answer + 1) % len(q.options)
    p.interview_answer(0, choice=wrong)
    rep = p.interview_finish()
    assert rep["review_next"] == [f"quiz/{q.id}"]
    p._review = None
    p.review_item(pack_id, f"quiz/{q.id}")  # met: it has a schedule
    tag = questionbank.course_banks(COURSE)["dpo-grpo/foundations"][2][q.id][0]
    shown = [r.shown for r in p.review_queue(concept=tag).items if r.shown.item == f"quiz/{q.id}"]
    assert shown and shown[0].question == q.question["en"] and len(shown[0].options) == len(q.options)
    checked = p.review_answer(pack_id, f"quiz/{q.id}", q.answer)
    assert checked.result["correct"] is True
    # the answer travels: an export imports into a fresh home that knows only the loaded course
    data = p.export()
    other = Practice(ProgressStore(tmp_path / "b.sqlite3"), COURSE)
    counts = other.import_(data, only_loaded=True)
    assert counts["quiz_answers"] == 1 and q.id in other.quiz_answers(pack_id)
    mastery = {r["concept"]: r for r in p.mastery()}
    assert all(r["practise"] for r in mastery.values())
    store.close()
