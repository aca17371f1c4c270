"""The web app in-process (FastAPI TestClient): every page and API route, with the real engine.

Grading goes through the engine's warm grader (learner code runs in sandboxed children); the
tests for the queue and for a crashing grader inject small fakes, because they need a grader
that is slow or broken on purpose.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from types import SimpleNamespace

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
pytest.importorskip("latex2mathml")

from fastapi.testclient import TestClient  # noqa: E402

from alignlings.content import blanks as bl  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402
from alignlings.web.app import create_app  # noqa: E402

PACK_PATH = os.environ.get("ALIGNLINGS_WEB_TEST_PACK")  # default: the built-in pack
PACK = load_pack(PACK_PATH)
DPO_FILLS = [b.answer for b in bl.find_blanks(PACK.get("dpo-loss").solution_source)]
CODE_IDS = [ex.id for ex in PACK if ex.kind_spec.graded_as_file]
QUIZ = [ex for ex in PACK if ex.kind_spec.answered_by_choice]  # the concept quiz and the bug-or-not drills
CLOZE_IDS = [ex.id for ex in PACK if ex.cloze]
PAGES = ["/", "/quiz", "/cloze", "/toy-grpo", "/progress",
         *[f"/exercises/{ex.id}" for ex in PACK], *[f"/cloze/{i}" for i in CLOZE_IDS]]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """The real app: built-in pack, warm grader, a fresh SQLite store."""
    home = tmp_path_factory.mktemp("web")
    app = create_app(PACK_PATH, db_path=home / "progress.sqlite3")
    with TestClient(app) as c:
        yield c


class FakeGrader:
    """Stands in for the engine's grader where a test needs one that is slow or broken."""

    def __init__(self, pack, *, delay=0.0, fail=False, gate: threading.Event | None = None):
        self.pack, self.delay, self.fail, self.gate = pack, delay, fail, gate
        self.calls = 0

    def check(self, exercise_id, code=None, *, fills=None, lang="en", run_main=True, quick=False):
        self.calls += 1
        if self.gate is not None:
            assert self.gate.wait(60), "the test never opened the gate"
        time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("the fork server died")
        return {"exercise": exercise_id, "passed": True, "blanks": [], "cases": [], "error": None,
                "isolation": "fake", "stdout": "", "seconds": self.delay}

    def submission(self, exercise, code=None, fills=None):
        return SimpleNamespace(code="# fake")


def fake_app(tmp_path, **kw):
    grader = kw.pop("grader", None) or FakeGrader(PACK)
    return create_app(PACK_PATH, db_path=tmp_path / "progress.sqlite3", grader=grader, warm_up=False, **kw), grader


# -- pages -------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", PAGES)
def test_every_page_renders_without_external_assets(client, path):
    r = client.get(path)
    assert r.status_code == 200, r.text[:500]
    assert r.headers["content-type"].startswith("text/html")
    page = r.text
    assert "<main id=\"main\"" in page and 'id="client-data"' in page
    # nothing is fetched from the internet: every src/href is local
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), "external asset in " + path
    for asset in re.findall(r"""(?:src|href)="(/static/[^"?]+)""", page):
        assert client.get(asset).status_code == 200, asset


def test_static_assets_are_served_locally(client):
    for name, ctype in [("app.css", "text/css"), ("highlight.css", "text/css"), ("common.js", "javascript"),
                        ("exercise.js", "javascript"), ("quiz.js", "javascript"), ("cloze.js", "javascript"),
                        ("toy_grpo.js", "javascript"), ("progress.js", "javascript"), ("favicon.svg", "svg")]:
        r = client.get(f"/static/{name}")
        assert r.status_code == 200 and ctype in r.headers["content-type"], name
    assert client.get("/static/nope.js").status_code == 404


def test_exercise_page_typesets_formulas_and_puts_an_input_per_blank(client):
    ex = PACK.get("dpo-loss")
    page = client.get("/exercises/dpo-loss").text
    assert "<math" in page and "$$" not in page  # formulas typeset on the server as MathML
    inputs = re.findall(r'<input class="blank" data-index="(\d+)"', page)
    assert [int(i) for i in inputs] == list(range(1, len(bl.find_blanks(ex.solution_source)) + 1))
    assert bl.PLACEHOLDER not in re.sub(r"<[^>]+>", "", page.split('id="code"')[1].split("</pre>")[0])
    assert 'class="k">def</span>' in page  # highlighted by pygments' lexer


