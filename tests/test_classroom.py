"""A class on one server (``serve --classroom``), in-process: three learners join with the class code
and practise with the engine's real grader, each with their own progress; the teacher sees learners x
exercises and the misconceptions hit, most common first, with CSV exports; learners never see the
teacher's pages nor each other's rows. Also the store's learner partition and its migration."""

from __future__ import annotations

import csv
import html
import io
import re

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from alignlings.content import blanks as bl  # noqa: E402
from alignlings.practice import store as pr  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402
from alignlings.web.app import create_app  # noqa: E402

PACK = load_pack()
EX = PACK.get("dpo-loss")
RIGHT = [b.answer for b in bl.find_blanks(EX.solution_source)]
MISC = EX.misconceptions[0]  # a known wrong fill of one blank
WRONG = [MISC.fill if b.index == MISC.blank else b.answer for b in bl.find_blanks(EX.solution_source)]
TEACHER = "teacher-secret-token"
CODE = "KLMN2345"


def join(app, name, code=CODE):
    c = TestClient(app)
    r = c.post("/api/join", json={"name": name, "code": code})
    assert r.status_code == 200, r.text
    assert "httponly" in r.headers["set-cookie"].lower() and "samesite=strict" in r.headers["set-cookie"].lower()
    return c


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    home = tmp_path_factory.mktemp("class")
    app = create_app(db_path=home / "class.sqlite3", token=TEACHER, classroom=True, class_code=CODE.lower())
    with TestClient(app) as teacher:  # the lifespan starts (and at the end stops) the warm grader
        ann, bo, cy = join(app, "Ann"), join(app, "Bo"), join(app, "Cy")
        assert ann.post("/api/exercises/dpo-loss/check", json={"fills": RIGHT}).json()["passed"] is True
        for who in (bo, cy):
            v = who.post("/api/exercises/dpo-loss/check", json={"fills": WRONG}).json()
            assert v["passed"] is False and any(b.get("misconception") == MISC.id for b in v["blanks"]), v
        assert cy.post("/api/exercises/dpo-loss/hint").json()["index"] == 1
        assert cy.post("/api/exercises/grpo-loss/solution").status_code == 200
        yield app, teacher, {"Ann": ann, "Bo": bo, "Cy": cy}


