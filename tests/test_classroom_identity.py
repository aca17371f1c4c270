"""Learners who come back, and one person who cannot stop the class (issues 24 §1 and 19 §3), in-process.

- The class (its code, its learners) lives in the database: a restart without a code keeps it.
- A learner gets a recovery code at join and on their progress page; with it, another browser signs
  in as the same learner. The teacher renames, merges and removes learners (history kept, or
  returned as an export before it is deleted).
- Join keeps the language and the page asked for; its refusals are plain words in that language.
- Learners in a class see neither Import nor the server's file paths.
- Joins are limited per address; checks per address as well as per learner; toy runs per learner.
"""

from __future__ import annotations

import re
import threading
import time
from types import SimpleNamespace

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from alignlings import i18n  # noqa: E402
from alignlings.content import blanks as bl  # noqa: E402
from alignlings.practice import store as pr  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402
from alignlings.web.app import create_app  # noqa: E402

EN, ZH = i18n.lang_table("web.classroom")["en"], i18n.lang_table("web.classroom")["zh"]
TEACHER, CODE = "teacher-token-xyz", "WXYZ2345"
FILLS = [b.answer for b in bl.find_blanks(load_pack().get("dpo-loss").solution_source)]


class GatedGrader:
    """Passes every check, after ``gate`` opens (a sleeping check holds its slot until then)."""

    def __init__(self, gate: threading.Event | None = None):
        self.gate, self.calls = gate, 0

    def check(self, exercise_id, code=None, *, fills=None, lang="en", run_main=True, quick=False):
        self.calls += 1
        if self.gate is not None:
            assert self.gate.wait(20), "the test never opened the gate"
        return {"exercise": exercise_id, "passed": True, "blanks": [], "cases": [], "error": None,
                "isolation": "fake", "stdout": "", "seconds": 0.0}

    def submission(self, exercise, code=None, fills=None):
        return SimpleNamespace(code="# fake")

    def close(self):
        pass


@pytest.fixture()
def db(tmp_path):
    """Where the class is kept: a SQLite file here; tests/test_classroom_pg.py overrides it with PostgreSQL."""
    return tmp_path / "c.sqlite3"


def make_app(path, **kw):
    kw.setdefault("grader", GatedGrader())
    return create_app(db_path=path, token=TEACHER, classroom=True, warm_up=False, **kw)


def join(app, name, code=CODE, address="10.0.0.1", **extra):
    c = TestClient(app, client=(address, 40000))
    r = c.post("/api/join", json={"name": name, "code": code, **extra})
    assert r.status_code == 200, r.text
    return c, r.json()


def teacher(app):
    return TestClient(app, headers={"Authorization": f"Bearer {TEACHER}"})


# -- the class survives a restart ----------------------------------------------------------------
def test_a_restart_without_a_code_keeps_the_class_and_its_learners(db):
    first = make_app(db)  # no --class-code: a new random one, kept in the database
    code = first.state.class_code
    ann, answer = join(first, "Ann", code)
    ann.post("/api/exercises/dpo-loss/hint")
    cookie = ann.cookies.get("alignlings_learner")
    first.state.ctx.store.close()

    again = make_app(db)  # the restart: no code given
    assert again.state.class_code == code
    bo, _ = join(again, "Bo", code)  # the old code still works
    c = TestClient(again)
    c.cookies.set("alignlings_learner", cookie)  # Ann's browser is still signed in
    rows = {r["key"]: r for r in c.get("/api/progress").json()["exercises"]}
    assert rows["dpo-loss"]["hints"] == 1
    names = [lr["name"] for lr in teacher(again).get("/api/teacher/class").json()["learners"]]
    assert names == ["Ann", "Bo"]
    again.state.ctx.store.close()

    chosen = make_app(db, class_code="newcode9")  # a code given replaces the kept one
    assert chosen.state.class_code == "NEWCODE9"
    assert TestClient(chosen).post("/api/join", json={"name": "Cy", "code": code}).status_code == 403
    join(chosen, "Cy", "NEWCODE9")
    chosen.state.ctx.store.close()