def test_language_by_query_then_cookie(client):
    r = client.get("/?lang=zh")
    assert r.status_code == 200 and "练习" in r.text and 'lang="zh-CN"' in r.text
    assert "下一个：" in r.text and "下一个:" not in r.text  # Chinese punctuation: the full-width colon
    assert r.cookies.get("alignlings_lang") == "zh" or "alignlings_lang=zh" in r.headers.get("set-cookie", "")
    assert "练习" in client.get("/progress").text  # the cookie carries it
    zh = client.get("/exercises/dpo-loss").text
    assert PACK.get("dpo-loss").title["zh"] in zh
    client.get("/?lang=en")
    assert "Exercises" in client.get("/").text and "Next up: " in client.get("/").text
    assert client.get("/api/exercises?lang=zh").json()[0]["title"] == next(iter(PACK)).title["zh"]


def test_unknown_pages_are_404_html(client):
    for path in ["/nope", "/exercises/nope", "/cloze/nope"]:
        r = client.get(path)
        assert r.status_code == 404 and r.headers["content-type"].startswith("text/html"), path
    quiz_id = QUIZ[0].id
    assert client.get(f"/cloze/{quiz_id}").status_code == 404  # a quiz has no cloze snippet


# -- exercises API -----------------------------------------------------------------------------
def test_list_and_detail(client):
    items = client.get("/api/exercises").json()
    assert [i["id"] for i in items] == list(PACK.exercises)
    assert {"id", "kind", "level", "title", "solved", "attempts", "hints", "url"} <= set(items[0])
    d = client.get("/api/exercises/dpo-loss").json()
    assert d["template"].count(bl.PLACEHOLDER) == len(DPO_FILLS) == len(d["blanks"])
    assert [b["index"] for b in d["blanks"]] == list(range(1, len(DPO_FILLS) + 1))
    assert "<math" in d["statement_html"] and d["statement"].strip()
    q = client.get(f"/api/exercises/{QUIZ[0].id}").json()
    assert q["kind"] == "quiz" and q["questions"] and "answer" not in q["questions"][0]


@pytest.mark.parametrize("method,path", [
    ("get", "/api/exercises/nope"), ("post", "/api/exercises/nope/check"), ("post", "/api/exercises/nope/hint"),
    ("post", "/api/exercises/nope/solution"), ("post", "/api/quiz/nope"), ("post", "/api/cloze/nope"),
    ("get", "/api/toy-grpo/runs/nope"), ("get", "/api/toy-grpo/runs/nope/events"), ("get", "/api/nope"),
])
def test_bad_ids_are_404_json(client, method, path):
    body = {"fills": []} if path.endswith("check") else {"choice": 0} if "quiz" in path else \
        {"action": "draw"} if "cloze" in path else None
    r = getattr(client, method)(path, **({"json": body} if method == "post" else {}))
    assert r.status_code == 404
    assert r.headers["content-type"] == "application/json" and r.json()["detail"]


def test_check_correct_fills_passes_and_is_recorded(client):
    r = client.post("/api/exercises/dpo-loss/check", json={"fills": DPO_FILLS})
    assert r.status_code == 200, r.text
    v = r.json()
    # the same verdict object as `alignlings check --json`
    assert set(v) >= {"exercise", "passed", "blanks", "cases", "error", "isolation", "stdout", "seconds"}
    assert v["passed"] is True and v["error"] is None, v
    assert all(b["passed"] for b in v["blanks"]) and v["cases"]
    assert "DPO loss" in v["stdout"]  # the learner's file was run as __main__
    row = client.get("/api/progress").json()["summary"]["dpo-loss"]
    assert row["solved"] and row["attempts"] >= 1
    assert "✓" in client.get("/").text


@pytest.mark.parametrize("exercise_id", [
    pytest.param(i, marks=pytest.mark.slow) if i == "toy-grpo" else i for i in CODE_IDS])  # toy-grpo trains: ~15 s
