"""Server hardening (issue 9, part 2), through FastAPI's TestClient: progress import that answers
422 (never 500) to hostile JSON and names only the pack's ids, import off on a shared server, no
cross-site writes in loopback mode, the ``?token=`` redirect, the cookie's ``Secure`` flag and
``Referrer-Policy`` on every response.

The grader is a fake that records calls: these tests are about what reaches it, not grading.
"""

from __future__ import annotations

import copy
import json
import uuid

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from alignlings.content.pack import load_pack  # noqa: E402
from alignlings.web.app import create_app  # noqa: E402

PACK = load_pack()
QUIZ_IDS = [q.id for ex in PACK if ex.kind == "quiz" for q in ex.quiz]
TOKEN = "s3cret-token"
ORIGIN = "http://testserver"  # TestClient's default base URL


class RecordingGrader:
    def __init__(self):
        self.calls = 0

    def check(self, exercise_id, code=None, *, fills=None, lang="en", run_main=True, quick=False):
        self.calls += 1
        return {"exercise": exercise_id, "passed": True, "blanks": [], "cases": [], "error": None,
                "isolation": "fake", "stdout": "", "seconds": 0.0}

    def submission(self, exercise, code=None, fills=None):
        from types import SimpleNamespace

        return SimpleNamespace(code="# fake")


def make_app(tmp_path, **kw):
    grader = RecordingGrader()
    app = create_app(None, db_path=tmp_path / "progress.sqlite3", grader=grader, warm_up=False, **kw)
    return app, grader


def export(exercise="dpo-loss", question=None, **attempt_overrides) -> dict:
    """A small valid export: one solved attempt, one hint, one quiz answer, one cloze result."""
    now = "2024-05-01T10:00:00+00:00"
    attempt = {"uuid": str(uuid.uuid4()), "exercise": exercise, "passed": True, "created_at": now,
               "code": "x = 1", "verdict": {"passed": True, "cases": []}, "source": "web", **attempt_overrides}
    return {"format": "alignlings-progress", "version": 1, "exported_at": now, "attempts": [attempt],
            "events": [{"uuid": str(uuid.uuid4()), "exercise": exercise, "kind": "hint", "created_at": now}],
            "quiz_answers": [{"uuid": str(uuid.uuid4()), "question_id": question or QUIZ_IDS[0], "choice": 0,
                              "correct": False, "created_at": now}],
            "cloze": [{"uuid": str(uuid.uuid4()), "snippet": exercise, "key": "1:0", "token": "x",
                       "correct": True, "created_at": now}],
            "settings": {"lang": {"value": "zh", "updated_at": now}}}


@pytest.fixture
def local(tmp_path):
    """A loopback-mode app (no token), as `alignlings serve` runs by default."""
    app, grader = make_app(tmp_path)
    with TestClient(app) as c:
        c.grader = grader
        yield c


def post_json(c, path, data, **headers):
    return c.post(path, content=json.dumps(data).encode(), headers={"content-type": "application/json", **headers})


# -- progress import -----------------------------------------------------------------------------
def test_a_valid_export_imports(local):
    r = post_json(local, "/api/progress/import", export())
    assert r.status_code == 200, r.text
    imported = r.json()["imported"]
    assert {k: imported[k] for k in ("attempts", "events", "quiz_answers", "cloze", "settings", "review_log")} == \
        {"attempts": 1, "events": 1, "quiz_answers": 1, "cloze": 1, "settings": 1, "review_log": 0}
    assert local.get("/api/progress").json()["summary"]["dpo-loss"]["solved"]


def _deep(n: int) -> str:
    return "[" * n + "]" * n


def _with(path: list, value) -> dict:
    data = export()
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