# -- a way back ------------------------------------------------------------------------------------
def test_a_learner_comes_back_on_another_browser_with_the_recovery_code(db, tmp_path):
    app = make_app(db, class_code=CODE)
    ann, answer = join(app, "Ann")
    code = answer["recovery_code"]
    assert re.fullmatch(r"[A-Z2-9]{4}-[A-Z2-9]{4}-[A-Z2-9]{4}", code)
    assert ann.post("/api/exercises/dpo-loss/hint").status_code == 200
    page = ann.get("/progress").text
    assert f'id="my-recovery-code" class="recovery-code">{code}<' in page
    # no Import (it could only answer 403) and no server path in a class
    assert 'id="import-btn"' not in page and "progress.sqlite3" not in page and str(tmp_path) not in page
    assert "c.sqlite3" not in page

    phone = TestClient(app, client=("10.0.0.2", 1))
    assert phone.post("/api/join", json={"recovery": "AAAA-BBBB-CCCC"}).status_code == 403
    r = phone.post("/api/join", json={"recovery": code.lower().replace("-", " ")})
    assert r.status_code == 200 and r.json()["name"] == "Ann" and "recovery_code" not in r.json()
    rows = {x["key"]: x for x in phone.get("/api/progress").json()["exercises"]}
    assert rows["dpo-loss"]["hints"] == 1  # the same learner, not a second empty one
    assert f">{code}<" in phone.get("/progress").text  # this browser holds the code now too
    assert [lr["name"] for lr in app.state.ctx.store.learners()] == ["Ann"]
    # the store keeps hashes only: neither the code nor a token can be read from the database
    raw = pr.connect(db)
    dump = "\n".join(str([r[i] for i in range(len(r))]) for t in ("learners", "learner_tokens")
                     for r in raw.execute(f"SELECT * FROM {t}").fetchall())
    assert code not in dump and code.replace("-", "") not in dump
    assert ann.cookies.get("alignlings_learner") not in dump

    # the teacher issues a new code: the old one stops working, both browsers stay signed in
    new = teacher(app).post(f"/api/teacher/learners/{answer['learner']}/recovery").json()["recovery_code"]
    assert new != code
    assert TestClient(app, client=("10.0.0.3", 1)).post("/api/join", json={"recovery": code}).status_code == 403
    assert ann.get("/api/progress").status_code == 200
    assert 'id="no-recovery-code"' in ann.get("/progress").text  # this browser's copy is of the old code
    tablet = TestClient(app, client=("10.0.0.4", 1))
    assert tablet.post("/api/join", json={"recovery": new}).json()["name"] == "Ann"


def test_the_teacher_renames_merges_and_removes_learners(db):
    app = make_app(db, class_code=CODE)
    ann, a = join(app, "Ann")
    ann2, a2 = join(app, "Ann (phone)", address="10.0.0.9")
    bo, b = join(app, "Bo", address="10.0.0.8")
    ann.post("/api/exercises/dpo-loss/hint")
    ann2.post("/api/exercises/grpo-loss/solution")
    ann2.post("/api/exercises/dpo-loss/check", json={"fills": FILLS})
    t = teacher(app)

    assert t.post(f"/api/teacher/learners/{a['learner']}/rename", json={"name": "Ann Lee"}).json()["name"] == "Ann Lee"
    assert t.post(f"/api/teacher/learners/{a['learner']}/rename", json={"name": " "}).status_code == 422
    assert t.post("/api/teacher/learners/nobody/rename", json={"name": "X"}).status_code == 404

    moved = t.post(f"/api/teacher/learners/{a2['learner']}/merge", json={"into": a["learner"]}).json()["moved"]
    assert moved["attempts"] == 1 and moved["events"] == 1
    rows = {r["key"]: r for r in ann.get("/api/progress").json()["exercises"]}
    assert rows["dpo-loss"]["hints"] == 1 and rows["grpo-loss"]["revealed"] and rows["dpo-loss"]["attempts"] == 1
    assert ann2.get("/api/progress").json() == ann.get("/api/progress").json()  # the phone now signs in as Ann
    assert t.post(f"/api/teacher/learners/{a['learner']}/merge", json={"into": a["learner"]}).status_code == 422

    gone = t.post(f"/api/teacher/learners/{b['learner']}/remove", json={"history": "keep"}).json()
    assert gone["export"]["format"] == "alignlings-progress"
    assert bo.get("/api/progress").status_code == 401  # can no longer sign in
    assert [lr["name"] for lr in t.get("/api/teacher/class").json()["learners"]] == ["Ann Lee"]
    assert "Bo" in t.get("/teacher").text  # listed under the removed learners, history kept
    assert t.get(f"/api/teacher/learners/{b['learner']}/export").json()["format"] == "alignlings-progress"

    export = t.post(f"/api/teacher/learners/{a['learner']}/remove", json={"history": "delete"}).json()["export"]
    assert len(export["attempts"]) == 1 and len(export["events"]) == 2  # returned before deleting
    raw = pr.connect(db)
    assert raw.execute("SELECT COUNT(*) FROM attempts WHERE learner = ?", (a["learner"],)).fetchone()[0] == 0
    assert t.post(f"/api/teacher/learners/{a['learner']}/remove", json={"history": "bogus"}).status_code == 422
    # learners never reach these routes
    c, _ = join(app, "Cy", address="10.0.0.7")
    assert c.post(f"/api/teacher/learners/{a['learner']}/rename", json={"name": "x"}).status_code == 401