def test_every_code_exercise_can_be_completed_from_the_page(client, exercise_id):
    ex = PACK.get(exercise_id)
    answers = [b.answer for b in bl.find_blanks(ex.solution_source)]
    for lang in ("en", "zh"):
        page = client.get(f"/exercises/{ex.id}?lang={lang}").text
        assert page.count('<input class="blank"') == len(answers)
        assert 'class="latex"' not in page  # every formula converted
    v = client.post(f"/api/exercises/{ex.id}/check", json={"fills": answers}).json()
    assert v["passed"] is True, v
    client.get("/?lang=en")


def test_check_wrong_fill_names_the_blank_and_its_misconception(client):
    ex = PACK.get("dpo-loss")
    m = next(m for m in ex.misconceptions if m.blank == 1)
    fills = list(DPO_FILLS)
    fills[0] = m.fill
    v = client.post("/api/exercises/dpo-loss/check", json={"fills": fills}).json()
    assert v["passed"] is False
    first = v["blanks"][0]
    assert first["passed"] is False and first["misconception"] == m.id and first["message"] == m.feedback["en"]
    assert all(b["passed"] for b in v["blanks"][1:])
    zh = client.post("/api/exercises/dpo-loss/check?lang=zh", json={"fills": fills}).json()
    assert zh["blanks"][0]["message"] == m.feedback["zh"]


def test_check_whole_file_code(client):
    from alignlings.grading.grader import template_for

    v = client.post("/api/exercises/dpo-loss/check", json={"code": template_for(PACK.get("dpo-loss"))}).json()
    assert v["passed"] is False and all(b["passed"] is False for b in v["blanks"])


@pytest.mark.parametrize("body,status", [
    ({}, 422), ({"fills": DPO_FILLS, "code": "x = 1"}, 422), ({"fills": ["a"]}, 422),
    ({"fills": "not a list"}, 422), ({"fills": [1, 2, 3, 4]}, 422), ({"fills": DPO_FILLS, "extra": 1}, 422),
    ({"fills": ["x" * 3000] * len(DPO_FILLS)}, 422),
])
def test_check_rejects_malformed_bodies(client, body, status):
    r = client.post("/api/exercises/dpo-loss/check", json=body)
    assert r.status_code == status and r.json()["detail"], r.text


def test_malformed_json_is_422(client):
    for path in ["/api/exercises/dpo-loss/check", f"/api/quiz/{QUIZ[0].quiz[0].id}", "/api/cloze/dpo-loss",
                 "/api/toy-grpo/runs"]:
        r = client.post(path, content=b'{"fills": [', headers={"content-type": "application/json"})
        assert r.status_code == 422 and r.headers["content-type"] == "application/json", path
    r = client.post("/api/progress/import", content=b"{nope", headers={"content-type": "application/json"})
    assert r.status_code == 400
    r = client.post("/api/progress/import", content=b"{}", headers={"content-type": "text/plain"})
    assert r.status_code == 415  # a plain cross-site form post cannot import progress


def test_check_on_a_quiz_is_404(client):
    r = client.post(f"/api/exercises/{QUIZ[0].id}/check", json={"fills": []})
    assert r.status_code == 404


def test_a_crashing_submission_does_not_take_the_server_down(client):
    code = "import os\nos._exit(3)\n"
    v = client.post("/api/exercises/dpo-loss/check", json={"code": code}).json()
    assert v["passed"] is False and v["error"]
    segv = "import ctypes\nctypes.string_at(0)\n"
    v = client.post("/api/exercises/dpo-loss/check", json={"code": segv}).json()
    assert v["passed"] is False and v["error"]
    assert client.get("/api/health").json()["ok"]
    assert client.post("/api/exercises/dpo-loss/check", json={"fills": DPO_FILLS}).json()["passed"]


def test_hints_are_progressive_and_solution_is_recorded(client):
    ex = PACK.get("grpo-advantages")
    hints = ex.texts("en").hints
    got = [client.post(f"/api/exercises/{ex.id}/hint").json() for _ in range(len(hints) + 1)]
    assert [g["index"] for g in got] == [*range(1, len(hints) + 1), len(hints)]
    assert got[0]["hint"] == hints[0] and got[-1]["last"] and not got[0]["last"]
    page = client.get(f"/exercises/{ex.id}").text  # taken hints come back with the page
    assert page.count("<li>") >= len(hints)
    s = client.post(f"/api/exercises/{ex.id}/solution").json()
    assert bl.PLACEHOLDER not in s["solution"] and s["explanation_html"] and "<pre" in s["html"]
    assert all(a["answer"] in s["solution"] for a in s["answers"])
    row = client.get("/api/progress").json()["summary"][ex.id]
    assert row["revealed"] and row["hints"] == len(hints)  # asking past the last hint records no more


