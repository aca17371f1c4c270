"""The web app on a course: the built-in pack plus a teacher's pack that reuses an exercise id
(``dpo-loss``) and a quiz (``concepts``). Every route takes the ``PACK/ID`` key, and every row it
writes lands under the exercise's own pack, so the two ``dpo-loss`` never mix (in-process, with the
engine's real grader for the checks)."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from alignlings.content import blanks as bl  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402
from alignlings.practice.store import ProgressStore  # noqa: E402
from alignlings.web.app import create_app  # noqa: E402

BUILTIN = load_pack()
FILLS = [b.answer for b in bl.find_blanks(BUILTIN.get("dpo-loss").solution_source)]


def teacher_pack(root):
    """Pack 'teach': copies of the built-in dpo-loss and concepts under the same ids."""
    root.mkdir(parents=True)
    for name in ("dpo-loss", "concepts"):
        shutil.copytree(BUILTIN.get(name).path, root / name)
    (root / "pack.toml").write_text('[pack]\nid = "teach"\ntitle = { en = "Teacher", zh = "老师" }\n'
                                    'order = ["dpo-loss", "concepts"]\n', encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    teach = teacher_pack(root / "teach")
    store = ProgressStore(root / "progress.sqlite3")
    app = create_app(["dpo-grpo", str(teach)], store=store)
    with TestClient(app) as c:
        yield c, store


def test_keys_name_the_pack_where_ids_are_shared(course):
    c, _ = course
    rows = {r["key"]: r for r in c.get("/api/exercises").json()}
    assert rows["teach/dpo-loss"]["pack"] == "teach" and rows["dpo-grpo/dpo-loss"]["pack"] == "dpo-grpo"
    assert rows["teach/dpo-loss"]["url"] == "/exercises/teach/dpo-loss"
    assert "dpo-loss" not in rows and rows["grpo-loss"]["url"] == "/exercises/grpo-loss"
    assert c.get("/api/exercises/teach/dpo-loss").json()["key"] == "teach/dpo-loss"
    assert c.get("/api/exercises/dpo-loss").status_code == 404  # ambiguous: in two packs
    page = c.get("/exercises/teach/dpo-loss")
    assert page.status_code == 200 and '"exercise": "teach/dpo-loss"' in page.text


def test_check_hint_and_reveal_are_recorded_under_the_exercises_own_pack(course):
    c, store = course
    r = c.post("/api/exercises/teach/dpo-loss/check", json={"fills": FILLS})
    assert r.status_code == 200 and r.json()["passed"] is True, r.text
    assert store.summary("teach")["dpo-loss"]["solved"] is True
    assert "dpo-loss" not in store.summary("dpo-grpo")
    hint = c.post("/api/exercises/teach/dpo-loss/hint").json()
    assert hint["index"] == 1
    total = hint["total"]
    for _ in range(total + 2):  # asking past the last hint re-shows it: the count never exceeds the total
        last = c.post("/api/exercises/teach/dpo-loss/hint").json()
    assert last["index"] == total and store.hints_taken("dpo-loss", pack="teach") == total
    assert store.hints_taken("dpo-loss", pack="dpo-grpo") == 0
    assert c.post("/api/exercises/dpo-grpo/dpo-loss/solution").status_code == 200
    assert store.summary("dpo-grpo")["dpo-loss"]["revealed"] is True
    assert not store.summary("teach")["dpo-loss"]["revealed"]
    progress = c.get("/api/progress").json()
    by_key = {r["key"]: r for r in progress["exercises"]}
    assert by_key["teach/dpo-loss"]["solved"] and not by_key["dpo-grpo/dpo-loss"]["solved"]
    assert by_key["dpo-grpo/dpo-loss"]["revealed"] and progress["summaries"]["teach"]["dpo-loss"]["attempts"] == 1


def test_quiz_answers_land_in_the_questions_pack(course):
    c, store = course
    q = BUILTIN.get("concepts").quiz[0]
    r = c.post(f"/api/quiz/teach/{q.id}", json={"choice": q.answer})
    assert r.status_code == 200 and r.json()["correct"] is True
    assert store.quiz_answers(pack="teach")[q.id]["correct"] is True
    assert q.id not in store.quiz_answers(pack="dpo-grpo")
    assert c.post("/api/quiz-retake", json={"exercise": "teach/concepts"}).json()["exercise"] == "teach/concepts"
    assert c.get("/exercises/teach/concepts").status_code == 200


def test_cloze_is_keyed_by_pack(course):
    c, store = course
    draw = c.post("/api/cloze/teach/dpo-loss", json={"action": "draw", "ratio": 0.2, "seed": 3}).json()
    assert draw["snippet"] == "teach/dpo-loss"
    answers = {k: "x" for k in draw["masked"]}
    r = c.post("/api/cloze/teach/dpo-loss", json={"action": "check", "masked": draw["masked"], "answers": answers})
    assert r.status_code == 200, r.text
    assert set(store.cloze_stats("dpo-loss", pack="teach")) == set(draw["masked"])
    assert store.cloze_stats("dpo-loss", pack="dpo-grpo") == {}
    assert c.get("/cloze/teach/dpo-loss").status_code == 200
    assert c.get("/progress").status_code == 200


def test_serve_takes_several_packs_and_falls_back_to_the_environment(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    import alignlings.web.app as web_app
    from alignlings.cli.app import app as cli

    teach = teacher_pack(tmp_path / "teach")
    seen = []

    class Stop(Exception):
        pass

    def fake_create_app(packs, **kw):
        seen.append(packs)
        raise Stop

    monkeypatch.setattr(web_app, "create_app", fake_create_app)
    CliRunner().invoke(cli, ["serve", "--no-browser", "--pack", "dpo-grpo", "--pack", str(teach)])
    monkeypatch.setenv("ALIGNLINGS_PACK", f"dpo-grpo:{teach}")
    CliRunner().invoke(cli, ["serve", "--no-browser"])
    assert seen == [["dpo-grpo", str(teach)], ["dpo-grpo", str(teach)]]