# -- join keeps the page and the language; plain refusals ----------------------------------------------
def test_join_keeps_the_page_and_the_language_asked_for(tmp_path):
    app = make_app(tmp_path / "c.sqlite3", class_code=CODE)
    c = TestClient(app)
    r = c.get("/exercises/dpo-loss?lang=zh", follow_redirects=False)
    assert r.status_code == 303
    location = r.headers["location"]
    assert location.startswith("/join?") and "lang=zh" in location
    page = c.get(location)
    assert ZH["join_title"] in page.text and '<html lang="zh-CN">' in page.text
    assert 'id="join-next" name="next" value="/exercises/dpo-loss?lang=zh"' in page.text
    # the language toggle keeps the page to come back to (and only switches the language)
    toggle = re.search(r'id="lang-toggle" href="([^"]+)"', page.text).group(1).replace("&amp;", "&")
    assert toggle.startswith("/join?")
    switched = c.get(toggle)
    assert EN["join_title"] in switched.text
    assert 'id="join-next" name="next" value="/exercises/dpo-loss?lang=zh"' in switched.text
    r = c.post("/api/join", json={"name": "Ann", "code": CODE, "next": "/exercises/dpo-loss?lang=zh"})
    assert r.json()["next"] == "/exercises/dpo-loss?lang=zh"
    for evil in ("//evil.example/x", "https://evil.example", "/\\evil.example", "/join", "/api/progress", "x"):
        assert TestClient(app, client=("10.0.1.1", 1)).post(
            "/api/join", json={"name": "Bo", "code": CODE, "next": evil}).json()["next"] == "/"
    assert TestClient(app).get("/?lang=zh", follow_redirects=False).headers["location"] == "/join?lang=zh"


@pytest.mark.parametrize("lang,table", [("en", EN), ("zh", ZH)])
def test_join_refusals_are_plain_words_in_the_learners_language(tmp_path, lang, table):
    app = make_app(tmp_path / "c.sqlite3", class_code=CODE)
    c = TestClient(app)

    def detail(body):
        r = c.post(f"/api/join?lang={lang}", json=body)
        assert r.status_code in (403, 422), r.text
        d = r.json()["detail"]
        assert isinstance(d, str) and "expected" not in d and "422" not in d, d
        return d

    assert detail({"name": "", "code": CODE}) == table["name_missing"]
    assert detail({"name": "   ", "code": CODE}) == table["name_missing"]
    assert detail({"name": "x" * 61, "code": CODE}) == table["name_too_long"]
    assert detail({"name": "a\u0007b", "code": CODE}) == table["name_bad"]
    assert detail({"name": "Ann", "code": "NOPE"}) == table["wrong_code"]
    assert detail({"name": 5, "code": CODE}) == table["bad_request"]
    assert detail({"recovery": "ZZZZ-ZZZZ-ZZZZ"}) == table["wrong_recovery"]
    r = c.post(f"/api/join?lang={lang}", content=b"not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"] == table["bad_request"]


# -- one person cannot stop the class -------------------------------------------------------------
def test_joins_are_limited_per_address(tmp_path):
    app = make_app(tmp_path / "c.sqlite3", class_code=CODE, max_joins_per_address=3)
    one = TestClient(app, client=("10.0.0.66", 1))
    assert [one.post("/api/join", json={"name": f"n{i}", "code": CODE}).status_code for i in range(3)] == [200] * 3
    r = one.post("/api/join", json={"name": "n4", "code": CODE})
    assert r.status_code == 429 and int(r.headers["retry-after"]) > 0 and r.json()["detail"].startswith("Too many")
    # wrong codes and recovery guesses count too: no guessing from one address
    assert one.post("/api/join", json={"recovery": "AAAA-AAAA-AAAA"}).status_code == 429
    other = TestClient(app, client=("10.0.0.7", 1))
    assert other.post("/api/join", json={"name": "Ann", "code": CODE}).status_code == 200


