"""The CLI and the web app agree because they share one session object (issue 20 §1).

One learner's scenario (hints of both kinds, a reset, the cloze drill on an unsolved exercise, a
quiz round, a check, a review) is played through the CLI's runner on one store and through the web
app's test client on another; both stores must then hold the same progress, settings, events, quiz
answers, cloze results and review ratings. Played half through one interface and half through the
other on one store, each continues where the other stopped. And every write path, through both
interfaces, still gives the learner the verdict, the hint, the solution or the explanation when
the progress database is locked by another process (no 500, nothing hidden).

Everything is compared through the progress store itself, never through the session, so these
tests also say what was wrong before it (web blank hints without a hint event, under another key,
blind to resets; a cloze drill from the CLI that did not count as seen; 500s on a locked store).
"""

from __future__ import annotations

import re
import sqlite3
from datetime import datetime, timedelta, timezone

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from alignlings.cli.app import app as cli_app  # noqa: E402
from alignlings.content import blanks as bl  # noqa: E402
from alignlings.practice import store as pr  # noqa: E402
from alignlings.practice import review as rv  # noqa: E402
from alignlings.grading.grader import solution_for  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402
from alignlings.web.app import create_app  # noqa: E402

COURSE = load_pack()
EX = COURSE.get("dpo-loss")
QUIZ = next(ex for ex in COURSE if ex.kind == "quiz")
FILLS = [b.answer for b in bl.find_blanks(EX.solution_source)]
LETTERS = "ABCDEFGH"
SEED = 11
runner = CliRunner()


@pytest.fixture(autouse=True)
def short_busy_timeout(monkeypatch):
    """A locked database answers "locked" after 0.3 s instead of the store's 30 s."""
    from alignlings.practice.store import sqlite as store_sqlite

    monkeypatch.setattr(store_sqlite, "BUSY_TIMEOUT_MS", 300)


def cli(home, *args, input=None):
    result = runner.invoke(cli_app, list(args), input=input, catch_exceptions=False,
                           env={"ALIGNLINGS_HOME": str(home), "ALIGNLINGS_WORKSPACE": str(home / "ws"),
                                "ALIGNLINGS_LANG": "en", "COLUMNS": "200"})
    return result


def web(db):
    return TestClient(create_app(db_path=db), raise_server_exceptions=False)


def ok(r):
    assert r.status_code == 200, r.text
    return r.json()


def quiz_choices() -> list[int]:
    """The scenario's answers: the first question wrong, the others right."""
    return [(q.answer + 1) % len(q.options) if i == 0 else q.answer for i, q in enumerate(QUIZ.quiz)]


def cloze_keys() -> list[str]:
    from alignlings.practice import cloze as cz

    positions = cz.maskable_positions(cz.snippet_source(EX, "en"))
    return [p.key for p in cz.draw(positions, ratio=0.15, seed=SEED, stats={})]


# -- the scenario, through each interface -------------------------------------------------------------
def scenario_cli(home) -> None:
    assert cli(home, "hint", "dpo-loss").exit_code == 0
    for _ in range(2):
        assert cli(home, "hint", "dpo-loss", "--blank", "1").exit_code == 0
    assert cli(home, "reset", "dpo-loss").exit_code == 0
    out = cli(home, "hint", "dpo-loss", "--blank", "1").output
    assert "Blank 1, hint 1/" in out  # the reset started the blank over
    out = cli(home, "cloze", "dpo-loss", "--seed", str(SEED), input="\n" * len(cloze_keys())).output
    assert "counts as seen" in out
    letters = "".join(LETTERS[c] + "\n" for c in quiz_choices())
    assert cli(home, "quiz", QUIZ.key, input=letters).exit_code == 0
    (home / "solved.py").write_text(solution_for(EX, "en"), encoding="utf-8")
    result = cli(home, "check", "dpo-loss", str(home / "solved.py"))
    assert result.exit_code == 0, result.output


