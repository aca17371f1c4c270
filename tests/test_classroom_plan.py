"""The teacher's plan (issue 24 §2, optional items), in-process: a track locked until its
``requires`` are solved (learners see why, in their language; the API refuses checks, hints and
solutions on its exercises) and assignments with a due time whose report (JSON, page, CSV) says
who finished by then. Both live in the database: a restart keeps them. Run on SQLite here and on
PostgreSQL through tests/test_classroom_pg.py (which overrides the ``db`` fixture)."""

from __future__ import annotations

import csv
import io
import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from alignlings import i18n  # noqa: E402
from alignlings.content import blanks as bl  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402
from test_classroom_identity import CODE, GatedGrader, join, make_app, teacher  # noqa: E402

EN, ZH = i18n.lang_table("web.classroom")["en"], i18n.lang_table("web.classroom")["zh"]
PACK = load_pack()
LOCKED = "dpo-grpo/reward-models"  # requires "foundations": token-logprobs, sft-loss, a predict item, kl-estimators
FOUNDATIONS = list(PACK.track("dpo-grpo/foundations").exercises)


@pytest.fixture()
def db(tmp_path):
    """Where the class is kept: a SQLite file here; tests/test_classroom_pg.py overrides it with PostgreSQL."""
    return tmp_path / "c.sqlite3"


def fills(key: str) -> list[str]:
    return [b.answer for b in bl.find_blanks(PACK.get(key).solution_source)]


def check(client, key: str, lang: str = "en"):
    return client.post(f"/api/exercises/{key}/check?lang={lang}", json={"fills": fills(key)})


def solve_by_kind(client, key: str) -> bool:
    """Solve an exercise the way its kind is solved: the reference fills, or right predictions."""
    ex = PACK.get(key)
    if ex.kind == "predict":  # the quiz's rule: every question's latest prediction right
        return all(client.post(f"/api/predict/{key}/{q.id}", json={"choice": q.answer}).json()["correct"]
                   for q in ex.predict)
    return check(client, key).json()["passed"] is True


def test_a_locked_track_opens_for_each_learner_once_its_requires_are_solved(db):
    app = make_app(db, class_code=CODE, grader=GatedGrader())
    ann, _ = join(app, "Ann")
    bo, _ = join(app, "Bo", address="10.0.0.2")
    t = teacher(app)
    assert check(bo, "reward-pooling").status_code == 200  # nothing locked yet

    # only the teacher locks, only a track that requires something, only a track that exists
    assert ann.post("/api/teacher/tracks/lock", json={"track": LOCKED}).status_code in (401, 403)
    r = t.post("/api/teacher/tracks/lock", json={"track": "dpo-grpo/foundations"})
    assert r.status_code == 422 and "requires no other track" in r.json()["detail"]
    r = t.post("/api/teacher/tracks/lock", json={"track": "reward-modelz"})
    assert r.status_code == 422 and r.json()["detail"].startswith("track: expected one of") and LOCKED in r.json()["detail"]
    assert t.post("/api/teacher/tracks/lock", json={"track": "reward-models"}).json() == {"track": LOCKED, "locked": True}

    # learners see it locked, with the plain reason, in their language
    foundations_en = PACK.track("dpo-grpo/foundations").title["en"]
    foundations_zh = PACK.track("dpo-grpo/foundations").title["zh"]
    reason_en = EN["track_locked"].format(tracks=EN["track_name"].format(title=foundations_en))
    reason_zh = ZH["track_locked"].format(tracks=ZH["track_name"].format(title=foundations_zh))
    home = ann.get("/?lang=en").text
    assert f'<div class="track locked" data-track="{LOCKED}">' in home and reason_en in home
    assert reason_zh in ann.get("/?lang=zh").text
    for action in ("hint", "solution"):
        r = ann.post(f"/api/exercises/reward-pooling/{action}?lang=en")  # the zh page above set a cookie
        assert r.status_code == 403 and r.json()["detail"] == reason_en
    r = check(ann, "reward-pooling")
    assert r.status_code == 403 and r.json()["detail"] == reason_en
    r = check(ann, "reward-pooling", lang="zh")
    assert r.status_code == 403 and r.json()["detail"] == reason_zh
    page = ann.get("/exercises/reward-pooling?lang=en")
    assert page.status_code == 200 and reason_en in page.text  # reading stays open, and says why checks do not
    assert 'id="track-locked"' not in ann.get("/exercises/dpo-loss").text
    assert check(ann, "dpo-loss").status_code == 200  # other tracks are not affected

    # Ann solves the required track: it opens for her, not for Bo
    for i, key in enumerate(FOUNDATIONS):
        assert solve_by_kind(ann, key)
        if i < len(FOUNDATIONS) - 1:
            assert check(ann, "reward-pooling").status_code == 403  # every exercise of it, not some
    assert check(ann, "reward-pooling").status_code == 200
    assert 'class="track-locked"' not in ann.get("/").text
    assert check(bo, "reward-eval").status_code == 403 and 'class="track-locked"' in bo.get("/").text

    # the teacher page shows the state; a restart keeps the lock; unlocking opens it for everyone
    page = t.get("/teacher").text
    assert f'data-track="{LOCKED}" data-locked="false">{EN["unlock"]}<' in page
    app.state.ctx.store.close()
    again = make_app(db, grader=GatedGrader())
    bo2 = TestClient(again)
    bo2.cookies.set("alignlings_learner", bo.cookies.get("alignlings_learner"))
    assert check(bo2, "reward-eval").status_code == 403
    assert teacher(again).post("/api/teacher/tracks/lock", json={"track": LOCKED, "locked": False}).status_code == 200
    assert check(bo2, "reward-eval").status_code == 200
    assert again.state.ctx.store.locked_tracks() == set()
    again.state.ctx.store.close()