def test_nobody_gets_in_without_joining(classroom):
    app, _, _ = classroom
    c = TestClient(app)
    r = c.get("/", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/join"
    assert c.get("/api/progress").status_code == 401
    assert c.post("/api/exercises/dpo-loss/check", json={"fills": RIGHT}).status_code == 401
    page = c.get("/join")
    assert page.status_code == 200 and 'id="join-code"' in page.text
    assert c.post("/api/join", json={"name": "Eve", "code": "WRONG123"}).status_code == 403
    assert c.post("/api/join", json={"name": "   ", "code": CODE}).status_code == 422
    assert c.post("/api/join", json={"name": "x" * 61, "code": CODE}).status_code == 422
    c.cookies.set("alignlings_learner", "forged-token")
    assert c.get("/api/progress").status_code == 401


def test_each_learner_sees_only_their_own_progress(classroom):
    _, _, learners = classroom
    rows = {name: {r["key"]: r for r in c.get("/api/progress").json()["exercises"]} for name, c in learners.items()}
    assert rows["Ann"]["dpo-loss"]["solved"] and rows["Ann"]["dpo-loss"]["attempts"] == 1
    assert not rows["Bo"]["dpo-loss"]["solved"] and rows["Bo"]["dpo-loss"]["attempts"] == 1
    assert rows["Cy"]["dpo-loss"]["hints"] == 1 and rows["Cy"]["grpo-loss"]["revealed"]
    assert rows["Ann"]["dpo-loss"]["hints"] == 0 and not rows["Ann"]["grpo-loss"]["revealed"]
    exported = learners["Bo"].get("/api/progress/export").json()
    assert [a["passed"] for a in exported["attempts"]] == [False] and exported["events"] == []
    # the page puts back the learner's own last fills, never another's
    wrong_input = f'id="blank-{MISC.blank}" value="{html.escape(MISC.fill, quote=True)}"'
    assert wrong_input in learners["Bo"].get("/exercises/dpo-loss").text
    assert wrong_input not in learners["Ann"].get("/exercises/dpo-loss").text
    assert learners["Ann"].post("/api/progress/import", json={}).status_code == 403  # a class never imports


def test_learners_never_reach_the_teacher_pages(classroom):
    _, _, learners = classroom
    for path in ("/teacher", "/api/teacher/class", "/teacher/progress.csv", "/teacher/misconceptions.csv"):
        assert learners["Ann"].get(path).status_code == 401
        assert learners["Ann"].get(path, headers={"X-Alignlings-Token": "guess"}).status_code == 403


def test_the_teacher_sees_the_class_and_the_common_misconceptions(classroom):
    app, teacher, _ = classroom
    r = teacher.get(f"/teacher?token={TEACHER}", follow_redirects=False)
    assert r.status_code == 307 and "httponly" in r.headers["set-cookie"].lower()
    page = teacher.get("/teacher")  # the cookie carries the token from now on
    assert page.status_code == 200 and CODE in page.text
    assert [m.group(1) for m in re.finditer(r'<th scope="row">(\w+)</th>', page.text)] == ["Ann", "Bo", "Cy"]
    data = teacher.get("/api/teacher/class").json()
    cell = {(r["name"], r["exercise"]): r for r in data["progress"]}
    assert cell[("Ann", "dpo-loss")]["status"] == "solved" and cell[("Bo", "dpo-loss")]["status"] == "attempted"
    assert cell[("Cy", "dpo-loss")]["hints"] == 1 and cell[("Cy", "grpo-loss")]["solution_seen"]
    assert cell[("Ann", "grpo-loss")]["status"] == "not_started"
    top = data["misconceptions"][0]
    assert (top["misconception"], top["exercise"], top["learners"], top["blank"]) == (MISC.id, "dpo-loss", 2,
                                                                                     MISC.blank)
    assert top["url"] == f"/exercises/dpo-loss#blank-{MISC.blank}" and top["url"] in page.text
    progress = list(csv.DictReader(io.StringIO(teacher.get("/teacher/progress.csv").text)))
    assert len(progress) == 3 * len(list(PACK)) and set(progress[0]) == {
        "name", "learner", "track", "exercise", "pack", "status", "attempts", "hints", "solution_seen", "highest_level"}
    misc = list(csv.DictReader(io.StringIO(teacher.get("/teacher/misconceptions.csv").text)))
    assert misc[0]["misconception"] == MISC.id and misc[0]["learners"] == "2"


def test_cross_site_writes_are_refused(classroom):
    _, _, learners = classroom
    r = learners["Ann"].post("/api/exercises/dpo-loss/hint", headers={"Origin": "http://evil.example"})
    assert r.status_code == 403


def test_the_store_keeps_learners_apart_and_migrates_a_personal_store(tmp_path):
    path = tmp_path / "p.sqlite3"
    db = pr.connect(path)
    pr.migrate(db, target=4)  # a store as the previous release left it
    db.execute("INSERT INTO attempts (uuid, pack, exercise, passed, created_at, code, verdict, source) "
               "VALUES ('00000000-0000-4000-8000-000000000001', 'dpo-grpo', 'dpo-loss', 1, "
               "'2024-01-01T00:00:00.000000+00:00', '', '{}', 'cli')")
    db.execute("INSERT INTO settings (key, value, updated_at) VALUES ('welcomed_at', '\"x\"', '2024-01-01')")
    db.close()
    store = pr.ProgressStore(path)
    assert pr.connect(path).execute("PRAGMA user_version").fetchone()[0] == pr.SCHEMA_VERSION >= 6
    assert store.summary()["dpo-loss"]["solved"] and store.get_setting("welcomed_at") == "x"
    ann_id, ann_token = store.add_learner("  Ann  Lee ")
    ann = store.for_learner(ann_id)
    assert store.learner_by_token(ann_token) == {"id": ann_id, "name": "Ann Lee",
                                                 "created_at": store.learners()[0]["created_at"]}
    assert store.learner_by_token("nope") is None
    assert ann_token not in repr(tuple(pr.connect(path).execute("SELECT * FROM learners").fetchone()))
    assert ann.summary() == {} and ann.get_setting("welcomed_at") is None
    ann.record_attempt("dpo-loss", {"passed": False}, code="x")
    ann.set_setting("welcomed_at", "ann")
    assert store.summary()["dpo-loss"]["attempts"] == 1 and ann.summary()["dpo-loss"]["attempts"] == 1
    assert store.get_setting("welcomed_at") == "x" and ann.get_setting("welcomed_at") == "ann"
    assert len(ann.export()["attempts"]) == 1 and len(store.export()["attempts"]) == 1
    with pytest.raises(ValueError, match="name: expected 1 to 60"):
        store.add_learner("")
    with pytest.raises(ValueError, match="learner: expected"):
        store.for_learner(None)  # type: ignore[arg-type]
    # an export imported into another learner's view lands there, not in the personal store
    bo = store.for_learner("bo")
    assert bo.import_(ann.export())["attempts"] == 0  # same uuids: a row never belongs to two learners
    store.close()


def test_serve_classroom_prints_the_code_and_the_teacher_url(monkeypatch, tmp_path):
    import uvicorn
    from typer.testing import CliRunner

    from alignlings.cli.app import app as cli

    seen = {}

    def fake_run(self, sockets=None):
        seen["app"] = self.config.app
        for s in sockets:
            s.close()

    monkeypatch.setattr(uvicorn.Server, "run", fake_run)
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path))
    out = CliRunner().invoke(cli, ["serve", "--classroom", "--port", "0", "--no-browser", "--token", "tt"])
    assert out.exit_code == 0, out.output
    code = re.search(r"Class code: (\w+)", out.output).group(1)
    assert re.search(r"/teacher\?token=tt", out.output) and "/join" in out.output
    c = TestClient(seen["app"])
    assert c.post("/api/join", json={"name": "Ann", "code": code}).status_code == 200
    assert c.get("/api/exercises").status_code == 200
    assert TestClient(seen["app"]).get("/api/teacher/class?token=tt").status_code == 200