def scenario_web(db) -> None:
    with web(db) as c:
        ok(c.post("/api/exercises/dpo-loss/hint", json={}))
        for _ in range(2):
            ok(c.post("/api/exercises/dpo-loss/hint", json={"blank": 1}))
        ok(c.post("/api/exercises/dpo-loss/reset"))
        assert ok(c.post("/api/exercises/dpo-loss/hint", json={"blank": 1}))["index"] == 1
        drawn = ok(c.post("/api/cloze/dpo-loss", json={"action": "draw", "seed": SEED}))
        assert drawn["masked"] == cloze_keys()
        ok(c.post("/api/cloze/dpo-loss", json={"action": "check", "masked": drawn["masked"],
                                               "answers": {k: "" for k in drawn["masked"]}}))
        ok(c.post("/api/quiz-retake", json={"exercise": QUIZ.key}))
        for q, choice in zip(QUIZ.quiz, quiz_choices()):
            ok(c.post(f"/api/quiz/{q.id}", json={"choice": choice}))
        assert ok(c.post("/api/exercises/dpo-loss/check", json={"fills": FILLS}))["passed"]


def state(db) -> dict:
    """What the learner did, as the store holds it, without times, uuids or the interface's name."""
    store = pr.ProgressStore(db)
    data = store.export()
    settings = {}
    for key, s in data["settings"].items():
        value = s["value"]
        if isinstance(value, dict) and "reset_at" in value:
            value = {**value, "reset_at": bool(value["reset_at"])}
        elif key.startswith(("quiz_round/", "web.quiz_round")):
            value = "<a time>"
        elif key.startswith("cloze_draws/"):  # the draws issued: their positions (not when)
            value = [d["keys"] for d in value]
        settings[key] = value
    review = rv.Review(store, COURSE, rv.FixedClock(datetime.now(timezone.utc) + timedelta(days=3)))
    review.sync()
    out = {"progress": {p.id: store.summary(p.id) for p in COURSE.packs},
           "settings": settings,
           "events": [(e["pack"], e["exercise"], e["kind"]) for e in data["events"]],
           "attempts": [(a["pack"], a["exercise"], a["passed"], a["verdict"].get("score")) for a in data["attempts"]],
           "quiz": [(q["question_id"], q["choice"], q["correct"]) for q in data["quiz_answers"]],
           "cloze": sorted((r["snippet"], r["key"], r["correct"]) for r in data["cloze"]),
           "reviews": sorted((r["item"], r["rating"], r["source"]) for r in store.review_log(pack=EX.pack))}
    for rows in out["progress"].values():
        for row in rows.values():
            row.pop("solved_at", None), row.pop("last_attempt_at", None)
    store.close()
    return out


def test_the_same_scenario_through_the_cli_and_the_web_leaves_the_same_state(tmp_path):
    (tmp_path / "cli").mkdir()
    scenario_cli(tmp_path / "cli")
    scenario_web(tmp_path / "web.sqlite3")
    a, b = state(tmp_path / "cli" / pr.DB_NAME), state(tmp_path / "web.sqlite3")
    for part in a:
        assert a[part] == b[part], part
    row = a["progress"][EX.pack][EX.id]
    # after the reset: one blank hint, the drill of the unsolved exercise counted as seen, one solve
    assert row == {"solved": True, "attempts": 1, "hints": 1, "revealed": True}
    assert [k for k in a["settings"] if k.startswith("web.")] == []
    assert a["settings"][f"blank_hints/{EX.pack}/{EX.id}/1"] == {"taken": 1, "reset_at": True}
    assert [kind for _, ex, kind in a["events"] if ex == EX.id] == ["hint", "hint", "hint", "reset", "hint", "reveal"]
    # the solve came after a blank hint and the solution seen: rated Again by both (it was Easy via the web)
    assert ("exercise/dpo-loss", rv.AGAIN, "attempt") in a["reviews"]
    assert a["attempts"][0] == (QUIZ.pack, QUIZ.id, False, len(QUIZ.quiz) - 1)  # one quiz round, one wrong


def first_due(db, clock):
    store = pr.ProgressStore(db)
    from alignlings.practice.session import Practice

    shown = Practice(store, COURSE, clock=clock).review_queue(limit=1).items[0].shown
    store.close()
    return shown


def right_answer(shown: dict) -> tuple[str, object]:
    """The right answer to a review item: as the CLI's input, and as the web's ``answer``."""
    from alignlings.practice import cloze as cz

    ex = COURSE.get(shown.exercise)
    if shown.form == "quiz":
        q = next(q for q in ex.quiz if q.id == shown.item.split("/", 1)[1])
        return LETTERS[q.answer] + "\n", q.answer
    if shown.form == "cloze":
        keys = {m["key"] for m in shown.masked}
        positions = [p for p in cz.maskable_positions(shown.source) if p.key in keys]
        return "".join(p.token + "\n" for p in positions), {p.key: p.token for p in positions}
    fill = bl.find_blanks(ex.solution_source)[shown.blank - 1].answer
    return fill + "\n", fill