BAD_IMPORTS = {
    "nested 100k deep (a bare array)": _deep(100_000).encode(),
    "nested 5k deep inside an object": ('{"format": "alignlings-progress", "version": 1, "x": '
                                         + _deep(5000) + "}").encode(),
    "a verdict nested 200 deep": json.dumps(_with(["attempts", 0, "verdict"], {"a": json.loads(_deep(200))})).encode(),
    "a setting nested 100 deep": json.dumps(
        _with(["settings", "lang"], {"value": json.loads(_deep(100)), "updated_at": "2024-01-01T00:00:00Z"})).encode(),
    "an integer of 5000 digits": ('{"format": "alignlings-progress", "version": ' + "9" * 5000 + "}").encode(),
    "a choice beyond SQLite's integers": json.dumps(_with(["quiz_answers", 0, "choice"], 10 ** 30)).encode(),
    "a negative choice": json.dumps(_with(["quiz_answers", 0, "choice"], -1)).encode(),
    "a version beyond SQLite's integers": json.dumps(_with(["version"], 2 ** 70)).encode(),
    "year 9999 pushed past the end by its offset": json.dumps(
        _with(["attempts", 0, "created_at"], "9999-12-31T23:59:59-12:00")).encode(),
    "year 1 pushed before the start by its offset": json.dumps(
        _with(["events", 0, "created_at"], "0001-01-01T00:00:00+14:00")).encode(),
    "a lone surrogate in the code": json.dumps(_with(["attempts", 0, "code"], "x = '\ud800'")).encode(),
    "a lone surrogate in a setting key": json.dumps(
        _with(["settings"], {"\udfff": {"value": 1, "updated_at": "2024-01-01T00:00:00Z"}})).encode(),
    "NaN in a verdict": json.dumps(_with(["attempts", 0, "verdict"], {"loss": float("nan")})).encode(),
    "Infinity in a setting": json.dumps(
        _with(["settings", "lang"], {"value": float("inf"), "updated_at": "2024-01-01T00:00:00Z"})).encode(),
    "an unknown exercise in an attempt": json.dumps(export(exercise="not-an-exercise")).encode(),
    "an unknown exercise in an event": json.dumps(_with(["events", 0, "exercise"], "../etc")).encode(),
    "an unknown cloze snippet": json.dumps(_with(["cloze", 0, "snippet"], "nope")).encode(),
    "an unknown quiz question": json.dumps(export(question="q-that-does-not-exist")).encode(),
    "another pack's rows": json.dumps(_with(["attempts", 0, "pack"], "someone-elses-pack")).encode(),
    "an empty pack id": json.dumps(_with(["events", 0, "pack"], "")).encode(),
}


@pytest.mark.parametrize("body", list(BAD_IMPORTS.values()), ids=list(BAD_IMPORTS))
def test_hostile_imports_are_422_and_change_nothing(local, body):
    before = local.get("/api/progress/export").json()
    r = local.post("/api/progress/import", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text[:300]
    assert r.json()["detail"]
    after = local.get("/api/progress/export").json()
    assert {k: v for k, v in after.items() if k != "exported_at"} == \
        {k: v for k, v in before.items() if k != "exported_at"}


def test_an_unknown_exercise_is_named_in_the_error(local):
    r = post_json(local, "/api/progress/import", export(exercise="not-an-exercise"))
    assert r.status_code == 422 and "attempts[0].exercise" in r.json()["detail"]
    assert "not-an-exercise" in r.json()["detail"]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)
FIELDS = [["format"], ["version"], ["attempts"], ["attempts", 0], ["attempts", 0, "uuid"],
          ["attempts", 0, "exercise"], ["attempts", 0, "passed"], ["attempts", 0, "created_at"],
          ["attempts", 0, "verdict"], ["attempts", 0, "code"], ["events", 0, "kind"], ["events", 0, "created_at"],
          ["quiz_answers", 0, "choice"], ["quiz_answers", 0, "question_id"], ["cloze", 0, "key"],
          ["settings"], ["settings", "lang"], ["settings", "lang", "value"], ["settings", "lang", "updated_at"]]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(FIELDS), value=JSON_VALUES)
def test_any_json_in_any_field_is_a_clean_answer_never_a_500(local, field, value):
    data = _with(field, copy.deepcopy(value))
    r = post_json(local, "/api/progress/import", data)
    assert r.status_code in (200, 422), (field, value, r.status_code, r.text[:300])
    if r.status_code == 200:  # what was taken can be exported and served again
        assert local.get("/api/progress/export").status_code == 200
        assert local.get("/progress").status_code == 200


def test_import_is_off_on_a_shared_server_unless_allowed(tmp_path):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    app, _ = make_app(tmp_path / "a", token=TOKEN)
    with TestClient(app) as c:
        r = post_json(c, "/api/progress/import", export(), **auth)
        assert r.status_code == 403 and "--allow-import" in r.json()["detail"]
        assert not c.get("/api/progress", headers=auth).json()["summary"].get("dpo-loss")
        assert c.get("/api/progress/export", headers=auth).status_code == 200  # export stays
    app, _ = make_app(tmp_path / "b", token=TOKEN, allow_import=True)
    with TestClient(app) as c:
        assert post_json(c, "/api/progress/import", export(), **auth).status_code == 200
    app, _ = make_app(tmp_path / "c", allow_import=False)  # a loopback server may turn it off too
    with TestClient(app) as c:
        assert post_json(c, "/api/progress/import", export()).status_code == 403


