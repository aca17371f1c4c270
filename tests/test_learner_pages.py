"""Issue 22's learner pages in-process (the browser side is tests/test_learner_pages_browser.py):
the toy DPO page and its runs, the bug drill's verdict in the page's terms, the home page's review
card and labels, day plurals, highlighted review lines."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from alignlings.content import bugdrill  # noqa: E402
from alignlings.web import render  # noqa: E402
from alignlings.web import verdict as web_verdict  # noqa: E402
from alignlings.web.app import create_app  # noqa: E402
from alignlings.web.i18n import days  # noqa: E402


class NoGrader:
    def check(self, *args, **kwargs):
        raise AssertionError("nothing here grades")


@pytest.fixture()
def client(tmp_path):
    app = create_app(["dpo-grpo", "bug-drills"], db_path=tmp_path / "p.sqlite3", grader=NoGrader(), warm_up=False)
    with TestClient(app) as c:
        yield c


def _events(text: str) -> list[tuple[str, dict]]:
    out = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            out.append((fields["event"], json.loads(fields["data"])))
    return out


def test_toy_dpo_run_streams_points_and_reaches_the_target(client):
    r = client.post("/api/toy-dpo/runs", json={"seed": 0, "steps": 40, "delay_ms": 0})
    assert r.status_code == 201, r.text
    run = r.json()
    with client.stream("GET", run["events"]) as s:
        events = _events(s.read().decode())
    kinds = [k for k, _ in events]
    assert kinds[0] == "start" and kinds[-1] == "done", kinds
    points = [d for k, d in events if k == "point"]
    assert [p["iteration"] for p in points] == list(range(1, 41))
    # step 1: the policy is the reference, so the DPO loss is exactly -log sigma(0) = log 2
    assert points[0]["loss"] == pytest.approx(math.log(2), abs=1e-6)
    done = events[-1][1]
    assert done["iterations"] == 40 and done["p_target_initial"] < 0.2 and done["p_target_final"] > 0.9
    # the GRPO list does not show DPO runs, and a GRPO id is not a DPO run
    assert client.get("/api/toy-grpo/runs").json() == []
    assert [x["kind"] for x in client.get("/api/toy-dpo/runs").json()] == ["dpo"]
    g = client.post("/api/toy-grpo/runs", json={"seed": 0, "iterations": 1, "delay_ms": 0}).json()
    assert client.get(f"/api/toy-dpo/runs/{g['id']}").status_code == 404
    for bad in [{"steps": 0}, {"steps": 1000}, {"seed": -1}, {"iterations": 3}]:
        assert client.post("/api/toy-dpo/runs", json=bad).status_code == 422, bad


@pytest.mark.parametrize("lang,words", [("en", ["Toy DPO", "target 0.90", "steps"]),
                                        ("zh", ["玩具 DPO", "目标 0.90", "步数"])])
def test_toy_dpo_page_in_both_languages(client, lang, words):
    page = client.get(f"/toy-dpo?lang={lang}").text
    for w in words:
        assert w in page, w
    assert '"api": "/api/toy-dpo"' in page and "/static/toy_grpo.js" in page
    grpo = client.get(f"/toy-grpo?lang={lang}").text
    assert 'id="toy-loss-note"' in grpo and 'href="/toy-dpo"' in grpo


def _bug_verdict(lang: str) -> dict:
    un = bugdrill.msg("unchanged", lang)
    return {"passed": False, "error": None, "stdout": "",
            "cases": [{"name": "spec", "label": {"zh": "规格"}, "kind": "visible", "passed": False,
                       "message": "case 'spec': expected `1`, got 2"},
                      {"name": "edge", "kind": "edge", "passed": True, "message": ""}],
            "bug": {"changes": un, "message": un, "hint": "Look near lines 3–5 of `scale`.", "diff": ""}}


@pytest.mark.parametrize("lang,kinds", [("en", ["visible", "edge case"]), ("zh", ["可见", "边界情况"])])
def test_bug_verdict_for_the_page(lang, kinds):
    v = _bug_verdict(lang)
    out = web_verdict.file_for_web(v, lang=lang)
    assert [c["kind_label"] for c in out["cases"]] == kinds
    assert "<code>scale</code>" in out["bug"]["hint_html"] and "`" not in out["bug"]["hint_html"]
    assert "<code>1</code>" in out["cases"][0]["message_html"]
    # said once: the message repeats what changed, so the page leaves it out; the engine's values stay
    assert out["bug"]["message_html"] == "" and out["bug"]["message"] == v["bug"]["message"]
    assert out["cases"][0]["message"] == v["cases"][0]["message"] and v == _bug_verdict(lang)
    assert bugdrill.verdict_lines({"bug": v["bug"] | {"hint": None}}, lang) == [v["bug"]["changes"]]
    with pytest.raises(ValueError, match="verdict"):
        web_verdict.file_for_web([], lang=lang)


def test_days_plural():
    assert days(1, "en") == "1 day" and days(1.0, "en") == "1 day"
    assert days(2, "en") == "2 days" and days(0.5, "en") == "0.5 days" and days(0, "en") == "0 days"
    assert days(1, "zh") == "1 天" and days(3, "zh") == "3 天"
    with pytest.raises(ValueError, match="n: expected"):
        days("1", "en")


def test_highlight_lines_one_fragment_per_line():
    src = 'x = 1  # one\n\ndef f(y):\n    return "s" + y'
    rows = render.highlight_lines(src)
    assert len(rows) == 4 and rows[1] == ""
    assert '<span class="k">def</span>' in rows[2] and '<span class="c1"># one</span>' in rows[0]
    assert "\n" not in "".join(rows)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_home_labels_drills_and_shows_the_review_card(client, lang):
    page = client.get(f"/?lang={lang}").text
    assert 'id="review-card"' in page and 'href="/review"' in page
    assert ("bug drill" if lang == "en" else "找 bug") in page
    assert ("bug or not" if lang == "en" else "是不是 bug") in page
    title = "Preference alignment: DPO, GRPO and reward models" if lang == "en" else "偏好对齐：DPO、GRPO 与奖励模型"
    assert page.count(title) == 2  # <title> and <h1>, not a third time as the first pack's heading


def test_bug_or_not_page_is_an_exercise_with_neighbours(client):
    page = client.get("/exercises/grpo-loss-zero?lang=en").text
    assert 'aria-current="page">Exercises' in page and 'aria-current="page">Quiz' not in page
    assert 'rel="prev"' in page and 'rel="next"' in page and 'id="quiz-way-on"' in page
    quiz = client.get("/quiz?lang=en").text
    assert 'aria-current="page">Quiz' in quiz and 'rel="prev"' not in quiz


# -- reference values computed in the background at startup -----------------------------------
class CountingGrader:
    """A grader whose trusted values take a moment; counts what was computed, in order."""

    def __init__(self, delay: float = 0.01):
        import threading

        self.delay, self.order, self.lock = delay, [], threading.Lock()

    def trusted(self, exercise, variant=0):
        import time

        time.sleep(self.delay)
        with self.lock:
            self.order.append(exercise.key)
        return object()

    def check(self, *args, **kwargs):
        raise AssertionError("nothing here grades")

    def close(self):
        pass


def test_reference_warm_up_computes_every_code_exercise_in_course_order(tmp_path):
    import time

    from alignlings.content.pack import load_pack

    grader = CountingGrader()
    app = create_app(["dpo-grpo", "bug-drills"], db_path=tmp_path / "p.sqlite3", grader=grader, warm_references=True)
    expected = [ex.key for ex in load_pack(["dpo-grpo", "bug-drills"]) if ex.kind_spec.graded_as_file]
    with TestClient(app) as c:
        deadline = time.time() + 30
        while (s := c.get("/api/references").json())["done"] < s["total"] and time.time() < deadline:
            time.sleep(0.05)
        assert s["enabled"] and s["total"] == len(expected) == s["done"] and s["computing"] is None
        assert grader.order == expected  # each once, in course order
        one = c.get("/api/references?exercise=dpo-loss&lang=zh").json()
        assert one["state"] == "ready" and one["ready"] and "已就绪" in one["message"]
        assert c.get("/api/references?exercise=nope").status_code == 404
        assert c.get("/api/references?exercise=concepts").status_code == 404  # a quiz: nothing to compute


def test_no_reference_warm_up_when_off(tmp_path, monkeypatch):
    grader = CountingGrader()
    monkeypatch.setenv("ALIGNLINGS_WARM_REFERENCES", "0")
    app = create_app(["dpo-grpo"], db_path=tmp_path / "p.sqlite3", grader=grader, warm_references=None)
    with TestClient(app) as c:
        s = c.get("/api/references?exercise=dpo-loss").json()
        assert s["enabled"] is False and s["ready"] is True
    assert grader.order == []


def test_trusted_values_are_computed_once_when_a_check_and_the_warm_up_race(monkeypatch):
    import threading

    from alignlings.grading.grader import Grader

    grader = Grader(warm=False)
    calls = []
    asked, asking = [], threading.Condition()  # each thread notes that it calls grader.trusted

    def slow(exercise, variant, check, key):
        calls.append(exercise.id)
        # the computation lasts until all three threads have asked for the values (no fixed sleep):
        # the other two must then wait for this one, not compute again
        with asking:
            assert asking.wait_for(lambda: len(asked) == 3, timeout=60), "a thread never asked for the values"
        return ("values", exercise.id)

    def remember(exercise, variant, check, key):  # like _compute_trusted: keep it in memory
        run = slow(exercise, variant, check, key)
        with grader._lock:
            grader._trusted[(exercise.id, variant)] = (key, run)
        return run

    monkeypatch.setattr(grader, "_compute_trusted", remember)
    ex = grader.pack.get("dpo-loss")
    out = []
    def ask():
        with asking:
            asked.append(1)
            asking.notify_all()
        out.append(grader.trusted(ex))

    threads = [threading.Thread(target=ask) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    grader.close()
    assert calls == ["dpo-loss"] and out == [("values", "dpo-loss")] * 3


def test_home_marks_a_revealed_solution_in_its_row(tmp_path):
    app = create_app(["dpo-grpo", "bug-drills"], db_path=tmp_path / "p.sqlite3", grader=NoGrader(), warm_up=False)
    with TestClient(app) as c:
        assert 'class="tag revealed"' not in c.get("/?lang=en").text
        app.state.ctx.store.record_solution_revealed("sft-loss", pack="dpo-grpo")
        for lang, word in (("en", "solution seen"), ("zh", "看过答案")):
            page = c.get(f"/?lang={lang}").text
            row = page[page.index('data-id="sft-loss"'):]
            row = row[:row.index("</li>")]
            assert f'<span class="tag revealed">{word}</span>' in row