def test_a_review_answer_is_rated_the_same_through_both(tmp_path, monkeypatch):
    (tmp_path / "cli").mkdir()
    scenario_cli(tmp_path / "cli")
    scenario_web(tmp_path / "web.sqlite3")
    clock = rv.FixedClock(datetime.now(timezone.utc) + timedelta(days=3))
    monkeypatch.setattr(rv, "CLOCK", clock)
    shown = first_due(tmp_path / "cli" / pr.DB_NAME, clock)
    assert first_due(tmp_path / "web.sqlite3", clock).item == shown.item
    typed, given = right_answer(shown)
    # a right answer is rated good, however fast; the learner then says "too easy" (e / the button)
    out = cli(tmp_path / "cli", "review", "--limit", "1", input=typed + "e\n").output
    assert "Rated easy" in out, out
    with web(tmp_path / "web.sqlite3") as c:
        r = ok(c.post("/api/review/answer", json={"item": shown.item, "pack": shown.pack, "answer": given,
                                                  "seconds": 1.0}))
        assert r["result"]["correct"] and r["schedule"]["rating"] == "good"
        rated = ok(c.post("/api/review/rate", json={"item": shown.item, "pack": shown.pack, "rating": "easy"}))
    assert rated["schedule"]["rating"] == "easy"
    a, b = state(tmp_path / "cli" / pr.DB_NAME)["reviews"], state(tmp_path / "web.sqlite3")["reviews"]
    assert a == b and (shown.item, rv.EASY, "review") in a
    # the same log replayed gives the same due date, fuzz included (seeded per review)
    due = []
    for db in (tmp_path / "cli" / pr.DB_NAME, tmp_path / "web.sqlite3"):
        with pr.ProgressStore(db) as store:
            due.append(rv._utc(store.review_states(pack=shown.pack)[shown.item]["due"]))
    assert due[0] == due[1] and rated["schedule"]["due"] == due[1].isoformat()


