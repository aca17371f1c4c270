"""The spot-the-bug drill's routes take an exercise's ``PACK/ID`` key like every other page and route
(a course of several packs names an exercise by its pack): the diff, the story and the page."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from alignlings.web.app import create_app  # noqa: E402

DRILL = "scale-rewards-batch"


class NoGrader:
    def check(self, *args, **kwargs):
        raise AssertionError("nothing here grades")


@pytest.fixture()
def course(tmp_path):
    app = create_app(["dpo-grpo", "bug-drills"], db_path=tmp_path / "p.sqlite3", grader=NoGrader(), warm_up=False)
    with TestClient(app) as c:
        yield app, c


@pytest.mark.parametrize("key", [f"bug-drills/{DRILL}", DRILL])
def test_diff_story_and_page_accept_pack_slash_id(course, key):
    app, c = course
    ex = app.state.ctx.pack.get(key)
    changed = ex.buggy_source.replace("\n", "\n# looked here\n", 1)
    r = c.post(f"/api/bug/{key}/diff", json={"code": changed})
    assert r.status_code == 200, r.text
    assert r.json()["changed_lines"] == [2] and "+# looked here" in r.json()["diff"]
    assert c.get(f"/api/bug/{key}/story").status_code == 403  # not solved yet
    app.state.ctx.store.record_attempt(ex.id, {"passed": True}, code=ex.solution_source, pack="bug-drills")
    story = c.get(f"/api/bug/{key}/story")
    assert story.status_code == 200 and story.json()["story"] == ex.texts("en").story
    page = c.get(f"/exercises/{key}")
    assert page.status_code == 200 and "/static/bug.js" in page.text and "that scales per group" in page.text


def test_unknown_packs_and_non_drills_are_404(course):
    _, c = course
    assert c.post(f"/api/bug/dpo-grpo/{DRILL}/diff", json={"code": "x"}).status_code == 404
    assert c.post("/api/bug/dpo-grpo/dpo-loss/diff", json={"code": "x"}).status_code == 404
    assert c.get("/api/bug/nope/nothing/story").status_code == 404
