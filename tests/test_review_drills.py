"""Spaced review of the spot-the-bug drills (issue 14 with issue 13's pack): every bug drill and every
bug-or-not question is a review item when the bug-drills pack is loaded; a bug drill's re-test is its
buggy file again, graded in the sandbox; the CLI (line edits) and the web routes, both languages."""

from __future__ import annotations

import re
import shutil
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from alignlings.practice import review as rv
from alignlings.content.pack import PackError, load_pack
from alignlings.practice.store import ProgressStore

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
DRILLS = "bug-drills"
BUG = "eos-masked-when-pad-is-eos"  # buggy.py line 26: labels masked by pad id (pad == eos erases every EOS)
FIXED_LINE = "labels[attention_mask == 0] = IGNORE_INDEX"
BON = "grpo-loss-zero"  # a bug-or-not drill


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))


@pytest.fixture(scope="module")
def course():
    return load_pack(["dpo-grpo", DRILLS])


def _u() -> str:
    return str(uuid.uuid4())


def drill_history(store: ProgressStore, at: datetime = T0) -> None:
    """The bug drill fixed at its second attempt, and both questions of a bug-or-not drill answered."""
    t0, t1 = (at - timedelta(minutes=5)).isoformat(), at.isoformat()
    quiz = load_pack(DRILLS).get(BON).quiz
    store.import_({"format": "alignlings-progress", "version": 2,
                   "attempts": [{"uuid": _u(), "pack": DRILLS, "exercise": BUG, "passed": p, "created_at": t,
                                 "code": "", "verdict": {"exercise": BUG, "passed": p, "cases": [], "blanks": []},
                                 "source": "cli"} for p, t in ((False, t0), (True, t1))],
                   "quiz_answers": [{"uuid": _u(), "pack": DRILLS, "question_id": q.id, "choice": q.answer,
                                     "correct": True, "created_at": t1} for q in quiz]})


def test_every_drill_is_a_review_item(course):
    items = rv.catalog(course)
    drills = load_pack(DRILLS)
    for ex in drills:
        if ex.kind_spec.starts_from_buggy_file:
            item = items[(DRILLS, f"bug/{ex.id}")]
            assert item.kind == "bug" and item.exercise == ex.key
        else:
            assert ex.kind == "bug-or-not"
            for q in ex.quiz:
                assert items[(DRILLS, f"quiz/{q.id}")].kind == "quiz"
    # nothing else comes from the drills pack: no cloze lines or misconceptions of buggy files
    assert {i.kind for (p, _), i in items.items() if p == DRILLS} == {"bug", "quiz"}
    # the default course (when it includes the drills) builds its catalog too
    default = load_pack()
    if DRILLS in [p.id for p in default.packs]:
        assert (DRILLS, f"bug/{BUG}") in rv.catalog(default)


def test_drill_concepts_from_exercise_toml(tmp_path, course):
    for name in (BUG, BON):
        shutil.copytree(course.get(name).path, tmp_path / "pack" / name)
    shutil.copytree(load_pack(DRILLS).path / "texts", tmp_path / "pack" / "texts")
    (tmp_path / "pack" / "pack.toml").write_text('[pack]\nid = "drills-copy"\n', encoding="utf-8")
    for name, tags in ((BUG, '["padding-and-masks"]'), (BON, '["loss-aggregation", "advantage-normalisation"]')):
        toml = tmp_path / "pack" / name / "exercise.toml"
        text = re.sub(r"(?m)^concepts = .*$", f"concepts = {tags}", toml.read_text(encoding="utf-8"))
        toml.write_text(text, encoding="utf-8")
    pack = load_pack(tmp_path / "pack")
    items = rv.catalog(pack)
    assert items[("drills-copy", f"bug/{BUG}")].concepts == ("padding-and-masks",)
    assert {items[("drills-copy", f"quiz/{BON}:{part}")].concepts for part in ("verdict", "reason")} == {
        ("loss-aggregation", "advantage-normalisation")}
    toml = tmp_path / "pack" / BUG / "exercise.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace('["padding-and-masks"]', '"padding"'), encoding="utf-8")
    with pytest.raises(PackError, match=r"exercise.toml: concepts: expected a list of concept tags"):
        rv.catalog(load_pack(tmp_path / "pack"))


