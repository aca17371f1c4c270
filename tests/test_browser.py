"""The web app end to end in a real browser: Debian's headless Chromium driven by Playwright.

A real server (``alignlings serve`` in a subprocess, on a free loopback port, with a temporary
ALIGNLINGS_HOME) and the real engine. Never downloads a browser: without /usr/bin/chromium the
tests skip. Screenshots of every page go to test-artifacts/screenshots/.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")
httpx = pytest.importorskip("httpx")

from serving import CHROMIUM_ARGS, served  # noqa: E402  (tests/serving.py)

from alignlings.content import blanks as bl  # noqa: E402
from alignlings.practice import cloze as cz  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-artifacts" / "screenshots"
PACK_PATH = os.environ.get("ALIGNLINGS_WEB_TEST_PACK")  # default: the built-in pack
PACK = load_pack(PACK_PATH)
DPO = PACK.get("dpo-loss")
DPO_FILLS = [b.answer for b in bl.find_blanks(DPO.solution_source)]
ARGS = CHROMIUM_ARGS


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`alignlings serve --port 0 --no-browser` in a subprocess; yields its base URL."""
    with served(["--pack", PACK_PATH] if PACK_PATH else [], tmp_path_factory.mktemp("alignlings-home"),
                start_s=60, ready_s=120) as (url, _):
        yield url


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=server, accept_downloads=True)
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    outside: list[str] = []
    pg.on("request", lambda r: outside.append(r.url) if not r.url.startswith(server) else None)
    yield pg
    context.close()
    assert not errors, errors  # no script errors on any page
    assert not outside, outside  # nothing fetched from anywhere but our server