def test_one_store_through_both_interfaces_continues_where_the_other_stopped(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    db = home / pr.DB_NAME
    assert "Blank 1, hint 1/3" in cli(home, "hint", "dpo-loss", "--blank", "1").output
    with web(db) as c:
        assert ok(c.post("/api/exercises/dpo-loss/hint", json={"blank": 1}))["index"] == 2
        assert ok(c.post("/api/exercises/dpo-loss/hint", json={}))["index"] == 1  # its own progression
        page = c.get("/exercises/dpo-loss").text
        assert re.search(r'"blank_hints": \{"1": \[[^]]+,[^]]+\]\}', page)  # both blank hints shown again
    assert "Hint 2/" in cli(home, "hint", "dpo-loss").output
    with web(db) as c:
        ok(c.post("/api/exercises/dpo-loss/reset"))
    assert "Blank 1, hint 1/3" in cli(home, "hint", "dpo-loss", "--blank", "1").output  # the web's reset counts
    store = pr.ProgressStore(db)
    assert store.summary()["dpo-loss"]["hints"] == 1


# -- a locked progress database ------------------------------------------------------------------------
class Locked:
    """Another process holding the database's write lock (``BEGIN EXCLUSIVE``) for a while."""

    def __init__(self, db):
        self.db = sqlite3.connect(str(db), isolation_level=None, timeout=5)

    def __enter__(self):
        self.db.execute("BEGIN EXCLUSIVE")
        return self

    def __exit__(self, *exc):
        self.db.execute("ROLLBACK")
        self.db.close()


def test_every_web_write_path_still_answers_on_a_locked_store(tmp_path, caplog):
    db = tmp_path / "p.sqlite3"
    with web(db) as c:
        ok(c.post("/api/exercises/grpo-loss/check", json={"fills": [b.answer for b in bl.find_blanks(
            COURSE.get("grpo-loss").solution_source)]}))  # a solved exercise: a review item met before the lock
        q = QUIZ.quiz[0]
        ok(c.post(f"/api/quiz/{q.id}", json={"choice": q.answer}))
        before = state(db)
        with Locked(db):
            hint = ok(c.post("/api/exercises/dpo-loss/hint", json={}))
            assert hint["index"] == 1 and hint["hint"] and hint["recorded"] is False
            blank = ok(c.post("/api/exercises/dpo-loss/hint", json={"blank": 2}))
            assert blank["index"] == 1 and blank["hint"] and blank["recorded"] is False
            shown = ok(c.post("/api/exercises/dpo-loss/solution"))
            assert [a["answer"] for a in shown["answers"]] == FILLS and shown["recorded"] is False
            answer = ok(c.post(f"/api/quiz/{q.id}", json={"choice": q.answer}))
            assert answer["correct"] and answer["options"][q.answer]["why"] and answer["recorded"] is False
            for last in QUIZ.quiz[1:]:  # the last answer closes a round: its score still comes back
                answer = ok(c.post(f"/api/quiz/{last.id}", json={"choice": last.answer}))
            assert answer["score"] == {"right": len(QUIZ.quiz), "total": len(QUIZ.quiz), "passed": True}
            ok(c.post("/api/quiz-retake", json={"exercise": QUIZ.key}))
            ok(c.post("/api/cloze/dpo-loss/open"))
            drawn = ok(c.post("/api/cloze/dpo-loss", json={"action": "draw", "seed": SEED}))
            cloze = ok(c.post("/api/cloze/dpo-loss", json={"action": "check", "masked": drawn["masked"],
                                                           "answers": {drawn["masked"][0]: "x"}}))
            assert cloze["total"] == len(drawn["masked"]) and cloze["recorded"] is False
            verdict = ok(c.post("/api/exercises/dpo-loss/check", json={"fills": FILLS}))
            assert verdict["passed"] is True
            ok(c.post("/api/exercises/dpo-loss/reset"))
            item = f"quiz/{q.id}"
            reviewed = ok(c.post("/api/review/answer", json={"item": item, "pack": QUIZ.pack, "answer": q.answer}))
            assert reviewed["result"]["correct"] and reviewed["recorded"] is False
            imported = c.post("/api/progress/import", json=pr.ProgressStore(tmp_path / "other.sqlite3").export())
            assert imported.status_code == 503 and "OperationalError" not in imported.text
            for page in ("/", "/exercises/dpo-loss", "/quiz", "/progress", "/review", "/cloze/dpo-loss",
                         "/api/review/queue", "/api/progress"):
                assert c.get(page).status_code == 200, page
        assert state(db) == before  # nothing was written, and nothing was half written
    assert "database is locked" in caplog.text  # ... and each failure was logged


def test_every_cli_write_path_still_answers_on_a_locked_store(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    db = home / pr.DB_NAME
    (home / "solved.py").write_text(solution_for(EX, "en"), encoding="utf-8")
    assert cli(home, "check", "dpo-loss", str(home / "solved.py")).exit_code == 0
    clock = rv.FixedClock(datetime.now(timezone.utc) + timedelta(days=30))
    monkeypatch.setattr(rv, "CLOCK", clock)
    typed, _ = right_answer(first_due(db, clock))  # a review item met before the lock, due by then
    with Locked(db):
        reviewed = cli(home, "review", "--limit", "1", input=typed)
        assert reviewed.exit_code == 0 and "Right." in reviewed.output and "could not be saved" in reviewed.output
        hint = cli(home, "hint", "dpo-loss")
        assert hint.exit_code == 0 and "Hint 1/4" in hint.output and "could not be saved" in hint.output
        blank = cli(home, "hint", "dpo-loss", "--blank", "2")
        assert blank.exit_code == 0 and "Blank 2, hint 1/2" in blank.output
        shown = cli(home, "solution", "dpo-loss")
        assert shown.exit_code == 0 and FILLS[0].split("(")[0].strip() in shown.output
        letters = "".join(LETTERS[q.answer] + "\n" for q in QUIZ.quiz)
        quiz = cli(home, "quiz", QUIZ.key, input=letters)
        assert quiz.exit_code == 0 and f"Score: {len(QUIZ.quiz)}/{len(QUIZ.quiz)}" in quiz.output
        cloze = cli(home, "cloze", "grpo-loss", "--seed", "3", input="\n" * 40)
        assert cloze.exit_code == 0 and "right" in cloze.output
        checked = cli(home, "check", "dpo-loss", str(home / "solved.py"))
        assert checked.exit_code == 0 and "PASSED" in checked.output and "could not be saved" in checked.output
        assert cli(home, "reset", "dpo-loss").exit_code == 0
    assert pr.ProgressStore(db).summary()["dpo-loss"] == {**pr.ProgressStore(db).summary()["dpo-loss"],
                                                           "attempts": 1, "hints": 0, "revealed": False}