def test_every_drill_has_concepts_named_in_both_languages(course):
    drills = load_pack(DRILLS)
    names = {lang: rv.concept_names(drills, lang) for lang in ("en", "zh")}  # the pack alone names its tags
    for ex in drills:
        tags = rv.drill_concepts(ex)
        assert tags, ex.id
        for lang in ("en", "zh"):
            assert set(tags) <= set(names[lang]), (ex.id, lang)
    # the shared tags mean the same in both packs, so mastery per concept adds drills and exercises up
    seed = {lang: rv.concept_names(load_pack("dpo-grpo"), lang) for lang in ("en", "zh")}
    for lang in ("en", "zh"):
        assert all(names[lang][t] == seed[lang][t] for t in set(names[lang]) & set(seed[lang])), lang
    bug_items = [i for (p, _), i in rv.catalog(course).items() if p == DRILLS]
    assert bug_items and all(i.concepts for i in bug_items)


def test_drill_history_enters_review(tmp_path, course):
    with ProgressStore(tmp_path / "a.sqlite3") as store:
        drill_history(store)
        review = rv.Review(store, course, rv.FixedClock(T0 + timedelta(days=1)))
        assert review.sync() == 3
        log = store.review_log(pack=DRILLS, item=f"bug/{BUG}")
        assert [r["rating"] for r in log] == [rv.GOOD]  # fixed at the second attempt, no hint
        assert rv._utc(log[0]["reviewed_at"]) == T0
        assert {r["item"] for r in store.review_log(pack=DRILLS)} == {
            f"bug/{BUG}", f"quiz/{BON}:verdict", f"quiz/{BON}:reason"}


def simulate(store: ProgressStore, pack, days: int = 60):
    """The learner reviews every due drill item each day for ``days`` days: always right, except the
    bug drill's second review (a lapse)."""
    drill_history(store)
    clock = rv.FixedClock(T0)
    review = rv.Review(store, pack, clock)
    n = 0
    for _ in range(days):
        for due in review.queue():
            if due.item.pack != DRILLS:
                continue
            correct = True
            if due.item.kind == "bug":
                n += 1
                correct = n != 2
            review.answer(due.item, rv.rate(correct, seconds=200.0))
        clock.advance(days=1)
    return review


def test_simulated_learner_reviews_a_bug_drill_over_60_days(tmp_path, course, capsys):
    with ProgressStore(tmp_path / "a.sqlite3") as store:
        review = simulate(store, course)
        rows = rv.schedule_row(review, review.find(f"bug/{BUG}"))
        quiz = rv.schedule_row(review, review.find(f"quiz/{BON}:verdict"))
        with capsys.disabled():
            print("\nsimulated learner (bug drills): item, day, rating, next due (day)")
            for key, sched in ((f"bug/{BUG}", rows), (f"quiz/{BON}:verdict", quiz)):
                for r in sched:
                    print(f"  {key:40s} day {r['day']:2d}  {r['rating']:5s}  next due day {r['next_due_day']}"
                          f"  ({r['source']})")
        assert rows[0]["source"] == "attempt" and rows[0]["rating"] == "good"
        assert [r["rating"] for r in rows[1:4]] == ["good", "again", "good"]
        assert rows[0]["day"] < rows[1]["day"] < rows[2]["day"]
        assert rows[2]["next_due_day"] == rows[2]["day"] + 1 and rows[3]["day"] == rows[2]["day"] + 1  # back next day
        assert rows[4]["day"] - rows[3]["day"] <= rows[2]["day"] - rows[1]["day"]  # the interval restarts smaller
        qdays = [r["day"] for r in quiz]
        gaps = [b - a for a, b in zip(qdays, qdays[1:])]
        assert len(quiz) >= 3 and all(b > a for a, b in zip(gaps, gaps[1:]))