@pytest.mark.parametrize("allow", [False, True])
def test_serve_allow_import_flag(monkeypatch, tmp_path, allow):
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
    argv = ["serve", "--port", "0", "--no-browser", "--token", TOKEN] + (["--allow-import"] if allow else [])
    out = CliRunner().invoke(cli, argv)
    assert out.exit_code == 0, out.output
    assert ("Progress import is off" in out.output) is not allow
    c = TestClient(seen["app"], base_url="http://127.0.0.1:8765")
    r = post_json(c, "/api/progress/import", export(), Authorization=f"Bearer {TOKEN}")
    assert r.status_code == (200 if allow else 403), r.text


# -- loopback mode: no cross-site writes -----------------------------------------------------------
def _writes():
    """Every state-changing route with a body it accepts."""
    return [("/api/exercises/dpo-loss/check", {"code": "x = 1"}), ("/api/exercises/dpo-loss/hint", None),
            ("/api/exercises/dpo-loss/solution", None), ("/api/progress/import", export()),
            (f"/api/quiz/{QUIZ_IDS[0]}", {"choice": 0}), ("/api/cloze/dpo-loss", {"action": "draw", "ratio": 0.3}),
            ("/api/toy-grpo/runs", {"seed": 1, "iterations": 1, "delay_ms": 0})]


WRITES = _writes()
WRITE_IDS = [p.split("/")[2] + ":" + p.rsplit("/", 1)[-1] for p, _ in WRITES]


def _unchanged(c) -> dict:
    data = c.get("/api/progress/export").json()
    return {k: v for k, v in data.items() if k != "exported_at"}


@pytest.mark.parametrize(("path", "body"), WRITES, ids=WRITE_IDS)
def test_a_cross_site_form_cannot_write(local, path, body):
    """What an attacker's page can make a browser send: a form (urlencoded, multipart, text/plain)
    with the attacker's Origin, or none; a fetch with its Origin. All are refused before the route."""
    before = _unchanged(local)
    form = {"content-type": "application/x-www-form-urlencoded"}
    attempts = [
        local.post(path, content=b"code=x", headers=form),  # an old browser sends no Origin
        local.post(path, content=b"code=x", headers={**form, "origin": "https://evil.example"}),
        local.post(path, content=b"{}", headers={"content-type": "text/plain", "origin": "null"}),
        local.post(path, content=b"--b--", headers={"content-type": "multipart/form-data; boundary=b"}),
        local.post(path, content=b'{"code": "x"}', headers={"content-type": "text/plain;charset=UTF-8",
                                                             "origin": ORIGIN}),
        post_json(local, path, body or {}, origin="https://evil.example"),
        post_json(local, path, body or {}, origin="http://testserver.evil.example"),
        post_json(local, path, body or {}, origin="http://testserver:8080"),  # another port is another origin
        post_json(local, path, body or {}, origin="https://testserver"),  # and another scheme
        post_json(local, path, body or {}, origin="null"),  # a sandboxed iframe or a file:// page
        post_json(local, path, body or {}, **{"sec-fetch-site": "cross-site"}),
        post_json(local, path, body or {}, **{"sec-fetch-site": "same-site"}),  # a sibling subdomain
        local.post(path, headers={"origin": "https://evil.example"}),  # a body-less fetch
        local.post(path, headers={"sec-fetch-site": "cross-site"}),
    ]
    statuses = [r.status_code for r in attempts]
    assert all(s in (403, 415) for s in statuses), statuses
    assert all(r.json()["detail"] for r in attempts)
    assert local.grader.calls == 0
    assert _unchanged(local) == before


@pytest.mark.parametrize(("path", "body"), WRITES, ids=WRITE_IDS)
def test_the_apps_own_pages_and_plain_clients_can_write(local, path, body):
    same = {"origin": ORIGIN, "sec-fetch-site": "same-origin"}
    if body is None:  # what common.js sends for a hint or a solution: the JSON type, no body
        r = local.post(path, headers={"content-type": "application/json", **same})
    else:
        r = post_json(local, path, body, **same)
    assert r.status_code in (200, 201), r.text[:300]
    if body is None:  # curl -X POST: no Origin, no Content-Type, no body
        assert local.post(path).status_code == 200
        assert local.post(path, headers={"origin": ORIGIN}).status_code == 415  # a browser must say JSON
    else:
        assert post_json(local, path, body).status_code in (200, 201)  # a script, without Origin


