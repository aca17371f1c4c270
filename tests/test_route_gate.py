"""Issue 29 §3: every route that can show reference material answers from what the server gave this
learner, never from what the request claims.

One test per route or command that can return reference text, values, tokens, diffs, explanations or
keyed options: a learner who was not given it (no draw issued, not solved, solution not seen, item not
met, question not committed) gets nothing of it, and what they were given is recorded. The decision is
``Practice``'s (practice/session.py); the app runs with a stand-in grader (nothing here needs the
sandbox: a refused request never reaches it).
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from alignlings.content import blanks as bl  # noqa: E402
from alignlings.practice import cloze as cz  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402
from alignlings.practice.store import ProgressStore  # noqa: E402
from alignlings.practice.session import Practice, UsageError  # noqa: E402
from alignlings.web.app import create_app  # noqa: E402
from alignlings.web.kinds import view_of  # noqa: E402

PACK = load_pack()
DPO = PACK.get("dpo-loss")
SNIPPET = cz.snippet_source(DPO)
POSITIONS = cz.maskable_positions(SNIPPET)
# fills long enough that finding one in a response is not a coincidence
SECRET_FILLS = [b.answer for b in bl.find_blanks(DPO.solution_source) if len(b.answer) >= 12]


class StandIn:
    """A grader that must not be reached by a refused request (it counts the calls it gets)."""

    def __init__(self, pack):
        self.pack, self.calls = pack, 0

    def check(self, exercise_id, code=None, *, fills=None, lang="en", run_main=True, quick=False):
        self.calls += 1
        return {"exercise": exercise_id, "passed": False, "blanks": [], "cases": [], "error": None,
                "isolation": "fake", "stdout": "", "seconds": 0.0}

    def submission(self, exercise, code=None, fills=None):
        return SimpleNamespace(code="# fake")

    def behaves_like_reference(self, exercise_id, variants):
        self.calls += 1
        return {}

    def close(self):
        pass


@pytest.fixture
def app(tmp_path):
    grader = StandIn(PACK)
    app = create_app(db_path=tmp_path / "progress.sqlite3", grader=grader, warm_up=False, warm_references=False)
    with TestClient(app) as c:
        yield c, grader


def progress_of(client, key="dpo-loss") -> dict:
    return next(r for r in client.get("/api/progress").json()["exercises"] if r["key"] == key)


def leaks(text: str) -> list[str]:
    return [f for f in SECRET_FILLS if f in text]


# -- the cloze drill -----------------------------------------------------------------------------------

def test_cloze_check_without_a_draw_returns_no_token(app):
    """The attack: every ``line:col`` key of the snippet posted as a check, no draw asked for."""
    c, grader = app
    body = {"action": "check", "masked": [p.key for p in POSITIONS], "answers": {p.key: "" for p in POSITIONS}}
    r = c.post("/api/cloze/dpo-loss", json=body)
    assert r.status_code == 422, r.text[:300]
    assert "results" not in r.json() and grader.calls == 0
    assert not progress_of(c)["revealed"]


def test_cloze_422_tells_nothing_about_which_keys_are_positions(app):
    """A real position, a made-up one and a real one with a made-up neighbour get the same message."""
    c, _ = app
    real, fake = POSITIONS[0].key, "999:0"
    answers = [c.post("/api/cloze/dpo-loss", json={"action": "check", "masked": keys, "answers": {}})
               for keys in ([real], [fake], [real, fake], [POSITIONS[3].key])]
    assert {r.status_code for r in answers} == {422}
    assert len({r.text for r in answers}) == 1, [r.text for r in answers]
    assert real not in answers[0].text and POSITIONS[0].token not in json.loads(answers[0].text)["detail"]


def test_cloze_check_grades_only_the_positions_of_the_draw_issued(app):
    c, _ = app
    drawn = c.post("/api/cloze/dpo-loss", json={"action": "draw", "ratio": 0.2, "seed": 3}).json()
    assert progress_of(c)["revealed"]  # the draw showed the rest of an unsolved exercise: recorded
    extra = next(p.key for p in POSITIONS if p.key not in drawn["masked"])
    for masked in ([*drawn["masked"], extra], drawn["masked"][:-1]):  # more, or fewer, than were drawn
        r = c.post("/api/cloze/dpo-loss", json={"action": "check", "masked": masked, "answers": {}})
        assert r.status_code == 422 and "results" not in r.json()
    ok = c.post("/api/cloze/dpo-loss", json={"action": "check", "masked": drawn["masked"], "answers": {}})
    assert ok.status_code == 200 and [x["key"] for x in ok.json()["results"]] == sorted(
        drawn["masked"], key=lambda k: tuple(map(int, k.split(":"))))


def test_cloze_draws_kept_server_side_and_never_imported(app):
    """A draw lives in the store; an import that brings a "draw" of every position is not one."""
    c, _ = app
    forged = {"format": "alignlings-progress", "version": 3, "settings": {
        "cloze_draws/dpo-loss/dpo-loss": {"value": [{"keys": [p.key for p in POSITIONS]}],
                                         "updated_at": "2026-01-01T00:00:00+00:00"}}}
    for key in (f"cloze_draws/{DPO.pack}/{DPO.id}", "cloze_draws/dpo-loss/dpo-loss"):
        forged["settings"][key] = forged["settings"]["cloze_draws/dpo-loss/dpo-loss"]
    c.post("/api/progress/import", json=forged)
    r = c.post("/api/cloze/dpo-loss", json={"action": "check", "masked": [p.key for p in POSITIONS], "answers": {}})
    assert r.status_code == 422 and not progress_of(c)["revealed"]


def test_practice_is_the_gate_for_the_cloze_drill(tmp_path):
    """The rule is Practice's, whatever the interface: the CLI's draw-then-check works, a check of
    positions never drawn raises, and draws of another learner do not count."""
    store = ProgressStore(tmp_path / "p.sqlite3")
    grader = StandIn(PACK)
    with Practice(store.for_learner("ann"), PACK, grader) as ann, Practice(store.for_learner("bo"), PACK, grader) as bo:
        with pytest.raises(UsageError) as refused:
            ann.cloze_check(DPO, [p.key for p in POSITIONS], {})
        assert refused.value.argument == "masked"
        drawn = ann.cloze_draw(DPO, ratio=0.2, seed=1)
        keys = [p.key for p in drawn.masked]
        assert ann.cloze_check(DPO, keys, {}).total == len(keys)
        with pytest.raises(UsageError):
            bo.cloze_check(DPO, keys, {})
    assert grader.calls == 0


# -- the solution, hints and the exercise ------------------------------------------------------------

def test_exercise_detail_and_page_show_no_reference_fill(app):
    c, _ = app
    assert SECRET_FILLS, "the test needs a reference fill long enough to search for"
    assert leaks(c.get("/api/exercises/dpo-loss").text) == []
    assert leaks(c.get("/exercises/dpo-loss").text) == []
    assert not progress_of(c)["revealed"]


def test_solution_route_records_the_reveal_before_answering(app):
    c, _ = app
    r = c.post("/api/exercises/dpo-loss/solution")
    assert r.status_code == 200 and leaks(r.text) == SECRET_FILLS
    assert progress_of(c)["revealed"] is True


def test_hint_route_gives_only_the_next_hint_and_records_it(app):
    c, _ = app
    hints = DPO.texts("en").hints
    assert len(hints) >= 2
    first = c.post("/api/exercises/dpo-loss/hint")
    assert first.status_code == 200 and first.json()["index"] == 1
    assert all(h not in first.text for h in hints[1:])
    assert c.post("/api/exercises/dpo-loss/hint", json={"index": len(hints)}).status_code == 422  # no skipping
    assert progress_of(c)["hints"] == 1


# -- bug drills, predict, quiz -------------------------------------------------------------------------

def test_bug_diff_is_against_the_buggy_file_and_the_story_waits_for_a_pass(app):
    c, _ = app
    bug = next(ex for ex in PACK if view_of(ex).page == "bug")
    fixed_only = [ln.strip() for ln in set(bug.solution_source.splitlines()) - set(bug.buggy_source.splitlines())
                  if len(ln.strip()) >= 8]
    assert fixed_only
    r = c.post(f"/api/bug/{bug.key}/diff", json={"code": bug.buggy_source})
    assert r.status_code == 200 and not [ln for ln in fixed_only if ln in r.text]
    assert c.get(f"/api/bug/{bug.key}/story").status_code == 403


def test_predict_questions_carry_no_answer_until_committed(app):
    c, _ = app
    ex = next(ex for ex in PACK if ex.kind_spec.name == "predict")
    shown = c.get(f"/api/predict/{ex.key}").text + c.get(f"/exercises/{ex.key}").text
    secrets = [o.why["en"] for q in ex.predict for o in q.options if len(o.why.get("en", "")) >= 20]
    secrets += [ex.texts("en").explanation] if len(ex.texts("en").explanation) >= 20 else []
    assert secrets and not [s for s in secrets if s in shown]


def test_quiz_questions_carry_no_key(app):
    c, _ = app
    ex = next(ex for ex in PACK if ex.kind == "quiz")
    r = c.get(f"/api/exercises/{ex.key}")
    assert r.status_code == 200
    listed = c.get("/api/quiz")
    assert listed.status_code == 200
    whys = [o.why["en"] for q in ex.quiz for o in q.options if len(o.why.get("en", "")) >= 20]
    assert whys and not [w for w in whys if w in listed.text or w in r.text]
    for q in r.json()["questions"]:
        assert set(q) == {"id", "exercise", "pack", "question", "question_html", "options"}
        assert all(set(o) == {"text", "html"} for o in q["options"])


# -- review, references, notebooks ---------------------------------------------------------------------

def test_review_answers_only_items_met(app):
    c, _ = app
    r = c.post("/api/review/answer", json={"pack": DPO.pack, "item": "exercise/dpo-loss", "answer": "x"})
    assert r.status_code == 404 and leaks(r.text) == []
    r = c.post("/api/review/answer", json={"pack": DPO.pack, "item": "cloze/dpo-loss/10",
                                           "answer": {p.key: "" for p in POSITIONS[:5]}})
    assert r.status_code == 404 and "expected" not in r.text
    assert leaks(c.get("/api/review/queue").text) == []


def test_references_route_reports_progress_only(app):
    c, _ = app
    r = c.get("/api/references", params={"exercise": "dpo-loss"})
    assert r.status_code == 200
    assert set(r.json()) <= {"enabled", "total", "done", "computing", "seconds", "exercise", "state", "ready",
                             "message"}
    assert leaks(r.text) == []


def test_notebook_holds_the_template_not_the_solution():
    from alignlings.practice.notebook import exercise_notebook

    text = json.dumps(exercise_notebook(DPO, "en"))
    assert leaks(text) == []