# -- quiz --------------------------------------------------------------------------------------
def test_quiz_hides_answers_and_explains_every_option(client):
    data = client.get("/api/quiz").json()["questions"]
    assert len(data) == sum(len(ex.quiz) for ex in QUIZ)
    assert all("answer" not in q and "why" not in json.dumps(q) for q in data)
    q = QUIZ[0].quiz[0]
    wrong = (q.answer + 1) % len(q.options)
    r = client.post(f"/api/quiz/{q.id}", json={"choice": wrong}).json()
    assert r["correct"] is False and r["answer"] == q.answer
    assert [o["why"] for o in r["options"]] == [o.why["en"] for o in q.options]
    assert client.post(f"/api/quiz/{q.id}", json={"choice": q.answer}).json()["correct"] is True
    assert client.post(f"/api/quiz/{q.id}", json={"choice": 99}).status_code == 422
    assert client.post(f"/api/quiz/{q.id}", json={"choice": -1}).status_code == 422
    assert client.post(f"/api/quiz/{q.id}", json={}).status_code == 422


def test_finishing_the_quiz_records_it(client):
    ex = QUIZ[0]
    for q in ex.quiz:
        r = client.post(f"/api/quiz/{q.id}", json={"choice": q.answer}).json()
    assert r["score"] == {"right": len(ex.quiz), "total": len(ex.quiz), "passed": True}
    assert client.get("/api/progress").json()["summary"][ex.id]["solved"]


# -- cloze -------------------------------------------------------------------------------------
def test_cloze_draw_is_reproducible_and_counts_right(client):
    a = client.post("/api/cloze/dpo-loss", json={"action": "draw", "ratio": 0.3, "seed": 11}).json()
    b = client.post("/api/cloze/dpo-loss", json={"action": "draw", "ratio": 0.3, "seed": 11}).json()
    assert a["masked"] == b["masked"]
    assert a["counter"] == f"{a['maskable']} maskable · {len(a['masked'])} masked"
    assert a["html"].count('class="mask"') == len(a["masked"])
    draws = {tuple(client.post("/api/cloze/dpo-loss", json={"action": "draw", "ratio": 0.3}).json()["masked"])
             for _ in range(5)}
    assert len(draws) > 1  # a refresh draws new masks
    zh = client.post("/api/cloze/dpo-loss?lang=zh", json={"action": "draw", "ratio": 0.3, "seed": 11}).json()
    assert zh["masked"] == a["masked"] and "可遮盖" in zh["counter"]
    assert [s["id"] for s in client.get("/api/cloze").json()] == CLOZE_IDS


def test_cloze_check_grades_and_records(client):
    from alignlings.practice import cloze as cz

    d = client.post("/api/cloze/dpo-loss", json={"action": "draw", "ratio": 0.3, "seed": 5}).json()
    tokens = {p.key: p.token for p in cz.maskable_positions(cz.snippet_source(PACK.get("dpo-loss")))}
    answers = {k: tokens[k] for k in d["masked"]}
    wrong_key = d["masked"][0]
    answers[wrong_key] = "nonsense_name"
    r = client.post("/api/cloze/dpo-loss", json={"action": "check", "masked": d["masked"], "answers": answers}).json()
    by_key = {x["key"]: x for x in r["results"]}
    assert by_key[wrong_key]["correct"] is False and r["right"] == len(d["masked"]) - 1
    assert all(by_key[k]["correct"] for k in d["masked"][1:])
    assert wrong_key in client.app.state.ctx.store.cloze_stats("dpo-loss")


@pytest.mark.parametrize("body", [
    {"action": "draw", "ratio": 0}, {"action": "draw", "ratio": 1.5}, {"action": "shuffle"},
    {"action": "check", "masked": ["999:0"], "answers": {}}, {"action": "check", "masked": []},
])
def test_cloze_rejects_bad_requests(client, body):
    assert client.post("/api/cloze/dpo-loss", json=body).status_code == 422