def shot(pg, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def fill_blanks(pg, fills: list[str]) -> None:
    """Type each fill and move on with Tab, as a learner does."""
    pg.click("#blank-1")
    for fill in fills:
        pg.keyboard.press("Control+A")  # the page puts back the last attempt's fills
        pg.keyboard.type(fill)
        pg.keyboard.press("Tab")


def test_home_lists_the_pack_and_switches_to_chinese(page):
    page.goto("/")
    assert page.locator(".exercise-item").count() == len(PACK.exercises)
    assert page.locator("#next-up").is_visible()
    shot(page, "home")
    page.click("#lang-toggle")
    page.wait_for_url(re.compile(r"lang=zh"))
    assert page.locator("html").get_attribute("lang") == "zh-CN"
    assert "练习" in page.inner_text("header nav")
    assert PACK.get("dpo-loss").title["zh"] in page.inner_text("[data-track=\"dpo-grpo/dpo-grpo-fill\"] .exercise-list")
    shot(page, "home-zh")
    page.goto("/progress")  # the choice sticks (cookie)
    assert "进度" in page.inner_text("h1")
    page.click("#lang-toggle")
    assert "Progress" in page.inner_text("h1")


def test_dpo_loss_filled_correctly_passes(page):
    page.goto("/exercises/dpo-loss")
    assert page.locator("math").count() >= 1  # formulas typeset (MathML)
    assert page.locator("input.blank").count() == len(DPO_FILLS)
    fill_blanks(page, DPO_FILLS)
    assert page.evaluate("document.activeElement.id") == "check-btn"  # Tab walked every blank
    page.keyboard.press("Control+Enter")
    page.wait_for_selector(".verdict.passed")
    assert page.locator(".mark.ok").count() == len(DPO_FILLS)
    assert page.locator("#solved-badge").is_visible()
    assert page.locator("ul.cases li.ok").count() == page.locator("ul.cases li").count() > 0
    page.click("#stdout-box summary")
    assert "DPO loss" in page.inner_text("#stdout")
    shot(page, "exercise-passed")


def test_dpo_loss_wrong_blank_is_marked_with_its_feedback(page):
    m = next(m for m in DPO.misconceptions if m.blank == 3)
    fills = list(DPO_FILLS)
    fills[2] = m.fill
    page.goto("/exercises/dpo-loss")
    fill_blanks(page, fills)
    page.click("#check-btn")
    page.wait_for_selector(".verdict.failed")
    assert "bad" in page.get_attribute("#blank-3", "class")
    feedback = page.locator('.blank-fb[data-index="3"]')
    assert feedback.is_visible() and m.feedback["en"] in feedback.inner_text()
    assert page.locator(".mark.ok").count() == len(DPO_FILLS) - 1
    page.click("#hint-btn")
    page.wait_for_selector("#hint-list li")
    assert DPO.texts("en").hints[0][:20] in page.inner_text("#hint-list")
    shot(page, "exercise-wrong")
    page.click("#reveal-btn")
    page.click("#reveal-yes")
    page.wait_for_selector("#solution:not([hidden])")
    assert DPO_FILLS[3] in page.inner_text("#solution-code")
    shot(page, "exercise-solution")


def test_chinese_exercise_page_and_feedback(page):
    m = next(m for m in DPO.misconceptions if m.blank == 1)
    page.goto("/exercises/dpo-loss?lang=zh")
    assert DPO.texts("zh").blanks[0] in page.inner_text("#code")  # TODO comments in Chinese
    fills = list(DPO_FILLS)
    fills[0] = m.fill
    fill_blanks(page, fills)
    page.keyboard.press("Control+Enter")
    page.wait_for_selector(".verdict.failed")
    assert m.feedback["zh"] in page.inner_text('.blank-fb[data-index="1"]')
    assert "还没通过" in page.inner_text("#verdict-head")
    shot(page, "exercise-zh")


def test_quiz_answer_shows_every_explanation(page):
    quiz = next(ex for ex in PACK if ex.kind == "quiz")
    q = quiz.quiz[0]
    wrong = (q.answer + 1) % len(q.options)
    page.goto("/quiz")
    card = page.locator("article.question:not([hidden])")
    assert card.get_attribute("data-qid") == q.id
    card.locator(f'button.option[data-choice="{wrong}"]').click()
    page.wait_for_selector("article.question:not([hidden]) .why:not([hidden])")
    whys = card.locator(".why")
    assert whys.count() == len(q.options)
    assert [whys.nth(i).inner_text().strip() for i in range(len(q.options))] == \
        [o.why["en"].strip() for o in q.options]
    assert "wrong" in card.locator(f'button.option[data-choice="{wrong}"]').get_attribute("class")
    assert "right" in card.locator(f'button.option[data-choice="{q.answer}"]').get_attribute("class")
    assert card.locator(".q-result").inner_text() == "Not quite."
    shot(page, "quiz")
    card.locator("button.next").click()
    assert page.locator("article.question:not([hidden])").get_attribute("data-qid") == quiz.quiz[1].id


def _masked(page) -> list[str]:
    return page.eval_on_selector_all("input.mask", "els => els.map(e => e.dataset.key)")


def _counter_ok(page) -> None:
    text = page.inner_text("#cloze-counter")
    n, m = map(int, re.match(r"(\d+) maskable · (\d+) masked", text).groups())
    assert m == len(_masked(page)) and n == len(cz.maskable_positions(cz.snippet_source(DPO)))


def open_drill(page, snippet: str) -> None:
    """Open a drill; where it would show an unsolved exercise's solution, accept the warning."""
    page.goto(f"/cloze/{snippet}")
    if page.locator("#open-anyway").count():
        page.click("#open-anyway")
        page.wait_for_selector("#cloze-code")


def test_cloze_refresh_draws_new_masks_and_the_counter_stays_right(page):
    open_drill(page, "dpo-loss")
    _counter_ok(page)
    first = _masked(page)
    seen = {tuple(first)}
    for _ in range(4):
        with page.expect_response(lambda r: "/api/cloze/" in r.url) as drawn:
            page.click("#refresh-btn")
        # wait until the page shows this draw's masks (the response is applied after it arrives)
        page.wait_for_function("keys => JSON.stringify([...document.querySelectorAll('input.mask')]"
                               ".map(e => e.dataset.key).sort()) === JSON.stringify([...keys].sort())",
                               arg=drawn.value.json()["masked"])
        _counter_ok(page)
        seen.add(tuple(_masked(page)))
    assert len(seen) > 1, "refresh never changed the masks"
    # a larger ratio masks more, and the counter follows
    before = len(_masked(page))
    page.eval_on_selector("#ratio", "el => { el.value = 0.5; el.dispatchEvent(new Event('input')); "
                                    "el.dispatchEvent(new Event('change')); }")
    page.wait_for_function(f"document.querySelectorAll('input.mask').length > {before}")
    _counter_ok(page)
    assert page.inner_text("#ratio-value") == "50%"
    # answer with the true tokens: every mark turns green
    tokens = {p.key: p.token for p in cz.maskable_positions(cz.snippet_source(DPO))}
    for key in _masked(page):
        page.fill(f'input.mask[data-key="{key}"]', tokens[key])
    page.click("#cloze-check-btn")
    page.wait_for_selector("#cloze-score:not([hidden])")
    total = len(_masked(page))
    assert page.inner_text("#cloze-score") == f"{total}/{total} right"
    assert page.locator("input.mask.ok").count() == total
    shot(page, "cloze")


def test_toy_grpo_chart_grows_and_overlays_runs(page):
    page.goto("/toy-grpo")
    assert page.locator("#chart-empty").is_visible()  # an empty chart says how to start
    assert page.get_attribute("#chart-p", "data-target") == "0.7"  # the exercise's 0.70 target is drawn
    page.fill("#iterations", "30")
    page.click("#run-btn")
    assert page.locator("#run-btn").is_disabled()  # no second run while one trains
    page.wait_for_selector("#chart-empty", state="hidden")
    counts = []
    deadline = time.time() + 150  # the first run also imports torch and transformers
    while time.time() < deadline:
        n = int(page.get_attribute("#chart-p", "data-points"))
        if not counts or n != counts[-1]:
            counts.append(n)
        if n >= 30:
            break
        page.wait_for_timeout(100)
    assert counts[-1] == 30, counts
    assert any(0 < c < 30 for c in counts), f"the chart did not grow point by point: {counts}"
    page.wait_for_function("document.getElementById('legend').innerText.includes('→')")
    page.wait_for_function("!document.getElementById('run-btn').disabled")  # enabled again when the run ends
    page.click("#run-btn")  # the next seed overlays a second curve
    page.wait_for_function("document.getElementById('chart-p').dataset.points === '60'", timeout=60_000)
    page.wait_for_function("document.querySelectorAll('#legend li').length === 2 && "
                           "document.getElementById('legend').innerText.split('→').length === 3")
    assert page.get_attribute("#chart-p", "data-runs") == "2"
    final = page.inner_text("#legend")
    assert re.search(r"seed 0\b.*→ 0\.\d\d", final) and re.search(r"seed 1\b.*→ 0\.\d\d", final)
    painted = page.evaluate("""() => { const c = document.getElementById('chart-p');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 0; i < d.length; i += 4) if (d[i+3] && (d[i] !== d[i+1] || d[i+1] !== d[i+2])) n++;
        return n; }""")
    assert painted > 200  # coloured curve pixels, not just the grey axes
    shot(page, "toy-grpo")
    page.goto("/toy-grpo?lang=zh")  # the runs come back with the page (kept in the server), in Chinese
    assert page.get_attribute("#chart-p", "data-points") == "60"
    assert "种子 0：" in page.inner_text("#legend")
    shot(page, "toy-grpo-zh")


def test_progress_page_shows_solved_and_exports(page):
    r = page.request.post("/api/exercises/dpo-loss/check", data={"fills": DPO_FILLS})  # solved, whatever ran before
    assert r.ok and r.json()["passed"]
    page.goto("/progress")
    row = page.locator('tr[data-id="dpo-loss"]')
    assert "solved" in row.get_attribute("class")
    with page.expect_download() as dl:
        page.click("#export-link")
    data = json.loads(Path(dl.value.path()).read_text(encoding="utf-8"))
    assert data["format"] == "alignlings-progress" and any(a["exercise"] == "dpo-loss" for a in data["attempts"])
    shot(page, "progress")
    page.set_input_files("#import-file", dl.value.path())  # importing the same export again: nothing new
    page.wait_for_function("document.getElementById('import-status').innerText.length > 0")
    assert page.inner_text("#import-status") == "Imported."
    page.goto("/?lang=zh")
    page.goto("/progress")
    shot(page, "progress-zh")



# -- issue 10: feedback in the learner's own terms ----------------------------------------------
GRPO = PACK.get("grpo-loss")


def _verdict_text(page) -> str:
    return page.inner_text("#verdict") + page.inner_text("#code")


def test_empty_blank_and_syntax_error_speak_of_todos_and_displayed_lines(page):
    fills = list(DPO_FILLS)
    fills[1] = ""
    page.goto("/exercises/dpo-loss")
    fill_blanks(page, fills[:1])
    page.fill("#blank-2", "")
    for i in (3, 4):
        page.fill(f"#blank-{i}", fills[i - 1])
    page.click("#check-btn")
    page.wait_for_selector(".verdict.failed")
    text = _verdict_text(page)
    assert "TODO 2 is still empty" in page.inner_text('.blank-fb[data-index="2"]')
    assert "NameError" not in text and "_____" not in text and "exercise.py" not in text
    assert "not run yet: fill TODO 2 first" in page.inner_text("#cases")
    # a syntax error points at the line the page displays, and at the TODO on it
    page.fill("#blank-2", "((")
    page.click("#check-btn")
    page.wait_for_function("document.getElementById('verdict-error').innerText.includes('line')")
    error = page.inner_text("#verdict-error")
    shown = int(re.search(r"line (\d+)", error).group(1))
    assert "TODO 2" in error and "exercise.py" not in error
    line = page.locator(f'pre.code .line[data-line="{shown}"]')
    assert line.locator("#blank-2").count() == 1, (error, line.inner_text())
    assert "does not parse" in page.inner_text('.blank-fb[data-index="2"]')
    assert "exercise.py" not in page.inner_text('.blank-fb[data-index="2"]')


def test_first_failing_case_scalar_numbers_and_misconception_first(page):
    m = next(m for m in DPO.misconceptions if m.blank == 1)
    fills = list(DPO_FILLS)
    fills[0] = m.fill
    page.goto("/exercises/dpo-loss")
    page.set_viewport_size({"width": 1280, "height": 500})  # the verdict starts below the fold
    fill_blanks(page, fills)
    page.evaluate("window.scrollTo(0, 0)")
    page.click("#check-btn")
    page.wait_for_selector(".verdict.failed")
    page.wait_for_function("(() => { const r = document.getElementById('verdict').getBoundingClientRect();"
                           " return r.top >= 0 && r.top < window.innerHeight; })()")  # scrolled into view
    assert page.locator("#cases li").count() == 1  # the first failing case only
    assert page.locator("#all-cases-btn").is_visible()
    page.click("#all-cases-btn")
    assert page.locator("#cases li").count() > 1
    assert page.get_attribute("#all-cases-btn", "aria-expanded") == "true"
    # what is wrong comes before any number, and a scalar has no index
    wrong = page.inner_text("#verdict-wrong")
    assert m.feedback["en"][:40] in wrong
    verdict = page.inner_text("#verdict")
    assert verdict.index(m.feedback["en"][:40]) < verdict.index("expected")
    # the blank's own values, recorded in the learner's run (a [B] vector here: each element named)
    fb = page.inner_text('.blank-fb[data-index="1"]')
    assert re.search(r"\[0\] expected -?\d\.\d+, got -?\d\.\d+", fb), fb
    assert "[]" not in fb and "first:" not in fb


def test_pass_offers_the_next_exercise_and_marks_survive_a_reload(page):
    order = list(PACK.exercises)
    nxt = PACK.get(order[order.index("dpo-loss") + 1])
    page.goto("/exercises/dpo-loss")
    assert nxt.title["en"] in page.inner_text(".crumbs")  # prev/next show titles, not ids
    fill_blanks(page, DPO_FILLS)
    page.click("#check-btn")
    page.wait_for_selector(".verdict.passed")
    link = page.locator("#next-exercise")
    assert link.is_visible() and nxt.title["en"] in link.inner_text()
    assert link.get_attribute("href") == f"/exercises/{nxt.id}"
    page.reload()
    assert page.locator(".mark.ok").count() == len(DPO_FILLS)  # the last marks come back with the fills
    assert [page.input_value(f"#blank-{i + 1}") for i in range(len(DPO_FILLS))] == DPO_FILLS


def test_reveal_asks_first_and_shows_the_fills_with_the_explanation(page):
    page.goto("/exercises/grpo-advantages")
    page.click("#reveal-btn")
    assert page.locator("#reveal-confirm").is_visible() and page.locator("#solution").is_hidden()
    page.click("#reveal-no")
    assert page.locator("#reveal-confirm").is_hidden() and page.locator("#solution").is_hidden()
    page.click("#reveal-btn")
    page.click("#reveal-yes")
    page.wait_for_selector("#solution:not([hidden])")
    ex = PACK.get("grpo-advantages")
    answers = [b.answer for b in bl.find_blanks(ex.solution_source)]
    text = page.inner_text("#solution-code")
    assert all(a.splitlines()[0].strip() in text for a in answers)
    assert "__main__" not in text and "import torch" not in text  # the fills, not the whole file
    assert page.locator("#explanation").inner_text().strip()


def test_first_blank_has_focus_and_a_skip_link_leads_to_the_code(page):
    page.goto("/exercises/grpo-loss")
    assert page.evaluate("document.activeElement.classList.contains('blank')")
    skip = page.locator("a.skip-link")
    assert skip.get_attribute("href") == "#code"
    if PACK.get("grpo-loss").cloze:
        assert "/cloze/grpo-loss" in page.inner_html("#cloze-suggest")  # drill suggested after the fill-in


def test_quiz_answers_and_score_survive_a_reload_and_retake_clears_them(page):
    quiz = next(ex for ex in PACK if ex.kind == "quiz")
    q = quiz.quiz[0]
    page.goto("/quiz")
    if page.locator("#retake-btn").is_visible():  # an earlier test answered: start a new round
        page.click("#retake-btn")
        page.wait_for_function("document.querySelectorAll('article.question[data-answered]').length === 0")
    assert "counts as solved" in page.inner_text("#quiz-rule")
    page.locator(f'article.question:not([hidden]) button.option[data-choice="{q.answer}"]').click()
    page.wait_for_selector("article.question .q-result:not([hidden])")
    page.reload()
    card = page.locator(f'article.question[data-qid="{q.id}"]')
    assert card.get_attribute("data-answered") == "right"
    assert f"1 of {len(quiz.quiz)} answered, 1 right" in page.inner_text("#quiz-progress")
    assert page.locator("article.question:not([hidden])").get_attribute("data-qid") == quiz.quiz[1].id
    page.click("#retake-btn")
    page.wait_for_function("document.querySelectorAll('article.question[data-answered]').length === 0")
    page.reload()
    assert page.locator("article.question[data-answered]").count() == 0
    assert page.locator("#retake-btn").is_hidden()


def test_drill_of_an_unsolved_exercise_warns_and_counts_as_seen(page):
    page.goto("/cloze/grpo-loss")
    assert page.locator("#cloze-gate").is_visible() and page.locator("#cloze-code").count() == 0
    shot(page, "cloze-gate")
    page.click("#open-anyway")
    page.wait_for_selector("#cloze-code input.mask")
    assert page.request.get("/api/progress").json()["summary"]["grpo-loss"]["revealed"]
    widths = set(page.eval_on_selector_all("input.mask", "els => els.map(e => e.offsetWidth)"))
    assert len(widths) == 1  # every box alike: the width does not give the token away
    first = page.locator("input.mask").first
    assert re.match(r"Blank 1 of \d+, line \d+: ", first.get_attribute("aria-label"))
    assert page.locator(".mask-n").first.inner_text() == "1"
    before = first.evaluate("e => e.offsetWidth")
    first.fill("a_rather_long_answer_here")
    assert first.evaluate("e => e.offsetWidth") > before  # grows as you type
    # Not a plain identifier: the page's draw is random, and where it masks a name that nothing reads
    # (grpo-loss has `bs, seq_len = pi_logprob.shape`), any identifier is a rename that behaves the
    # same, so it is rightly accepted as "≡ seq_len". Two words never parse at a token's place: wrong
    # at every position the draw can pick.
    first.fill("definitely wrong")
    page.click("#cloze-check-btn")
    page.wait_for_selector("#cloze-score:not([hidden])")
    assert "bad" in first.get_attribute("class")
    key = first.get_attribute("data-key")
    token = {p.key: p.token for p in cz.maskable_positions(cz.snippet_source(GRPO))}[key]
    right = page.locator(f'.right-token[data-key="{key}"]')
    assert right.is_visible() and right.inner_text() == token  # the right token, in place


PAGES = ["/", "/quiz", "/exercises/dpo-loss", "/exercises/grpo-loss", "/exercises/toy-grpo", "/cloze/dpo-loss",
         "/cloze/reward-model", "/toy-grpo", "/toy-dpo", "/toy-ppo", "/review", "/progress",
         *[f"/exercises/{ex.id}" for ex in PACK if ex.id not in ("dpo-loss", "grpo-loss", "toy-grpo")]]
SERIOUS = ("moderate", "serious", "critical")  # moderate too (issue 33: heading levels, landmark names)


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["1280", "390"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_page_is_accessible_fits_a_phone_and_is_screenshotted(browser, server, lang, size):
    """axe-core: no violation of moderate impact or worse; at 390 px nothing pushes the page sideways;
    a screenshot of each page in each language at each size."""
    from axe_playwright_python.sync_playwright import Axe

    axe = Axe()
    context = browser.new_context(viewport={"width": size[0], "height": size[1]}, base_url=server)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    problems = []
    try:
        pg.goto(f"/?lang={lang}")
        for path in dict.fromkeys(PAGES):
            pg.goto(path)
            pg.wait_for_load_state("networkidle")
            name = (path.strip("/").replace("/", "-") or "home") + f"-{lang}-{size[0]}"
            shot(pg, name)
            if size[0] <= 400:
                over = pg.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
                if over > 0:
                    problems.append(f"{path}: {over} px of horizontal overflow")
                # every menu item (Review and its badge included) on the first screen, in at most two rows
                rows = pg.evaluate("new Set([...document.querySelectorAll('header.top nav a')].map(a => "
                                   "Math.round(a.getBoundingClientRect().top))).size")
                outside = pg.evaluate("[...document.querySelectorAll('header.top nav a')].filter(a => "
                                      "a.getBoundingClientRect().right > document.documentElement.clientWidth)"
                                      ".map(a => a.textContent)")
                if rows > 2 or outside:
                    problems.append(f"{path}: the header menu takes {rows} rows, outside the screen: {outside}")
            result = axe.run(pg)
            for v in result.response["violations"]:
                if v["impact"] in SERIOUS:
                    targets = [n["target"] for n in v["nodes"][:3]]
                    problems.append(f"{path}: {v['id']} ({v['impact']}): {v['help']} {targets}")
    finally:
        context.close()
    assert not errors, errors
    assert not problems, "\n".join(problems)


ZH_LEAKS = ["level", "Check", "Cases", "expected", "Hint", "Reveal", "Next exercise", "solved", "Run", "Import"]


def test_chinese_pages_have_no_english_interface_words(page):
    m = next(m for m in DPO.misconceptions if m.blank == 1)
    fills = list(DPO_FILLS)
    fills[0] = m.fill
    page.goto("/exercises/dpo-loss?lang=zh")
    fill_blanks(page, fills)
    page.click("#check-btn")
    page.wait_for_selector(".verdict.failed")
    page.click("#all-cases-btn")
    verdict = page.inner_text("#verdict")
    assert "期望" in page.inner_text('.blank-fb[data-index="1"]')
    assert "：" in verdict and "用例" in verdict
    chrome = page.inner_text("header") + page.inner_text(".actions") + page.inner_text(".title-tags") + verdict
    for word in ZH_LEAKS:
        assert not re.search(rf"\b{word}\b", chrome), (word, chrome)
    shot(page, "exercise-verdict-zh")
    page.goto("/toy-grpo?lang=zh")
    assert "运行" in page.inner_text("#run-btn") and "点击" in page.inner_text("#chart-empty")
