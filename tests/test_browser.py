"""The web app end to end in a real browser: Debian's headless Chromium driven by Playwright.

A real server (``alignlings serve`` in a subprocess, on a free loopback port, with a temporary
ALIGNLINGS_HOME) and the real engine. Never downloads a browser: without /usr/bin/chromium the
tests skip. Screenshots of every page go to test-artifacts/screenshots/.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")
httpx = pytest.importorskip("httpx")

from alignlings.practice import blanks as bl  # noqa: E402
from alignlings.practice import cloze as cz  # noqa: E402
from alignlings.practice.pack import load_pack  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-artifacts" / "screenshots"
PACK_PATH = os.environ.get("ALIGNLINGS_WEB_TEST_PACK")  # default: the built-in pack
PACK = load_pack(PACK_PATH)
DPO = PACK.get("dpo-loss")
DPO_FILLS = [b.answer for b in bl.find_blanks(DPO.solution_source)]
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--disable-dev-shm-usage"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`alignlings serve --port 0 --no-browser` in a subprocess; yields its base URL."""
    home = tmp_path_factory.mktemp("alignlings-home")
    env = {**os.environ, "ALIGNLINGS_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-c", "from alignlings.cli.app import main; main()", "serve", "--port", "0", "--no-browser"]
    if PACK_PATH:
        cmd += ["--pack", PACK_PATH]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    found = threading.Event()

    def read():
        for line in proc.stdout:
            lines.append(line)
            if "serving at" in line:
                found.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        if not found.wait(60):
            pytest.fail("the server did not start:\n" + "".join(lines))
        url = re.search(r"(http://\S+)", next(line for line in lines if "serving at" in line)).group(1).rstrip("/")
        deadline = time.time() + 120
        while time.time() < deadline:  # up, and the warm grader ready (it starts in the background)
            try:
                if httpx.get(f"{url}/api/health", timeout=2).json()["grader"] == "ready":
                    break
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


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
    assert PACK.get("dpo-loss").title["zh"] in page.inner_text(".exercise-list")
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


def test_cloze_refresh_draws_new_masks_and_the_counter_stays_right(page):
    page.goto("/cloze/dpo-loss")
    _counter_ok(page)
    first = _masked(page)
    seen = {tuple(first)}
    for _ in range(4):
        with page.expect_response(lambda r: "/api/cloze/" in r.url):
            page.click("#refresh-btn")
        page.wait_for_timeout(50)  # the response is applied to the page right after it arrives
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
    page.fill("#iterations", "30")
    page.click("#run-btn")
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