def test_five_names_from_one_address_do_not_get_honest_checks_refused(tmp_path):
    """Issue 19 §3: one person, five names, two sleeping checks each; an honest learner on another
    address is admitted and graded, and the person's extra checks are the ones refused."""
    gate = threading.Event()
    app = make_app(tmp_path / "c.sqlite3", class_code=CODE, grader=GatedGrader(gate), max_concurrent_checks=2,
                   max_queue=8, max_checks_per_client=2, max_checks_per_address=4, max_joins_per_address=10)
    with TestClient(app):
        names = [join(app, f"evil {i}", address="10.0.0.66")[0] for i in range(5)]
        honest, _ = join(app, "Ann", address="10.0.0.7")
        statuses: list[int] = []
        lock = threading.Lock()

        def check(client):
            r = client.post("/api/exercises/dpo-loss/check", json={"fills": FILLS})
            with lock:
                statuses.append(r.status_code)

        threads = [threading.Thread(target=check, args=(c,)) for c in names for _ in range(2)]
        for t in threads:
            t.start()
        stats = app.state.ctx.check_queue.stats
        deadline = time.monotonic() + 20
        while len(statuses) < 6 or stats()["running"] + stats()["waiting"] < 4:
            assert time.monotonic() < deadline, (statuses, stats())
            time.sleep(0.01)
        assert statuses == [429] * 6
        mine = threading.Thread(target=check, args=(honest,))
        mine.start()
        while stats()["running"] + stats()["waiting"] < 5:
            assert time.monotonic() < deadline, (statuses, stats())
            time.sleep(0.01)
        gate.set()
        for t in (*threads, mine):
            t.join(20)
        assert sorted(statuses) == [200] * 5 + [429] * 6


def test_toy_runs_are_limited_per_learner_not_per_server(tmp_path, monkeypatch):
    import alignlings.toy_grpo as toy

    release = threading.Event()

    def slow_run(config, callback=None):
        release.wait(10)
        callback(1, 0.5, 0.0)
        return SimpleNamespace(p_target_initial=0.1, p_target_final=0.5, iterations=1, train_seconds=0.0)

    monkeypatch.setattr(toy, "run_toy_grpo", slow_run)
    app = make_app(tmp_path / "c.sqlite3", class_code=CODE, max_toy_runs=2)
    body = {"seed": 0, "iterations": 1, "delay_ms": 0}
    with TestClient(app):
        ann, _ = join(app, "Ann", address="10.0.0.1")
        ann_again, _ = join(app, "Ann 2", address="10.0.0.1")
        bo, _ = join(app, "Bo", address="10.0.0.2")
        assert ann.post("/api/toy-grpo/runs", json=body).status_code == 201
        r = ann.post("/api/toy-grpo/runs", json=body)
        assert r.status_code == 429 and "per learner" in r.json()["detail"]
        r = ann_again.post("/api/toy-grpo/runs", json=body)  # another name, the same address
        assert r.status_code == 429 and "per address" in r.json()["detail"]
        assert bo.post("/api/toy-grpo/runs", json=body).status_code == 201  # the second slot is Bo's
        release.set()


def test_serve_without_a_class_code_prints_the_kept_one_after_a_restart(monkeypatch, tmp_path):
    import uvicorn
    from typer.testing import CliRunner

    from alignlings.cli.app import app as cli

    def fake_run(self, sockets=None):
        for s in sockets:
            s.close()
        self.config.app.state.ctx.store.close()

    monkeypatch.setattr(uvicorn.Server, "run", fake_run)
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path))
    args = ["serve", "--classroom", "--port", "0", "--no-browser", "--token", "tt"]
    codes = []
    for _ in range(2):
        out = CliRunner().invoke(cli, args)
        assert out.exit_code == 0, out.output
        codes.append(re.search(r"Class code: (\w+)", out.output).group(1))
    assert codes[0] == codes[1]
    out = CliRunner().invoke(cli, [*args, "--joins-per-address", "0"])
    assert out.exit_code != 0 and "--joins-per-address" in out.output
