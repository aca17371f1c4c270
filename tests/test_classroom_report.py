"""The teacher's view answers "who is stuck where" (issue 24 §2), in-process: per learner and per
exercise, filtered by pack and track, with track columns in the CSVs; /docs opens with the teacher's
token. The history is written straight into the store (what the routes would record), so every
number below is computed by hand."""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta, timezone

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from alignlings.practice import store as pr  # noqa: E402
from alignlings.practice import report  # noqa: E402
from alignlings.content.pack import default_pack_paths, load_pack  # noqa: E402
from alignlings.web.app import create_app  # noqa: E402

TEACHER, CODE = "report-teacher", "REPT2345"
COURSE = load_pack(default_pack_paths())
DPO = COURSE.get("dpo-loss")
MISC = DPO.misconceptions[0]
QUIZ = COURSE.get("concepts").quiz


class NoGrader:
    def check(self, *a, **k):
        raise AssertionError("nothing here grades")

    def close(self):
        pass


def at(minutes: float) -> str:
    return (datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc) + timedelta(minutes=minutes)).isoformat()


def write(store, learner, rows):
    """Insert history rows at given times (the store's own methods stamp 'now')."""
    import json
    import uuid

    def insert(db):
        for table, values in rows:
            if table == "attempts":
                exercise, passed, minutes, verdict, code = values
                db.execute("INSERT INTO attempts (uuid, learner, pack, exercise, passed, created_at, code, verdict, source) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'web')",
                           (str(uuid.uuid4()), learner, "dpo-grpo", exercise, int(passed), at(minutes), code,
                            json.dumps(verdict)))
            elif table == "events":
                exercise, kind, minutes = values
                db.execute("INSERT INTO events (uuid, learner, pack, exercise, kind, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                           (str(uuid.uuid4()), learner, "dpo-grpo", exercise, kind, at(minutes)))
            else:
                question, choice, correct, minutes = values
                db.execute("INSERT INTO quiz_answers (uuid, learner, pack, question_id, choice, correct, created_at) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?)",
                           (str(uuid.uuid4()), learner, "dpo-grpo", question, choice, int(correct), at(minutes)))

    store._write(insert)


def failed(blank, misconception=None):
    return {"passed": False, "blanks": [{"index": blank, "passed": False, "misconception": misconception}]}


@pytest.fixture()
def app(tmp_path):
    app = create_app(db_path=tmp_path / "c.sqlite3", token=TEACHER, classroom=True, class_code=CODE,
                     grader=NoGrader(), warm_up=False)
    store = app.state.ctx.store
    ann, _ = store.add_learner("Ann")
    bo, _ = store.add_learner("Bo")
    write(store, ann, [
        ("attempts", ("dpo-loss", False, 0, failed(MISC.blank, MISC.id), "ann-1")),
        ("events", ("dpo-loss", "hint", 2)),
        ("attempts", ("dpo-loss", True, 10, {"passed": True, "blanks": []}, "ann-2")),
        ("quiz", (QUIZ[0].id, QUIZ[0].answer, True, 12)),
    ])
    wrong_choice = (QUIZ[0].answer + 1) % len(QUIZ[0].options)
    write(store, bo, [
        ("attempts", ("dpo-loss", False, 0, failed(MISC.blank, MISC.id), "bo-1")),
        ("attempts", ("dpo-loss", False, 5, failed(3), "bo-2")),
        ("events", ("grpo-loss", "reveal", 7)),
        ("quiz", (QUIZ[0].id, wrong_choice, False, 60)),  # after a 53-minute break
    ])
    # per-blank hints (blanks 1, 1 and 3): since schema 6 every hint of either kind is one hint event
    write(store, bo, [("events", ("dpo-loss", "hint", 7))] * 3)
    app.state.ids = {"Ann": ann, "Bo": bo, "wrong_choice": wrong_choice}
    return app


def teacher(app):
    return TestClient(app, headers={"Authorization": f"Bearer {TEACHER}"})


def test_per_learner_who_is_stuck_where(app):
    rows = {r["name"]: r for r in report.learner_rows(app.state.ctx.store, COURSE)}
    ann, bo = rows["Ann"], rows["Bo"]
    assert ann["solved"] == [{"exercise": "dpo-loss", "at": at(10)}] and ann["failing_blanks"] == {}
    assert ann["hints"] == 1 and ann["last_activity"] == at(12)
    assert ann["time_on_task_s"] == 60 + 12 * 60  # one session: 0 -> 2 -> 10 -> 12 minutes, plus a minute to start
    assert bo["failing_blanks"] == {"dpo-loss": [3]}  # what his latest attempt fails, not the first one's blank
    assert bo["misconceptions"] == [(f"dpo-loss: {MISC.id}", 1)]
    assert bo["hints"] == 3  # both kinds count: three per-blank hints
    assert bo["revealed"] == ["grpo-loss"]
    choice = QUIZ[0].options[app.state.ids["wrong_choice"]].text["en"]
    assert bo["wrong_choices"] == [{"exercise": "concepts", "question": QUIZ[0].id, "kind": "quiz", "label": "quiz",
                                    "question_text": QUIZ[0].question["en"], "choice": choice}]
    assert bo["time_on_task_s"] == 60 + 5 * 60 + 2 * 60 + 60  # 0 -> 5 -> 7, then a break: a new session at 60
    assert bo["last_submission"] == {"exercise": "dpo-loss", "at": at(5), "passed": False, "code": "bo-2"}


def test_per_exercise_solved_stuck_medians_misconceptions_blanks(app):
    rows = {r["exercise"]: r for r in report.exercise_rows(app.state.ctx.store, COURSE)}
    dpo = rows["dpo-loss"]
    assert (dpo["solved"], dpo["stuck"], dpo["median_attempts"], dpo["median_seconds"]) == (1, 1, 2, 600)
    assert dpo["misconceptions"] == [{"id": MISC.id, "learners": 2, "feedback": MISC.feedback["en"]}]
    assert dpo["blanks_wrong"] == sorted([{"blank": MISC.blank, "times": 2}, {"blank": 3, "times": 1}],
                                         key=lambda b: (-b["times"], b["blank"]))
    assert dpo["track"] == COURSE.track_of("dpo-loss").key
    concepts = rows["concepts"]  # a quiz: Ann answered it right (one question of several: not all yet)
    assert concepts["solved"] + concepts["stuck"] == 2
    assert rows["grpo-loss"]["solved"] == 0 and rows["grpo-loss"]["stuck"] == 0  # a look at the solution is no attempt


def test_filters_by_pack_and_track_and_csvs_with_tracks(app):
    t = teacher(app)
    track = COURSE.track_of("dpo-loss").key
    data = t.get(f"/api/teacher/class?track={track}").json()
    keys = {r["exercise"] for r in data["report"]["exercises"]}
    assert keys == set(next(tr for tr in COURSE.tracks if tr.key == track).exercises)
    assert {r["exercise"] for r in data["progress"]} == keys
    bugs = t.get("/api/teacher/class?pack=bug-drills").json()
    assert {r["pack"] for r in bugs["report"]["exercises"]} == {"bug-drills"}
    assert t.get("/api/teacher/class?pack=nope").status_code == 422
    assert t.get("/api/teacher/class?track=nope").status_code == 422
    progress = list(csv.DictReader(io.StringIO(t.get("/teacher/progress.csv?pack=bug-drills").text)))
    assert list(progress[0])[:3] == ["name", "learner", "track"]  # the track first, not 47 columns to the right
    assert {r["track"] for r in progress} == {"bug-drills/spot-the-bug"}
    full = list(csv.DictReader(io.StringIO(t.get("/teacher/progress.csv").text)))
    tracks = [r["track"] for r in full]
    order = [tr.key for tr in COURSE.tracks]
    assert tracks == sorted(tracks, key=order.index)  # grouped by track, in the course's order (issue 34)
    learners = list(csv.DictReader(io.StringIO(t.get("/teacher/learners.csv").text)))
    assert [r["name"] for r in learners] == ["Ann", "Bo"] and learners[1]["hints"] == "3"
    assert "bo-2" not in t.get("/teacher/learners.csv").text  # code stays on the page, out of the CSV
    exercises = list(csv.DictReader(io.StringIO(t.get(f"/teacher/exercises.csv?track={track}").text)))
    assert {r["track"] for r in exercises} == {track} and "dpo-loss" in {r["exercise"] for r in exercises}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_teacher_page_shows_the_report_in_both_languages(app, lang):
    from alignlings import i18n

    s = i18n.lang_table("web.classroom")[lang]
    page = teacher(app).get(f"/teacher?lang={lang}").text
    for key in ("by_exercise", "by_learner", "stuck", "failing_blanks", "wrong_choices", "last_submission"):
        assert s[key] in page, key
    assert 'class="table-scroll" tabindex="0" role="region"' in page  # the wide table is reachable by keyboard
    assert "bo-2" in page and 'href="/exercises/dpo-loss#blank-3"' in page


def test_docs_and_openapi_open_with_the_teacher_token(app):
    anon = TestClient(app)
    assert anon.get("/docs", follow_redirects=False).status_code == 401
    assert anon.get("/openapi.json").status_code == 401
    t = teacher(app)
    assert t.get("/docs").status_code == 200
    schema = t.get("/openapi.json").json()
    assert "/api/teacher/class" in schema["paths"] and "/api/join" in schema["paths"]
    c = TestClient(app)
    r = c.get(f"/docs?token={TEACHER}", follow_redirects=False)
    assert r.status_code == 307 and c.get("/openapi.json").status_code == 200  # the cookie carries it


def test_time_on_task_counts_gaps_up_to_the_idle_limit():
    assert report.time_on_task([]) == 0
    assert report.time_on_task([0.0]) == report.SESSION_START_S
    assert report.time_on_task([0.0, 100.0, 100.0 + report.IDLE_GAP_S + 1]) == 2 * report.SESSION_START_S + 100


def test_store_rows_are_read_once_per_table(app, monkeypatch):
    calls = []
    store = app.state.ctx.store
    original = pr.ProgressStore._read

    def counting(self, sql, args=()):
        calls.append(sql.split(" FROM ")[1].split()[0] if " FROM " in sql else sql)
        return original(self, sql, args)

    monkeypatch.setattr(pr.ProgressStore, "_read", counting)
    report.learner_rows(store, COURSE)
    assert len(calls) <= 7, calls  # learners + five tables, however many learners and exercises


def test_the_class_table_counts_both_kinds_of_hints(app):
    cells = {(r["name"], r["exercise"]): r for r in teacher(app).get("/api/teacher/class").json()["progress"]}
    assert cells[("Ann", "dpo-loss")]["hints"] == 1  # one hint of the exercise
    assert cells[("Bo", "dpo-loss")]["hints"] == 3  # three per-blank hints on the web


# -- predict items: predictions made, right before the run, the wrong options chosen -----------------
PREDICT = COURSE.get("predict-old-policy-sync")
PRED = PREDICT.predict[0]
PRED_WRONG = (PRED.answer + 1) % len(PRED.options)


@pytest.fixture()
def predicted(app):
    """Ann predicts wrong, sees the run, then answers again right (a round each, as the session records
    them); Bo predicts right at once. Bo also answered the quiz question wrong (the app fixture)."""
    ann, bo = app.state.ids["Ann"], app.state.ids["Bo"]
    write(app.state.ctx.store, ann, [
        ("quiz", (PRED.id, PRED_WRONG, False, 20)), ("attempts", (PREDICT.id, False, 20, {"passed": False}, "")),
        ("quiz", (PRED.id, PRED.answer, True, 22)), ("attempts", (PREDICT.id, True, 22, {"passed": True}, "")),
    ])
    write(app.state.ctx.store, bo, [
        ("quiz", (PRED.id, PRED.answer, True, 61)), ("attempts", (PREDICT.id, True, 61, {"passed": True}, "")),
    ])
    return app


def test_per_learner_predictions_count_the_first_one_and_name_the_wrong_option(predicted):
    rows = {r["name"]: r for r in report.learner_rows(predicted.state.ctx.store, COURSE, lang="zh")}
    ann, bo = rows["Ann"], rows["Bo"]
    assert (ann["predictions"], ann["predictions_right"]) == (1, 0)  # right only after seeing the run
    assert (bo["predictions"], bo["predictions_right"]) == (1, 1)
    assert ann["wrong_choices"] == [{"exercise": PREDICT.key, "question": PRED.id, "kind": "predict", "label": "预测",
                                     "question_text": PRED.question["zh"], "choice": PRED.options[PRED_WRONG].text["zh"]}]
    quiz = COURSE.get("concepts")
    assert bo["wrong_choices"] == [{"exercise": "concepts", "question": QUIZ[0].id, "kind": "quiz", "label": "测验",
                                    "question_text": QUIZ[0].question["zh"], "choice": QUIZ[0].options[predicted.state.ids["wrong_choice"]].text["zh"]}]
    assert quiz.kind_spec.first_answer_counts is False and PREDICT.kind_spec.first_answer_counts is True


def test_per_exercise_a_predict_item_shows_answers_right_and_wrong_options_once_per_learner(predicted):
    rows = {r["exercise"]: r for r in report.exercise_rows(predicted.state.ctx.store, COURSE)}
    row = rows[PREDICT.key]
    # solved as each learner sees it (latest answers), each learner once though their rounds are attempts too
    assert (row["solved"], row["stuck"], row["median_attempts"]) == (2, 0, None)
    assert (row["kind"], row["predict"], row["answered"], row["answered_right"]) == ("predict", True, 2, 1)
    assert row["questions"] == [{"question": PRED.id, "text": PRED.question["en"], "answered": 2, "right": 1,
                                 "wrong_options": [{"option": "ABCDEFGH"[PRED_WRONG],
                                                    "text": PRED.options[PRED_WRONG].text["en"], "learners": 1}]}]
    concepts = rows["concepts"]  # a quiz question: judged by the latest answer, its wrong option named too
    first = next(q for q in concepts["questions"] if q["question"] == QUIZ[0].id)
    assert (first["answered"], first["right"]) == (2, 1) and first["wrong_options"][0]["learners"] == 1
    assert concepts["predict"] is False and rows["dpo-loss"]["questions"] == []


def test_the_csvs_carry_predictions_and_wrong_options(predicted):

    t = teacher(predicted)
    learners = {r["name"]: r for r in csv.DictReader(io.StringIO(t.get("/teacher/learners.csv").text))}
    assert (learners["Ann"]["predictions"], learners["Ann"]["predictions_right"]) == ("1", "0")
    assert (learners["Bo"]["predictions"], learners["Bo"]["predictions_right"]) == ("1", "1")
    assert f"{PREDICT.key} [predict] {PRED.question['en']} -> " in learners["Ann"]["wrong_choices"]  # no JSON
    track = COURSE.track_of(PREDICT.key).key
    exercises = {r["exercise"]: r for r in csv.DictReader(io.StringIO(t.get(f"/teacher/exercises.csv?track={track}").text))}
    row = exercises[PREDICT.key]
    assert (row["kind"], row["answered"], row["answered_right"], row["solved"]) == ("predict", "2", "1", "2")
    assert row["wrong_options"] == (f"{PRED.question['en']} -> {'ABCDEFGH'[PRED_WRONG]} "
                                    f"“{PRED.options[PRED_WRONG].text['en']}” (1 learners)")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_teacher_page_shows_predictions_in_both_languages(predicted, lang):
    from alignlings import i18n

    s = i18n.lang_table("web.classroom")[lang]
    page = teacher(predicted).get(f"/teacher?lang={lang}").text
    assert s["predicted_right"].format(right=1, answered=2) in page
    assert s["wrong_options"] in page and PRED.options[PRED_WRONG].text[lang] in page
    assert s["predictions_of"].format(right=0, made=1) in page and s["predictions_of"].format(right=1, made=1) in page
    assert s["question_right"].format(right=1, answered=2) in page  # the quiz question, the same way


def test_a_prediction_through_the_web_reaches_the_report(app, monkeypatch):
    """A learner who joined predicts on the page's API; the teacher's report has it (the run is not
    what is tested here: it is made to fail, and the prediction is still recorded)."""
    from alignlings.content import predictions as predict_data

    def no_run(ex, q, use_cache=True):
        raise predict_data.VariantError("not run in this test", "")

    monkeypatch.setattr(predict_data, "run_variant", no_run)
    c = TestClient(app, client=("10.0.0.9", 40000))
    assert c.post("/api/join", json={"name": "Cy", "code": CODE}).status_code == 200
    question = COURSE.get("predict-token-weight").predict[0]
    wrong = (question.answer + 1) % len(question.options)
    r = c.post(f"/api/predict/predict-token-weight/{question.id}", json={"choice": wrong})
    assert r.status_code == 200 and r.json()["correct"] is False and r.json()["run_error"]
    cy = next(r for r in report.learner_rows(app.state.ctx.store, COURSE) if r["name"] == "Cy")
    assert (cy["predictions"], cy["predictions_right"]) == (1, 0)
    assert cy["wrong_choices"][0]["question"] == question.id
    row = next(r for r in report.exercise_rows(app.state.ctx.store, COURSE) if r["exercise"] == "predict-token-weight")
    assert (row["stuck"], row["questions"][0]["wrong_options"][0]["option"]) == (1, "ABCDEFGH"[wrong])