def test_bug_item_is_presented_and_rejects_bad_answers(tmp_path, course):
    with ProgressStore(tmp_path / "a.sqlite3") as store:
        review = rv.Review(store, course, rv.FixedClock(T0))
        item = review.find(f"bug/{BUG}")
        for lang in ("en", "zh"):
            shown = rv.present(review, item, lang)
            assert isinstance(shown, rv.BugPrompt) and shown.source == course.get(BUG).buggy_source
            assert shown.statement == course.get(BUG).texts(lang).statement
            assert "26" not in shown.hint or "-" in shown.hint  # a neighbourhood, not the line
        assert shown.hint != rv.present(review, item, "en").hint
        with pytest.raises(ValueError, match="grader"):
            rv.check(review, item, "x = 1\n")
        with pytest.raises(ValueError, match="answer"):
            rv.check(review, item, 3, grader=object())
        with pytest.raises(ValueError, match="answer"):
            rv.check(review, item, "   ", grader=object())
        assert rv.rate(True, seconds=100) == rv.GOOD  # quick is not easy (issue 22): the learner says so


# -- grading a bug drill's re-test goes through the sandbox --------------------------------------------

@pytest.fixture(scope="module")
def grader(course):
    from alignlings.grading.grader import Grader

    g = Grader(course, warm=True)
    yield g
    g.close()


def test_bug_item_is_graded_in_the_sandbox(tmp_path, course, grader):
    from alignlings.content import bugdrill

    ex = course.get(BUG)
    with ProgressStore(tmp_path / "a.sqlite3") as store:
        review = rv.Review(store, course, rv.FixedClock(T0))
        item = review.find(f"bug/{BUG}")
        unchanged = rv.check(review, item, ex.buggy_source, grader=grader, lang="en")
        assert not unchanged["correct"] and unchanged["failing"]
        assert bugdrill.msg("unchanged", "en") in unchanged["feedback"]
        assert unchanged["expected"].startswith("--- buggy.py") and FIXED_LINE in unchanged["expected"]
        fix = ex.wrong_fixes[0]
        wrong = rv.check(review, item, bugdrill.apply_wrong_fix(ex, fix), grader=grader, lang="zh")
        assert not wrong["correct"] and wrong["wrong_fix"] == fix.id and fix.feedback["zh"] in wrong["feedback"]
        right = rv.check(review, item, ex.buggy_source.replace("labels[labels == pad_token_id]",
                                                               "labels[attention_mask == 0]"), grader=grader)
        assert right["correct"] and right["story"] == ex.texts("en").story and right["failing"] == []


# -- the CLI ------------------------------------------------------------------------------------------

def test_edit_lines():
    from alignlings.cli.review import edit_lines

    lines = ["def f(x):", "    y = x", "    return y"]
    assert edit_lines(lines, "2", "y = x + 1") == ["def f(x):", "    y = x + 1", "    return y"]  # indentation kept
    assert edit_lines(lines, "2", "  y = 0") == ["def f(x):", "  y = 0", "    return y"]  # typed indentation wins
    assert edit_lines(lines, "+1", "x = abs(x)") == ["def f(x):", "x = abs(x)", "    y = x", "    return y"]
    assert edit_lines(lines, "+2", "y += 1")[2] == "    y += 1"
    assert edit_lines(lines, "+0", "import math")[0] == "import math"
    assert edit_lines(lines, "-2", None) == ["def f(x):", "    return y"]
    for bad in ("4", "-0", "x", "+9", ""):
        with pytest.raises(ValueError, match="command"):
            edit_lines(lines, bad, "")


def _cli(args, input_text=""):
    from typer.testing import CliRunner

    from alignlings.cli.app import app

    return CliRunner().invoke(app, args, input=input_text)