def at(minutes: float) -> str:
    """A time in the store's own format (what ``utcnow`` writes)."""
    return (datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc) + timedelta(minutes=minutes)).isoformat(
        timespec="microseconds")


def solve(store, learner: str, exercise: str, minutes: float, passed: bool = True) -> None:
    """An attempt at a given time (the store's own methods stamp 'now')."""
    store._write(lambda db: db.execute(
        "INSERT INTO attempts (uuid, learner, pack, exercise, passed, created_at, code, verdict, source) "
        "VALUES (?, ?, 'dpo-grpo', ?, ?, ?, '# x', ?, 'web')",
        (str(uuid.uuid4()), learner, exercise, int(passed), at(minutes), json.dumps({"passed": passed}))))


def test_an_assignment_reports_who_finished_by_the_due_date(db):
    app = make_app(db, class_code=CODE, grader=GatedGrader())
    store = app.state.ctx.store
    ids = {name: join(app, name, address=f"10.0.1.{i}")[1]["learner"] for i, name in enumerate(("Ann", "Bo", "Cy", "Di"))}
    solve(store, ids["Ann"], "dpo-loss", 10, passed=False)
    solve(store, ids["Ann"], "dpo-loss", 12)
    solve(store, ids["Ann"], "grpo-loss", 30)
    solve(store, ids["Ann"], "grpo-loss", 70)  # solving again later does not move her first solve
    solve(store, ids["Bo"], "dpo-loss", 20)
    solve(store, ids["Bo"], "grpo-loss", 90)  # after the due time: finished, late
    solve(store, ids["Cy"], "grpo-loss", 5)  # one of two: not finished
    solve(store, ids["Di"], "dpo-loss", 60)  # exactly at the due time counts as on time
    solve(store, ids["Di"], "grpo-loss", 40)
    t = teacher(app)

    # bad input: each refusal names the argument
    bad = [({"title": "", "exercises": ["dpo-loss"], "due": at(60)}, "title"),
           ({"title": "W1", "exercises": [], "due": at(60)}, "exercises"),
           ({"title": "W1", "exercises": ["dpo-loss", "dpo-los"], "due": at(60)}, "exercises[1]"),
           ({"title": "W1", "exercises": ["dpo-loss", "dpo-loss"], "due": at(60)}, "exercises"),
           ({"title": "W1", "exercises": ["dpo-loss"], "due": "next friday"}, "due")]
    for body, arg in bad:
        r = t.post("/api/teacher/assignments", json=body)
        assert r.status_code == 422 and r.json()["detail"].startswith(arg + ":"), (body, r.text)
    learner = TestClient(app)
    learner.cookies.set("alignlings_learner", "nope")
    assert learner.post("/api/teacher/assignments", json=bad[0][0]).status_code in (401, 403)

    made = t.post("/api/teacher/assignments",
                  json={"title": "Week 1", "exercises": ["dpo-loss", "grpo-loss"], "due": at(60)}).json()
    assert made["due"] == at(60) and made["exercises"] == ["dpo-loss", "grpo-loss"]
    day = t.post("/api/teacher/assignments", json={"title": "Day", "exercises": ["sft-loss"], "due": "2026-03-02"}).json()
    assert day["due"] == "2026-03-02T23:59:59.000000+00:00"  # a date alone: the end of that day

    report = {a["id"]: a for a in t.get("/api/teacher/assignments").json()["assignments"]}[made["id"]]
    rows = {r["name"]: r for r in report["learners"]}
    assert rows["Ann"]["solved"] == [{"exercise": "dpo-loss", "at": at(12)},
                                     {"exercise": "grpo-loss", "at": at(30)}]
    assert rows["Ann"]["finished_at"] == at(30) and rows["Ann"]["on_time"] is True
    assert rows["Bo"]["finished_at"] == at(90) and rows["Bo"]["on_time"] is False
    assert rows["Cy"]["finished_at"] is None and rows["Cy"]["missing"] == ["dpo-loss"] and not rows["Cy"]["on_time"]
    assert rows["Di"]["on_time"] is True
    assert report["finished_on_time"] == 2

    page = t.get(f"/teacher/assignments/{made['id']}?lang=en").text
    assert EN["finished_by_due"].format(n=2, total=4) in page
    assert '<tr data-learner="%s" class="late">' % ids["Bo"] in page and EN["on_time_late"] in page
    assert '<tr data-learner="%s" class="not-yet">' % ids["Cy"] in page
    zh = t.get(f"/teacher/assignments/{made['id']}?lang=zh").text
    assert ZH["finished_by_due"].format(n=2, total=4) in zh and ZH["on_time_late"] in zh
    assert EN["finished_by_due"].format(n=2, total=4) in t.get("/teacher?lang=en").text

    table = list(csv.DictReader(io.StringIO(t.get(f"/teacher/assignments/{made['id']}/report.csv").text)))
    assert [(r["name"], r["solved"], r["total"], r["on_time"], r["missing"]) for r in table] == [
        ("Ann", "2", "2", "yes", ""), ("Bo", "2", "2", "no", ""), ("Cy", "1", "2", "no", "dpo-loss"),
        ("Di", "2", "2", "yes", "")]
    assert table[1]["finished_at"] == at(90)

    # kept in the database: a restart keeps it; deleting it keeps the learners' work
    store.close()
    again = make_app(db, grader=GatedGrader())
    t2 = teacher(again)
    assert [a["title"] for a in t2.get("/api/teacher/assignments").json()["assignments"]] == ["Week 1", "Day"]
    assert t2.post(f"/api/teacher/assignments/{made['id']}/remove").json() == {"removed": made["id"]}
    assert t2.get(f"/teacher/assignments/{made['id']}").status_code == 404
    assert t2.post(f"/api/teacher/assignments/{made['id']}/remove").status_code == 404
    assert [a["title"] for a in t2.get("/api/teacher/assignments").json()["assignments"]] == ["Day"]
    assert again.state.ctx.store.for_learner(ids["Ann"]).summary()["dpo-loss"]["solved"] is True
    again.state.ctx.store.close()


