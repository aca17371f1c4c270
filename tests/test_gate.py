"""One gate for every learner action (issue 30 §1): who is asking -> may they -> act -> record, in
``Practice`` (practice/session.py). A track the teacher locked refuses every action on its exercises
with the lock's reason, whichever interface asks: the session itself, the CLI, the web app (no URL
matching in its middleware: the route's session call refuses) and a notebook's ``alignlings.check``.

The course here is a teacher's pack: track "warmup" (dpo-loss) and track "later", locked until
warmup is solved, holding one exercise of every kind: code, quiz, predict, bug, bug-or-not."""

from __future__ import annotations

import inspect
import shutil

import pytest

from alignlings import i18n
from alignlings.content import kinds
from alignlings.content.exercise import Exercise
from alignlings.content.pack import load_pack
from alignlings.practice.session import Locked, Practice
from alignlings.practice.store import ProgressStore

EN = i18n.lang_table("web.classroom")["en"]
FROM = {"dpo-grpo": ["dpo-loss", "reward-pooling", "concepts", "predict-reward-offset"],
        "bug-drills": ["scale-rewards-batch", "grpo-loss-zero"]}
LATER = ["reward-pooling", "concepts", "predict-reward-offset", "scale-rewards-batch", "grpo-loss-zero"]
REASON = EN["track_locked"].format(tracks=EN["track_name"].format(title="Warm-up"))

# Practice's methods whose first argument is an exercise: the learner's actions wear the gate;
# the rest only read (or start over) and are listed so that a new method must be placed in one.
ACTIONS = {"check", "hint", "reveal", "quiz_answer", "predict_answer", "cloze_open", "cloze_draw", "cloze_check",
           "bug_diff"}
READS = {"attempts", "cloze_stats", "hint_state", "reset", "quiz_start", "quiz_round", "lock_reason",
         "cloze_reveals", "predict_questions", "latest_attempt", "bug_story",
         "start", "level_progress", "cloze_draw_issued"}  # start: the level file is generated, not the answer


@pytest.fixture()
def teach(tmp_path):
    root = tmp_path / "teach"
    root.mkdir()
    for pack, names in FROM.items():
        base = load_pack([pack])
        for name in names:
            shutil.copytree(base.get(name).path, root / name)
    order = ", ".join(f'"{n}"' for ns in FROM.values() for n in ns)
    later = ", ".join(f'"{n}"' for n in LATER)
    (root / "pack.toml").write_text(
        f'[pack]\nid = "teach"\ntitle = {{ en = "Teacher", zh = "老师" }}\norder = [{order}]\n'
        '[[track]]\nid = "warmup"\ntitle = { en = "Warm-up", zh = "热身" }\nexercises = ["dpo-loss"]\n'
        '[[track]]\nid = "later"\ntitle = { en = "Later", zh = "之后" }\nrequires = ["warmup"]\n'
        f'exercises = [{later}]\n', encoding="utf-8")
    return root


class PassingGrader:
    """Every check passes (what is under test is who may check, not the grading)."""

    def __init__(self):
        self.calls = 0

    def check(self, exercise_id, code=None, *, fills=None, lang="en", run_main=True, quick=False):
        self.calls += 1
        return {"exercise": exercise_id, "passed": True, "blanks": [], "cases": [], "error": None,
                "isolation": "fake", "stdout": "", "seconds": 0.0}

    def close(self):
        pass


def _class(tmp_path, teach):
    """A class store with learner Cy; the course; Cy's session (a passing grader)."""
    store = ProgressStore(tmp_path / "class.sqlite3")
    learner, _ = store.add_learner("Cy")
    course = load_pack(teach)
    grader = PassingGrader()
    return store, course, store.for_learner(learner), grader


def _attempts(course: Practice, store) -> list[tuple[str, bool, str]]:
    """Every action on a locked exercise, as (what, refused?, message)."""
    c = course.course
    ex = {k: c.get(k) for k in LATER}
    quiz, bon, predict = ex["concepts"], ex["grpo-loss-zero"], ex["predict-reward-offset"]
    tries = {
        "check": lambda: course.check(ex["reward-pooling"], code="x = 1\n"),
        "hint": lambda: course.hint(ex["reward-pooling"]),
        "blank hint": lambda: course.hint(ex["reward-pooling"], 1),
        "reveal": lambda: course.reveal(ex["reward-pooling"]),
        "quiz answer": lambda: course.quiz_answer(quiz, quiz.quiz[0], quiz.quiz[0].answer),
        "bug-or-not answer": lambda: course.quiz_answer(bon, bon.quiz[0], bon.quiz[0].answer),
        "predict": lambda: course.predict_answer(predict, predict.predict[0].id, predict.predict[0].answer),
        "cloze open": lambda: course.cloze_open(ex["reward-pooling"]),
        "cloze draw": lambda: course.cloze_draw(ex["reward-pooling"], seed=1),
        "cloze check": lambda: course.cloze_check(ex["reward-pooling"], ["1:0"], {"1:0": "x"}),
        "bug check": lambda: course.check(ex["scale-rewards-batch"], code=ex["scale-rewards-batch"].buggy_source),
        "bug diff": lambda: course.bug_diff(ex["scale-rewards-batch"], "x = 1\n"),
        "review answer": lambda: course.review_answer("teach", f"quiz/{quiz.quiz[0].id}", quiz.quiz[0].answer),
        "review rating": lambda: course.review_rate("teach", f"quiz/{quiz.quiz[0].id}", "easy"),
    }
    out = []
    for what, fn in tries.items():
        try:
            fn()
        except Locked as exc:
            out.append((what, True, exc.message))
        else:
            out.append((what, False, ""))
    return out