@pytest.fixture
def drill_due(monkeypatch):
    """The bug drill fixed at T0 and the bug-or-not questions answered; the clock 60 days on."""
    with ProgressStore() as store:
        drill_history(store)
    monkeypatch.setattr(rv, "CLOCK", rv.FixedClock(T0 + timedelta(days=60)))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_cli_reviews_a_bug_drill_and_a_bug_or_not_question(drill_due, lang):
    pack = load_pack(["dpo-grpo", DRILLS])
    quiz = {q.id: q for q in pack.get(BON).quiz}
    line = 26 if pack.get(BUG).buggy_source.splitlines()[25].strip().startswith("labels[labels") else None
    assert line is not None
    # items are asked in due order (all due the same instant: by key) -> bug/..., quiz/...:reason, quiz/...:verdict
    letters = "ABCDEFGH"
    keys = ("bug", "reason", "verdict")
    # after a right answer Enter keeps its rating (h: hard, e: too easy)
    answers = {"bug": f"?\nx\n{line}\n{FIXED_LINE}\n\n\n",
               "reason": letters[quiz[f"{BON}:reason"].answer] + "\n\n",
               "verdict": letters[1 - quiz[f"{BON}:verdict"].answer] + "\n"}  # the verdict answered wrong
    out = _cli(["review", "--lang", lang, "--pack", "dpo-grpo", "--pack", DRILLS],
               "".join(answers[k] for k in keys))
    assert out.exit_code == 0, out.output
    text = out.output
    if lang == "en":
        assert "3 due today" in text and "bug drill" in text and "Line to edit" in text
        assert "Please give a line number" in text and "Hint: " in text
        assert "Rated hard" in text  # fixed after a hint
        assert "Not quite: expected" in text  # the wrong verdict
        assert "Reviewed 3: 2 right." in text
    else:
        assert "今天有 3 项待复习" in text and "找 bug" in text and "要改哪一行" in text
        assert "请输入行号" in text and "提示：" in text
        assert "评为 困难" in text and "不对：应为" in text
        assert "已复习 3 项，答对 2 项。" in text
    assert text.count(FIXED_LINE) >= 1
    with ProgressStore() as store:
        log = store.review_log(pack=DRILLS, item=f"bug/{BUG}")
        assert [r["rating"] for r in log] == [rv.GOOD, rv.HARD] and FIXED_LINE in log[-1]["answer"]


def test_cli_bug_drill_left_unfixed_shows_the_fix(drill_due):
    out = _cli(["review", "--lang", "en", "--limit", "1", "--pack", "dpo-grpo", "--pack", DRILLS], "\n")
    assert out.exit_code == 0, out.output
    assert "Not fixed yet." in out.output and "The fix:" in out.output and FIXED_LINE in out.output
    assert "Rated again" in out.output


# -- the web routes -----------------------------------------------------------------------------------