def test_a_locked_track_refuses_quiz_answers_too(db, tmp_path):
    """A teacher's pack: track 'quizzes' (a quiz) requires track 'warmup' (dpo-loss)."""
    import shutil

    teach = tmp_path / "teach"
    teach.mkdir()
    for name in ("dpo-loss", "concepts"):
        shutil.copytree(PACK.get(name).path, teach / name)
    (teach / "pack.toml").write_text(
        '[pack]\nid = "teach"\ntitle = { en = "Teacher", zh = "老师" }\norder = ["dpo-loss", "concepts"]\n'
        '[[track]]\nid = "warmup"\ntitle = { en = "Warm-up", zh = "热身" }\nexercises = ["dpo-loss"]\n'
        '[[track]]\nid = "quizzes"\ntitle = { en = "Quizzes", zh = "测验" }\nrequires = ["warmup"]\n'
        'exercises = ["concepts"]\n', encoding="utf-8")
    app = make_app(db, class_code=CODE, grader=GatedGrader(), pack_path=["dpo-grpo", str(teach)])
    ann, _ = join(app, "Ann")
    question = load_pack(teach).get("concepts").quiz[0]
    assert teacher(app).post("/api/teacher/tracks/lock", json={"track": "teach/quizzes"}).status_code == 200
    r = ann.post(f"/api/quiz/teach/{question.id}?lang=en", json={"choice": question.answer})
    assert r.status_code == 403 and "“Warm-up”" in r.json()["detail"]
    # the built-in copy of the same question is in another, open track
    assert ann.post(f"/api/quiz/dpo-grpo/{question.id}?lang=en", json={"choice": question.answer}).status_code == 200
    assert ann.post("/api/exercises/teach/dpo-loss/check", json={"fills": fills("dpo-loss")}).json()["passed"]
    r = ann.post(f"/api/quiz/teach/{question.id}?lang=en", json={"choice": question.answer})
    assert r.status_code == 200 and r.json()["correct"] is True
    app.state.ctx.store.close()