def test_every_learner_action_on_an_exercise_passes_the_gate():
    """A method of Practice that takes an exercise first is an action (gated) or a read, listed here;
    a new one fails this test until someone decides which it is."""
    takes_exercise = set()
    for name, fn in inspect.getmembers(Practice, inspect.isfunction):
        params = list(inspect.signature(fn).parameters.values())
        if not name.startswith("_") and len(params) > 1 and params[1].name == "ex":
            takes_exercise.add(name)
    assert takes_exercise == ACTIONS | READS, takes_exercise ^ (ACTIONS | READS)
    assert sorted(n for n in ACTIONS if not getattr(getattr(Practice, n), "gated", False)) == []


def test_a_locked_track_refuses_every_action_through_the_session(tmp_path, teach):
    store, course, mine, grader = _class(tmp_path, teach)
    practice = Practice(mine, course, grader)
    quiz = course.get("concepts")
    practice.quiz_answer(quiz, quiz.quiz[0], quiz.quiz[0].answer)  # met before the lock: a review item now
    practice.review().sync()
    assert f"quiz/{quiz.quiz[0].id}" in mine.review_states(pack="teach")
    store.lock_track("teach/later", True)
    practice = Practice(mine, course, grader)
    before = mine.export()
    results = _attempts(practice, mine)
    assert [r for r in results if not r[1] or r[2] != REASON] == [], results
    assert grader.calls == 0  # refused before anything was graded
    after = mine.export()
    for table in ("attempts", "quiz_answers", "cloze", "events", "reviews"):
        assert after.get(table) == before.get(table), table  # and before anything was recorded
    # warmup solved: the same session lets every action through to its own checks
    practice.check(course.get("dpo-loss"), code="x = 1\n")
    assert practice.lock_reason(course.get("reward-pooling")) is None
    assert practice.hint(course.get("reward-pooling")).recorded
    assert practice.bug_diff(course.get("scale-rewards-batch"), "x = 1\n").hunks
    store.close()


def test_the_cli_relays_the_refusal(tmp_path, teach, monkeypatch):
    from typer.testing import CliRunner

    from alignlings.cli import check, common
    from alignlings.cli.app import app as cli_app

    store, course, mine, _ = _class(tmp_path, teach)
    store.lock_track("teach/later", True)
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ALIGNLINGS_LANG", "en")
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.setattr(common, "store", lambda: mine)
    monkeypatch.setattr(check, "store", lambda: mine)  # imported by name there
    monkeypatch.chdir(tmp_path)  # the workspace folder is made in the current folder
    runner = CliRunner()
    start = runner.invoke(cli_app, ["start", "reward-pooling", "--pack", str(teach)])
    assert start.exit_code == 0, start.output
    for args in (["hint", "reward-pooling"], ["solution", "reward-pooling"], ["cloze", "reward-pooling"],
                 ["check", "reward-pooling"]):
        out = runner.invoke(cli_app, [*args, "--pack", str(teach)])
        assert out.exit_code == 2 and REASON in " ".join(out.output.split()), (args, out.output)
    store.close()


def test_the_web_app_refuses_through_the_session_not_its_middleware(tmp_path, teach):
    pytest.importorskip("httpx")
    from test_classroom_identity import CODE, join, make_app, teacher

    app = make_app(tmp_path / "web.sqlite3", class_code=CODE, pack_path=[str(teach)])
    ann, _ = join(app, "Ann")
    quiz = load_pack(teach).get("concepts")
    q = quiz.quiz[0]
    assert ann.post(f"/api/quiz/teach/{q.id}?lang=en", json={"choice": q.answer}).status_code == 200  # met: reviewable
    assert teacher(app).post("/api/teacher/tracks/lock", json={"track": "teach/later"}).status_code == 200
    predict = load_pack(teach).get("predict-reward-offset").predict[0]
    posts = [("/api/exercises/reward-pooling/check", {"code": "x = 1\n"}),
             ("/api/exercises/reward-pooling/hint", None),
             ("/api/exercises/reward-pooling/solution", None),
             (f"/api/quiz/teach/{q.id}", {"choice": q.answer}),
             (f"/api/predict/predict-reward-offset/{predict.id}", {"choice": predict.answer}),
             ("/api/cloze/reward-pooling", {"action": "draw"}),
             ("/api/bug/scale-rewards-batch/diff", {"code": "x = 1\n"}),
             ("/api/review/answer", {"pack": "teach", "item": f"quiz/{q.id}", "answer": q.answer}),
             ("/api/review/rate", {"pack": "teach", "item": f"quiz/{q.id}", "rating": "easy"})]
    for path, body in posts:
        r = ann.post(f"{path}?lang=en", json=body) if body is not None else ann.post(f"{path}?lang=en")
        assert r.status_code == 403 and r.json()["detail"] == REASON, (path, r.status_code, r.text)
    app.state.ctx.store.close()


def test_a_notebook_on_a_class_store_is_refused(tmp_path, teach, monkeypatch):
    from alignlings.practice import notebook, store as store_pkg

    store, course, mine, _ = _class(tmp_path, teach)
    store.lock_track("teach/later", True)
    monkeypatch.setattr(store_pkg, "ProgressStore", lambda: mine)

    def pool_last_token(*args, **kwargs):  # a function of the exercise's template
        return None

    assert "pool_last_token" in course.get("reward-pooling").entry
    with pytest.raises(Locked) as refused:
        notebook.check("reward-pooling", pool_last_token, pack=course)
    assert refused.value.message == REASON
    store.close()


def test_every_registered_kind_is_in_the_locked_track(teach):
    """The refusal tests cover one exercise of every exercise kind the registry knows."""
    course = load_pack(teach)
    assert {course.get(k).kind for k in LATER} == set(kinds.REGISTRY)
    assert all(isinstance(course.get(k), Exercise) for k in LATER)
