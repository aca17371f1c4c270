"""The teacher's filtered view and every CSV it links to, checked against what the learners did
(issue 34), in a real browser on a real `serve --classroom`, on SQLite and on PostgreSQL, in English
and in Chinese.

Ann solves dpo-loss; Bo and Cy hit the same misconception on it; Cy also answers a bug-or-not
drill's first question wrongly (another track). The teacher filters the page to dpo-loss's track in the browser,
follows each CSV link of the filtered page (misconceptions included) and finds only that track's
exercises, and the quiz answer only in the unfiltered CSVs."""

from __future__ import annotations

import csv
import io
import os
import re

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")
pytest.importorskip("httpx")

from classroom_server import CODE, PG_SKIP, PG_URL, TEACHER, classroom_server  # noqa: E402

from alignlings import i18n  # noqa: E402
from alignlings.content import blanks as bl  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync"]
COURSE = load_pack()
EX = COURSE.get("dpo-loss")
TRACK = COURSE.track_of("dpo-loss").key
QUIZ_EX = COURSE.get("grpo-loss-zero")  # a bug-or-not drill: its questions are answered by choosing
QUESTION = QUIZ_EX.quiz[0]
WRONG_CHOICE = next(i for i in range(len(QUESTION.options)) if i != QUESTION.answer)
RIGHT = [b.answer for b in bl.find_blanks(EX.solution_source)]
MISC = EX.misconceptions[0]
WRONG = [MISC.fill if b.index == MISC.blank else b.answer for b in bl.find_blanks(EX.solution_source)]
PLAN = {"Ann": RIGHT, "Bo": WRONG, "Cy": WRONG}


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def join_and_check(browser, url: str, name: str, fills: list[str]):
    context = browser.new_context(base_url=url)
    context.set_default_timeout(90_000)
    page = context.new_page()
    page.goto("/join?lang=en")
    page.fill("#join-name", name)
    page.fill("#join-code", CODE)
    page.click("#join-button")
    page.wait_for_selector("#join-done:not([hidden])")
    page.click("#join-continue")
    page.goto("/exercises/dpo-loss?lang=en")
    for i, text in enumerate(fills, start=1):
        page.fill(f"#blank-{i}", text)
    page.click("#check-btn")
    page.wait_for_selector(".verdict.passed" if fills == RIGHT else ".verdict.failed")
    return context, page


def rows_of(context, url: str, href: str) -> list[dict]:
    response = context.request.get(url + href)
    assert response.status == 200, (href, response.status)
    assert "json" not in response.headers.get("content-type", "")
    return list(csv.DictReader(io.StringIO(response.text())))


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.skipif(
    not PG_URL, reason=PG_SKIP))])
def test_a_filtered_teacher_view_and_its_csvs_match_what_the_learners_did(browser, backend, tmp_path):
    with classroom_server(backend, tmp_path) as url:
        learners = {name: join_and_check(browser, url, name, fills) for name, fills in PLAN.items()}
        cy_page = learners["Cy"][1]
        status = cy_page.evaluate(
            """async ([qid, choice]) => (await fetch('/api/quiz/' + qid, {method: 'POST',
                 headers: {'Content-Type': 'application/json'}, body: JSON.stringify({choice})})).status""",
            [QUESTION.id, WRONG_CHOICE])
        assert status == 200

        teacher = browser.new_context(base_url=url)
        teacher.set_default_timeout(60_000)
        page = teacher.new_page()
        for lang in ("en", "zh"):
            s = i18n.lang_table("web.classroom")[lang]
            page.goto(f"/teacher?token={TEACHER}&lang={lang}")
            page.select_option("#filter-track", TRACK)
            page.click("#filter-apply")
            page.wait_for_url(re.compile(r"track="))
            links = {name: page.get_attribute(f"#{name}-csv", "href")
                     for name in ("progress", "learners", "exercises", "misconceptions")}
            for name, href in links.items():  # every CSV link keeps the filter and the language
                assert "track=" + TRACK.replace("/", "%2F") in href and f"lang={lang}" in href, (name, href)

            keys = set(COURSE.track(TRACK).exercises)
            progress = rows_of(teacher, url, links["progress"])
            assert {r["exercise"] for r in progress} == keys and {r["track"] for r in progress} == {TRACK}
            cells = {(r["name"], r["exercise"]): r for r in progress}
            assert [cells[(n, "dpo-loss")]["status"] for n in PLAN] == ["solved", "attempted", "attempted"]
            assert all(cells[(n, "dpo-loss")]["attempts"] == "1" for n in PLAN)

            by_name = {r["name"]: r for r in rows_of(teacher, url, links["learners"])}
            assert [by_name[n]["solved_count"] for n in PLAN] == ["1", "0", "0"]
            assert re.fullmatch(r"dpo-loss \(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\)", by_name["Ann"]["solved"])
            assert by_name["Ann"]["last_submission"].startswith("dpo-loss (") and "passed" in by_name["Ann"]["last_submission"]
            for n in ("Bo", "Cy"):
                assert by_name[n]["misconceptions"] == f"dpo-loss: {MISC.id} (1×)"
                assert by_name[n]["failing_blanks"] == f"dpo-loss: blanks {MISC.blank}"
            assert by_name["Cy"]["wrong_choices"] == ""  # the quiz is in another track: filtered out
            for r in by_name.values():
                assert not any(v.startswith(("[", "{")) for v in r.values())  # no JSON in a cell

            exercises = {r["exercise"]: r for r in rows_of(teacher, url, links["exercises"])}
            assert set(exercises) == keys
            row = exercises["dpo-loss"]
            assert (row["solved"], row["stuck"]) == ("1", "2")
            assert row["title"] == EX.title[lang] and row["misconceptions"] == f"{MISC.id} (2 learners)"

            misc = rows_of(teacher, url, links["misconceptions"])
            assert [(r["misconception"], r["exercise"], r["learners"]) for r in misc] == [(MISC.id, "dpo-loss", "2")]
            solved = rows_of(teacher, url, links["progress"].replace("progress.csv", "solved.csv"))
            assert [(r["name"], r["exercise"]) for r in solved] == [("Ann", "dpo-loss")]

            # another track: none of dpo-loss's misconceptions, on the page or in its CSV
            other = COURSE.track_of(QUIZ_EX.key).key
            page.goto(f"/teacher?lang={lang}&track={other}")
            assert page.locator(f'#class-misconceptions tr[data-misconception="{MISC.id}"]').count() == 0
            assert rows_of(teacher, url, page.get_attribute("#misconceptions-csv", "href")) == []
            cy = {r["name"]: r for r in rows_of(teacher, url, page.get_attribute("#learners-csv", "href"))}["Cy"]
            assert cy["wrong_choices"] == (f"{QUIZ_EX.key} [bug-or-not] {QUESTION.question[lang]} -> "
                                           f"{QUESTION.options[WRONG_CHOICE].text[lang]}")
            quiz_row = {r["exercise"]: r for r in rows_of(teacher, url, page.get_attribute("#exercises-csv", "href"))}
            assert quiz_row[QUIZ_EX.key]["wrong_options"].startswith(f"{QUESTION.question[lang]} -> ")
            # the page labels the question by its text, and counts in the page's language
            page.goto(f"/teacher?lang={lang}")
            assert s["solved_head"] in page.locator('li[data-exercise="dpo-loss"] .solved-n').inner_text()
        for context, _ in learners.values():
            context.close()
        teacher.close()