def test_a_locked_track_refuses_the_cloze_drill_and_says_why_with_an_icon(db):
    """The cloze drill shows the solution, so a locked track refuses it like a check or a hint (the
    session's rule, so the CLI too); the lock note carries an inline SVG padlock, not an emoji."""
    app = make_app(db, class_code=CODE)
    ann, _ = join(app, "Ann")
    assert teacher(app).post("/api/teacher/tracks/lock", json={"track": LOCKED}).status_code == 200
    reason = EN["track_locked"].format(tracks=EN["track_name"].format(title=PACK.track("dpo-grpo/foundations").title["en"]))
    for action in ({"action": "draw"}, {"action": "check", "masked": ["1:0"], "answers": {"1:0": "x"}}):
        r = ann.post("/api/cloze/reward-pooling?lang=en", json=action)
        assert r.status_code == 403 and r.json()["detail"] == reason, r.text  # the sentence alone
    r = ann.post("/api/cloze/reward-pooling/open?lang=en")
    assert r.status_code == 403 and r.json()["detail"] == reason
    page = ann.get("/cloze/reward-pooling?lang=en")
    assert page.status_code == 200 and reason in page.text and 'id="cloze-code"' not in page.text
    assert app.state.ctx.store.for_learner(join_id(app, "Ann")).summary().get("reward-pooling", {}).get("revealed") \
        in (None, False)  # refused before anything was recorded as seen
    assert ann.post("/api/cloze/dpo-loss?lang=en", json={"action": "draw"}).status_code == 200  # another track

    for path in ("/?lang=en", "/exercises/reward-pooling?lang=en", "/cloze/reward-pooling?lang=en"):
        html = ann.get(path).text
        note = html[html.index('class="track-locked"'):]
        note = note[:note.index("</p>")]
        assert '<svg class="icon icon-lock"' in note and "🔒" not in html and reason in note, (path, note)

    for key in FOUNDATIONS:  # the required track solved: the drill opens
        assert solve_by_kind(ann, key)
    assert ann.post("/api/cloze/reward-pooling?lang=en", json={"action": "draw"}).status_code == 200
    app.state.ctx.store.close()


def join_id(app, name: str) -> str:
    return next(x["id"] for x in app.state.ctx.store.learners() if x["name"] == name)


def test_the_cli_cloze_is_refused_on_a_locked_track_through_the_session(db, monkeypatch, tmp_path):
    """The rule lives in the session: the CLI's drill, on a learner's store with the track locked,
    is refused with the same sentence (no mask drawn, no solution shown)."""
    from typer.testing import CliRunner

    from alignlings.cli import common
    from alignlings.cli.app import app as cli_app
    from alignlings.practice.store import ProgressStore
    from alignlings.practice.session import Locked, Practice

    store = ProgressStore(db)
    learner, _ = store.add_learner("Cy")
    store.lock_track(LOCKED, True)
    mine = store.for_learner(learner)
    practice = Practice(mine, PACK)
    reason = practice.lock_reason(PACK.get("reward-pooling"))
    assert reason == EN["track_locked"].format(tracks=EN["track_name"].format(
        title=PACK.track("dpo-grpo/foundations").title["en"]))
    with pytest.raises(Locked, match="Locked by your teacher"):
        practice.cloze_draw(PACK.get("reward-pooling"))
    assert practice.lock_reason(PACK.get("dpo-loss")) is None
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ALIGNLINGS_LANG", "en")
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.setattr(common, "store", lambda: mine)
    out = CliRunner().invoke(cli_app, ["cloze", "reward-pooling"])
    assert out.exit_code == 2 and reason in out.output and "[1]" not in out.output, out.output
    store.close()


def test_a_403_shows_its_sentence_alone_on_every_page():
    """common.js's errorText (the exercise, bug, cloze and quiz pages): a 403's detail is the reason
    written for the learner, shown without "Error 403:"; other errors keep their status."""
    import shutil
    import subprocess
    from pathlib import Path

    import playwright

    node = shutil.which("node") or str(Path(playwright.__file__).parent / "driver" / "node")
    js = Path(__file__).parent.parent / "src" / "alignlings" / "web" / "static" / "common.js"
    page = json.dumps({"t": {"error": "Error", "colon": ": ", "busy": "busy"}})  # the page's client data
    script = (f"const document = {{getElementById: () => ({{textContent: {json.dumps(page)}}})}};\n"
              f"{js.read_text(encoding='utf-8')}\n"
              "console.log(JSON.stringify([errorText({status: 403, data: {detail: 'Locked by your teacher.'}}), "
              "errorText({status: 422, data: {detail: 'fills: bad'}})]));")
    out = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == ["Locked by your teacher.", "Error 422: fills: bad"]