@pytest.fixture
def client(tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from alignlings.web.app import create_app

    monkeypatch.setattr(rv, "CLOCK", rv.FixedClock(T0 + timedelta(days=60)))
    store = ProgressStore(tmp_path / "web.sqlite3")
    drill_history(store)
    app = create_app(["dpo-grpo", DRILLS], store=store, warm_up=False)
    with TestClient(app) as c:
        yield c
    store.close()


def test_web_queue_and_answer_a_bug_drill(client):
    data = client.get("/api/review/queue?lang=zh").json()
    bug = next(i for i in data["items"] if i["form"] == "bug")
    assert bug["item"] == f"bug/{BUG}" and bug["pack"] == DRILLS and bug["kind"] == "bug"
    assert bug["source"].splitlines()[25].strip().startswith("labels[labels == pad_token_id]")
    assert bug["statement_html"].startswith("<") and bug["has_hint"] and "hint" not in bug  # served on request
    hint = client.post("/api/review/hint?lang=zh", json={"item": bug["item"], "pack": DRILLS})
    assert hint.status_code == 200 and hint.json()["hints"][0]
    assert any(i["form"] == "quiz" and i["item"].startswith(f"quiz/{BON}:") for i in data["items"])
    fixed = bug["source"].replace("labels[labels == pad_token_id]", "labels[attention_mask == 0]")
    res = client.post("/api/review/answer?lang=en", json={"item": bug["item"], "pack": DRILLS, "answer": fixed,
                                                          "seconds": 300})
    assert res.status_code == 200, res.text
    body = res.json()
    assert body["result"]["correct"] and body["result"]["story_html"] and body["schedule"]["rating"] == "hard"
    too_long = client.post("/api/review/answer", json={"item": bug["item"], "pack": DRILLS,
                                                       "answer": "x" * (rv.MAX_FILE_CHARS + 1)})
    assert too_long.status_code == 422 and "answer" in too_long.text
    page = client.get("/review?lang=zh").text
    assert '"kind_bug": "\\u627e bug"' in page and "Ctrl+Enter" in page  # the page's strings, as JSON


# -- progress --import rebuilds the review schedule itself ------------------------------------------------

def test_cli_import_rebuilds_review_states(tmp_path, monkeypatch, course):
    import json

    with ProgressStore(tmp_path / "a.sqlite3") as a:
        review = simulate(a, course, days=20)
        data = a.export()
    (tmp_path / "export.json").write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "b"))
    out = _cli(["progress", "--import", str(tmp_path / "export.json"), "--pack", "dpo-grpo", "--pack", DRILLS])
    assert out.exit_code == 0, out.output
    counts = json.loads(out.output)
    assert counts["review_log"] == len(data["review_log"]) and counts["review_states"] >= 3
    with ProgressStore(tmp_path / "a.sqlite3") as a:
        a_states = a.review_states(pack=DRILLS)
    assert len(a_states) == 3
    with ProgressStore() as b:  # the states are there before any review runs, equal to the source's
        states = b.review_states(pack=DRILLS)
        assert states.keys() == a_states.keys()
        for key, state in a_states.items():
            assert states[key]["card"] == state["card"] and states[key]["n_logs"] == state["n_logs"], key
        assert rv.Review(b, course, review.clock).sync() == 0  # nothing left for the next review to do
    again = _cli(["progress", "--import", str(tmp_path / "export.json"), "--pack", "dpo-grpo", "--pack", DRILLS])
    assert json.loads(again.output)["review_states"] == 0 and json.loads(again.output)["history_reviews"] == 0


def test_web_import_takes_drill_answers_and_rebuilds_review_states(tmp_path, course, client):
    with ProgressStore(tmp_path / "a.sqlite3") as a:
        simulate(a, course, days=20)
        data = a.export()
        a_states = a.review_states(pack=DRILLS)
    res = client.post("/api/progress/import", json=data)
    assert res.status_code == 200, res.text
    counts = res.json()["imported"]
    assert counts["quiz_answers"] == 2 and counts["review_states"] >= 3  # bug-or-not answers are quiz answers
    assert counts["review_states"] >= len(a_states) >= 3  # every drill state of the export came back


# -- a misconception's re-test alternates between two variants -------------------------------------------

def test_misconception_retest_alternates_blank_and_fix(tmp_path, course, grader):
    t = T0.isoformat()
    hit = {"exercise": "dpo-loss", "passed": False, "cases": [], "blanks": [
        {"index": 4, "passed": False, "misconception": "sum-not-mean", "fill": "-F.logsigmoid(margin).sum()"}]}
    with ProgressStore(tmp_path / "a.sqlite3") as store:
        store.import_({"format": "alignlings-progress", "version": 2, "attempts": [
            {"uuid": _u(), "pack": "dpo-grpo", "exercise": "dpo-loss", "passed": False, "created_at": t, "code": "",
             "verdict": hit, "source": "cli"}]})
        clock = rv.FixedClock(T0 + timedelta(days=1))
        review = rv.Review(store, course, clock)
        item = review.find("misconception/dpo-loss/sum-not-mean")
        first = rv.present(review, item, "en")
        assert first.variant == "blank" and first.prefill == ""
        review.answer(item, rv.GOOD)
        second = rv.present(review, item, "zh")
        fill = next(m.fill for m in course.get("dpo-loss").misconceptions if m.id == "sum-not-mean")
        assert second.variant == "fix" and second.prefill == fill and second.blank == 4
        kept = rv.check(review, item, second.prefill, grader=grader)  # the mistake left in place
        assert not kept["correct"] and kept["repeated"]
        assert rv.check(review, item, "-F.logsigmoid(margin).mean()", grader=grader)["correct"]
        review.answer(item, rv.GOOD)
        assert rv.present(review, item).variant == "blank"
