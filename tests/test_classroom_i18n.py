"""The classroom's own strings come from locales/{en,zh}.toml ``[web.classroom]``: the join page, the
teacher page, and the refusals the classroom answers itself read fully Chinese with ``lang=zh``."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from alignlings import i18n  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402
from alignlings.web import classroom  # noqa: E402
from alignlings.web.app import create_app  # noqa: E402

EX = load_pack().get("dpo-loss")
MISC = EX.misconceptions[0]
EN, ZH = i18n.lang_table("web.classroom")["en"], i18n.lang_table("web.classroom")["zh"]
TEACHER, CODE = "tt-token", "ABCD2345"


class NoGrader:
    def check(self, *args, **kwargs):
        raise AssertionError("nothing here grades")


def visible_text(page: str) -> str:
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    return re.sub(r"<[^>]+>", " ", body)


@pytest.fixture()
def app(tmp_path):
    app = create_app(db_path=tmp_path / "c.sqlite3", token=TEACHER, classroom=True, class_code=CODE,
                     grader=NoGrader(), warm_up=False)
    store = app.state.ctx.store
    learner, _ = store.add_learner("Ann")
    verdict = {"passed": False, "blanks": [{"index": MISC.blank, "passed": False, "misconception": MISC.id}]}
    store.for_learner(learner).record_attempt("dpo-loss", verdict, code="x", source="web")
    return app


def test_the_strings_live_in_the_locales_and_every_key_has_chinese():
    assert classroom.STRINGS == {"en": EN, "zh": ZH}
    assert set(i18n._section("zh", "web.classroom")) == set(i18n._section("en", "web.classroom"))
    for key, text in ZH.items():
        if text and key != "csv":
            # Chinese characters, or Chinese punctuation alone (a list separator "、")
            assert re.search(r"[\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]", text), (key, text)


@pytest.mark.parametrize("path", ["/join?lang=zh", f"/teacher?lang=zh&token={TEACHER}"])
def test_the_zh_pages_are_chinese(app, path):
    page = TestClient(app).get(path)
    assert page.status_code == 200
    text = visible_text(page.text)
    english = [v for k, v in EN.items() if v and re.search("[A-Za-z]", v) and k not in ("csv",) and v in text]
    assert not english, english
    if path.startswith("/teacher"):
        for key in ("teacher_title", "misconceptions", "attempted", "legend"):
            assert ZH[key] in text, key
        assert f"{ZH['blank']} {MISC.blank}" in text and MISC.feedback["zh"] in page.text
    else:
        assert all(ZH[k] in text for k in ("join_title", "name", "code", "join", "join_intro"))


def test_refusals_follow_the_language(app):
    c = TestClient(app)
    r = c.post("/api/join?lang=zh", json={"name": "Bo", "code": "WRONG999"})
    assert r.status_code == 403 and r.json()["detail"] == ZH["wrong_code"]
    assert c.get("/api/progress?lang=zh").json()["detail"] == ZH["join_first"]
    page = c.get("/teacher?lang=zh", headers={"Accept": "text/html"})
    assert page.status_code == 401 and ZH["token_required_title"] in page.text
    page = c.get("/teacher?lang=zh", headers={"Accept": "text/html", "X-Alignlings-Token": "guess"})
    assert page.status_code == 403 and ZH["wrong_token_text"] in page.text
    assert c.post("/api/join", json={"name": "Bo", "code": "WRONG999"}).json()["detail"] == EN["wrong_code"]