def test_origin_matching_follows_the_host_and_scheme(tmp_path):
    app, _ = make_app(tmp_path)
    with TestClient(app, base_url="http://127.0.0.1:8765") as c:
        hint = "/api/exercises/dpo-loss/hint"
        json_type = {"content-type": "application/json"}
        assert c.post(hint, headers={**json_type, "origin": "http://127.0.0.1:8765"}).status_code == 200
        assert c.post(hint, headers={**json_type, "origin": "http://localhost:8765"}).status_code == 403
        assert c.post(hint, headers={**json_type, "origin": "http://127.0.0.1:8765/x"}).status_code == 403
        assert c.post(hint, headers={**json_type, "origin": "http://127.0.0.1:99999"}).status_code == 403
        assert c.post(hint, headers={**json_type, "origin": "https://127.0.0.1:8765"}).status_code == 403
        # behind a TLS proxy on the same port, the https origin is the page's own
        assert c.post(hint, headers={**json_type, "origin": "https://127.0.0.1:8765",
                                     "x-forwarded-proto": "https"}).status_code == 200
    with TestClient(app, base_url="http://[::1]:8765") as c:
        assert c.post("/api/exercises/dpo-loss/hint",
                      headers={"content-type": "application/json", "origin": "http://[::1]:8765"}).status_code == 200


def test_a_token_server_relies_on_the_token_not_the_origin(tmp_path):
    """With a token, a cross-site page has no token (the cookie is SameSite=Strict): 401."""
    app, grader = make_app(tmp_path, token=TOKEN)
    with TestClient(app) as c:
        r = post_json(c, "/api/exercises/dpo-loss/check", {"code": "x = 1"}, origin="https://evil.example")
        assert r.status_code == 401 and grader.calls == 0


# -- the token in the URL ------------------------------------------------------------------------
def test_a_token_url_sets_the_cookie_and_redirects_without_it(tmp_path):
    app, _ = make_app(tmp_path, token=TOKEN)
    with TestClient(app, follow_redirects=False) as c:
        r = c.get(f"/exercises/dpo-loss?lang=zh&token={TOKEN}&x=1")
        assert r.status_code == 307 and r.headers["location"] == "/exercises/dpo-loss?lang=zh&x=1"
        cookie = r.headers["set-cookie"]
        assert f"alignlings_token={TOKEN}" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert "Secure" not in cookie  # plain http: a Secure cookie would never come back
        assert c.get(r.headers["location"]).status_code == 200  # the cookie carries the token now
        assert c.get(f"/?token={TOKEN}").headers["location"] == "/"
        assert c.head(f"/api/health?token={TOKEN}").status_code == 307
        assert c.get("/?token=wrong").status_code == 403  # a wrong token is not redirected
        # a path that looks like another host ("//evil.example") stays on this server
        r = c.get(f"http://testserver//evil.example/?token={TOKEN}")
        assert r.status_code == 307 and r.headers["location"].startswith("/evil.example")
        # a write that carries ?token= is not redirected (that would replay its body): it runs
        r = post_json(c, f"/api/exercises/dpo-loss/check?token={TOKEN}", {"code": "x = 1"})
        assert r.status_code == 200 and "alignlings_token" in r.headers["set-cookie"]


@pytest.mark.parametrize(("base_url", "headers"), [("https://testserver", {}),
                                                   ("http://testserver", {"x-forwarded-proto": "https"})])
def test_the_cookie_is_secure_over_https(tmp_path, base_url, headers):
    app, _ = make_app(tmp_path, token=TOKEN)
    with TestClient(app, base_url=base_url, follow_redirects=False) as c:
        r = c.get(f"/?token={TOKEN}", headers=headers)
        assert r.status_code == 307 and "; Secure" in r.headers["set-cookie"]


# -- Referrer-Policy -----------------------------------------------------------------------------
def test_every_response_says_no_referrer(tmp_path):
    app, _ = make_app(tmp_path, token=TOKEN, max_body_bytes=100, allowed_hosts=["testserver"])
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(app, follow_redirects=False) as c:
        responses = {
            "page": c.get("/", headers=auth), "api": c.get("/api/exercises", headers=auth),
            "static": c.get("/static/app.css", headers=auth), "404": c.get("/nope", headers=auth),
            "401": c.get("/"), "403": c.get("/?token=wrong"), "307": c.get(f"/?token={TOKEN}"),
            "413": post_json(c, "/api/exercises/dpo-loss/check", {"code": "x" * 500}, **auth),
            "422": post_json(c, "/api/quiz/x", {"choice": "no"}, **auth),
            "400 host": c.get("/", headers={**auth, "host": "evil.example"}),
        }
    missing = {k: r.status_code for k, r in responses.items() if r.headers.get("referrer-policy") != "no-referrer"}
    assert not missing
    app, _ = make_app(tmp_path / "local")
    with TestClient(app) as c:  # and the loopback mode's refusals
        r = c.post("/api/exercises/dpo-loss/hint", content=b"a=1",
                   headers={"content-type": "application/x-www-form-urlencoded"})
        assert r.status_code == 415 and r.headers["referrer-policy"] == "no-referrer"