# -- progress ----------------------------------------------------------------------------------
def test_progress_export_import_roundtrip(client, tmp_path):
    assert client.post("/api/exercises/dpo-loss/check", json={"fills": DPO_FILLS}).json()["passed"]  # not from other tests
    r = client.get("/api/progress/export")
    assert r.status_code == 200 and "attachment" in r.headers["content-disposition"]
    data = r.json()
    app2, _ = fake_app(tmp_path)
    with TestClient(app2) as other:
        assert not other.get("/api/progress").json()["summary"].get("dpo-loss")
        imported = other.post("/api/progress/import", json=data)
        assert imported.status_code == 200 and imported.json()["imported"]["attempts"] >= 1
        assert other.get("/api/progress").json()["summary"]["dpo-loss"]["solved"]
        again = other.post("/api/progress/import", json=data).json()["imported"]
        assert again["attempts"] == 0  # idempotent
        assert other.post("/api/progress/import", json={"format": "other"}).status_code == 422
        assert other.post("/api/progress/import", json=[1, 2]).status_code == 422


def test_progress_survives_a_restart(tmp_path):
    app, _ = fake_app(tmp_path)
    with TestClient(app) as c:
        c.post("/api/exercises/dpo-loss/check", json={"fills": DPO_FILLS})
        c.post("/api/exercises/dpo-loss/hint")
    app2, _ = fake_app(tmp_path)  # same db file: a restarted server
    with TestClient(app2) as c:
        row = c.get("/api/progress").json()["summary"]["dpo-loss"]
        assert row["solved"] and row["attempts"] == 1 and row["hints"] == 1
        assert "✓" in c.get("/progress").text


# -- toy GRPO ----------------------------------------------------------------------------------
def _events(text: str) -> list[tuple[str, dict]]:
    out = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            out.append((fields["event"], json.loads(fields["data"])))
    return out


def test_toy_grpo_streams_points_then_done(client):
    r = client.post("/api/toy-grpo/runs", json={"seed": 3, "iterations": 4, "delay_ms": 0})
    assert r.status_code == 201
    run = r.json()
    with client.stream("GET", run["events"]) as s:
        assert s.headers["content-type"].startswith("text/event-stream")
        events = _events(s.read().decode())
    kinds = [k for k, _ in events]
    assert kinds == ["start", "point", "point", "point", "point", "done"], events
    points = [d for k, d in events if k == "point"]
    assert [p["iteration"] for p in points] == [1, 2, 3, 4]
    assert all(0 < p["p_target"] < 1 for p in points)
    assert events[-1][1]["p_target_final"] == pytest.approx(points[-1]["p_target"])
    summary = client.get(f"/api/toy-grpo/runs/{run['id']}").json()
    assert summary["status"] == "done" and len(summary["points"]) == 4
    # the same seed gives the same curve (one run trains at a time: torch's RNG is global)
    r2 = client.post("/api/toy-grpo/runs", json={"seed": 3, "iterations": 4, "delay_ms": 0}).json()
    with client.stream("GET", r2["events"]) as s:
        again = [d for k, d in _events(s.read().decode()) if k == "point"]
    assert [p["p_target"] for p in again] == [p["p_target"] for p in points]


def test_toy_grpo_limits_concurrent_runs(tmp_path, monkeypatch):
    import alignlings.toy_grpo as toy

    release = threading.Event()

    def slow_run(config, callback=None):
        release.wait(10)
        callback(1, 0.5, 0.0)
        return SimpleNamespace(p_target_initial=0.1, p_target_final=0.5, iterations=1, train_seconds=0.0)

    monkeypatch.setattr(toy, "run_toy_grpo", slow_run)
    app, _ = fake_app(tmp_path, max_toy_runs=2)
    with TestClient(app) as c:
        body = {"seed": 0, "iterations": 1, "delay_ms": 0}
        assert c.post("/api/toy-grpo/runs", json=body).status_code == 201
        assert c.post("/api/toy-grpo/runs", json=body).status_code == 201
        r = c.post("/api/toy-grpo/runs", json=body)
        assert r.status_code == 429 and r.headers["retry-after"]
        release.set()
        for run in c.get("/api/toy-grpo/runs").json():
            with c.stream("GET", f"/api/toy-grpo/runs/{run['id']}/events") as s:
                assert _events(s.read().decode())[-1][0] == "done"
        assert c.post("/api/toy-grpo/runs", json=body).status_code == 201
        for bad in [{"iterations": 0}, {"iterations": 1000}, {"seed": -1}, {"delay_ms": 5000}]:
            assert c.post("/api/toy-grpo/runs", json=bad).status_code == 422


# -- serving safely ----------------------------------------------------------------------------
def test_token_is_required_everywhere(tmp_path):
    app, _ = fake_app(tmp_path, token="s3cret")
    with TestClient(app) as c:
        for path in ["/", "/api/exercises", "/static/app.css", "/openapi.json", "/docs", "/exercises/dpo-loss"]:
            assert c.get(path).status_code == 401, path
            assert c.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 403, path
        assert c.post("/api/exercises/dpo-loss/check", json={"fills": DPO_FILLS}).status_code == 401
        assert c.get("/api/exercises").json()["detail"]
        assert c.get("/?token=wrong").status_code == 403
        assert c.get("/api/exercises", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert c.get("/api/exercises", headers={"X-Alignlings-Token": "s3cret"}).status_code == 200
        r = c.get("/?token=s3cret", follow_redirects=False)  # the URL printed by `alignlings serve`
        assert r.status_code == 307 and "alignlings_token" in r.headers["set-cookie"]  # then "/" without it
        assert c.get("/api/exercises").status_code == 200  # now the cookie carries it
        assert c.post("/api/exercises/dpo-loss/check", json={"fills": DPO_FILLS}).status_code == 200


def test_only_loopback_host_names_when_asked(tmp_path):
    """`serve` without a token accepts only loopback Host headers (no DNS rebinding)."""
    app, _ = fake_app(tmp_path, allowed_hosts=["127.0.0.1", "localhost"])
    c = TestClient(app, base_url="http://127.0.0.1:8765")
    assert c.get("/api/exercises").status_code == 200
    assert c.get("/api/exercises", headers={"host": "evil.example:8765"}).status_code == 400


def test_oversized_bodies_are_413(tmp_path):
    app, grader = fake_app(tmp_path, max_body_bytes=1000)
    with TestClient(app) as c:
        big = {"code": "x = 1\n" * 400}
        r = c.post("/api/exercises/dpo-loss/check", json=big)
        assert r.status_code == 413 and r.json()["detail"]

        def chunks():  # no Content-Length: cut off while reading
            for _ in range(10):
                yield b" " * 500

        r = c.post("/api/exercises/dpo-loss/check", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413
        assert c.post("/api/progress/import", content=b"{" + b" " * 2000 + b"}",
                      headers={"content-type": "application/json"}).status_code == 413
        assert grader.calls == 0
        assert c.post("/api/exercises/dpo-loss/check", json={"fills": DPO_FILLS}).status_code == 200


def test_a_full_queue_answers_429_at_once(tmp_path):
    gate = threading.Event()
    app, grader = fake_app(tmp_path, grader=FakeGrader(PACK, gate=gate), max_concurrent_checks=1, max_queue=1)
    results: list[int] = []
    with TestClient(app) as c:
        def post():
            results.append(c.post("/api/exercises/dpo-loss/check", json={"fills": DPO_FILLS}).status_code)

        threads = [threading.Thread(target=post) for _ in range(2)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60  # waits for a condition; the bound only turns a hang into a failure
        while (checks := c.get("/api/health").json()["checks"])["running"] + checks["waiting"] < 2:
            assert time.monotonic() < deadline, checks
            time.sleep(0.02)
        # the gate is still closed: a check that waited for a slot would never return, so a 429 here
        # is the proof that a full queue refuses at once (no wall-clock bound needed)
        r = c.post("/api/exercises/dpo-loss/check", json={"fills": DPO_FILLS})
        assert r.status_code == 429
        assert r.headers["retry-after"] and "busy" in r.json()["detail"]
        gate.set()
        for t in threads:
            t.join(10)
        assert results == [200, 200]
        assert c.get("/api/health").json()["checks"] == {"running": 0, "waiting": 0, "max_concurrent": 1,
                                                         "max_queue": 1, "max_per_client": 2, "clients": 0}


def test_a_grader_crash_is_a_500_and_the_server_keeps_serving(tmp_path):
    app, _ = fake_app(tmp_path, grader=FakeGrader(PACK, fail=True))
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/api/exercises/dpo-loss/check", json={"fills": DPO_FILLS})
        # a fixed message: the exception's text (paths, the reference's source in a traceback) stays in the log
        assert r.status_code == 500 and "fork server" not in r.text and "RuntimeError" not in r.text
        assert r.json()["detail"] == "the grader failed; the error is in the server's log"
        assert c.get("/api/health").json()["ok"]
        assert c.get("/").status_code == 200
        assert c.get("/api/health").json()["checks"]["running"] == 0


def test_health_and_openapi(client):
    h = client.get("/api/health").json()
    assert h["ok"] and h["grader"] == "ready"
    paths = client.get("/openapi.json").json()["paths"]
    for p in ["/api/exercises", "/api/exercises/{exercise_id}", "/api/exercises/{exercise_id}/check",
              "/api/exercises/{exercise_id}/hint", "/api/exercises/{exercise_id}/solution", "/api/quiz",
              "/api/quiz/{qid}", "/api/cloze/{snippet_id}", "/api/progress", "/api/progress/export",
              "/api/progress/import", "/api/toy-grpo/runs", "/api/toy-grpo/runs/{run_id}/events"]:
        assert p in paths, p
    assert client.get("/docs").status_code == 200


# -- the command -------------------------------------------------------------------------------
def test_serve_command_binds_loopback_and_generates_a_token_for_a_classroom(monkeypatch, tmp_path):
    import uvicorn
    from typer.testing import CliRunner

    from alignlings.cli.app import app as cli

    seen = {}

    def fake_run(self, sockets=None):
        seen["app"], seen["addr"] = self.config.app, sockets[0].getsockname()
        for s in sockets:
            s.close()

    monkeypatch.setattr(uvicorn.Server, "run", fake_run)
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path))
    pack = ["--pack", PACK_PATH] if PACK_PATH else []
    out = CliRunner().invoke(cli, ["serve", "--port", "0", "--no-browser", *pack])
    assert out.exit_code == 0, out.output
    assert seen["addr"][0] == "127.0.0.1" and "token" not in out.output
    assert re.search(r"http://127\.0\.0\.1:\d+/", out.output)
    assert TestClient(seen["app"], base_url="http://127.0.0.1:8765").get("/api/exercises").status_code == 200
    assert TestClient(seen["app"], base_url="http://rebound.example").get("/api/exercises").status_code == 400

    out = CliRunner().invoke(cli, ["serve", "--host", "0.0.0.0", "--port", "0", "--no-browser", *pack])
    assert out.exit_code == 0, out.output
    token = re.search(r"\?token=([\w-]+)", out.output).group(1)
    assert len(token) >= 16 and seen["addr"][0] == "0.0.0.0"
    c = TestClient(seen["app"])  # no lifespan: no grader is started for this
    assert c.get("/api/exercises").status_code == 401
    assert c.get(f"/api/exercises?token={token}").status_code == 200

    out = CliRunner().invoke(cli, ["serve", "--pack", str(tmp_path / "missing"), "--no-browser"])
    assert out.exit_code == 2


def test_check_verdict_is_the_cli_json_verdict(client, tmp_path, monkeypatch):
    """`POST /check` and `alignlings check --json` give the same verdict for the same file."""
    from typer.testing import CliRunner

    from alignlings.cli.app import app as cli
    from alignlings.grading.grader import template_for

    code = template_for(PACK.get("dpo-loss")).replace(bl.PLACEHOLDER, DPO_FILLS[0], 1)
    path = tmp_path / "dpo_loss.py"
    path.write_text(code, encoding="utf-8")
    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path))
    pack = ["--pack", PACK_PATH] if PACK_PATH else []
    out = CliRunner().invoke(cli, ["check", "dpo-loss", str(path), "--json", *pack])
    cli_verdict = json.loads(out.stdout)
    web_verdict = client.post("/api/exercises/dpo-loss/check", json={"code": code}).json()
    assert set(web_verdict) == set(cli_verdict)
    for key in ("exercise", "passed", "blanks", "cases", "error"):
        assert web_verdict[key] == cli_verdict[key], key
