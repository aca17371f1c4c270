"""Issue 33 in a real browser (Debian's Chromium through Playwright): pages that grow still fit a phone.

After every change a learner makes a page go through (a verdict, a hint, the revealed answer with its
inline gradient formula, a predict result with its chart's screen-reader table, a bug diff, a quiz
answer, a toy run) the page is no wider than the window, at 1280×800 and at 390×844, in English and
Chinese; axe-core finds no violation of moderate impact or worse at each of those moments. A screenshot
of each state goes to test-artifacts/screenshots/. Never downloads a browser: without /usr/bin/chromium
it skips."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")

from serving import CHROMIUM_ARGS, served  # noqa: E402  (tests/serving.py)

from alignlings.content import blanks as bl  # noqa: E402
from alignlings.content import bugdrill  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-artifacts" / "screenshots"
PACK = load_pack(None)
DPO = PACK.get("dpo-loss")
DRILL = PACK.get("scale-rewards-batch")
MODERATE = ("moderate", "serious", "critical")
SIZES = [(1280, 800), (390, 844)]
DATE = {"en": r"\b\d{4}-\d{2}-\d{2} \d{2}:\d{2}\b", "zh": r"\d{4}年\d{1,2}月\d{1,2}日 \d{2}:\d{2}"}
BUG_OR_NOT = dict(zip([("en", 1280), ("en", 390), ("zh", 1280), ("zh", 390)],
                      [ex.id for ex in PACK if ex.kind == "bug-or-not"], strict=False))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with served([], tmp_path_factory.mktemp("alignlings-home"), start_s=60, ready_s=180) as (url, _):
        yield url


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


class Audit:
    """Width and axe after each change; every problem is collected, so one run names them all."""

    def __init__(self, pg, lang: str, size: tuple[int, int]):
        self.pg, self.lang, self.size, self.problems = pg, lang, size, []

    def __call__(self, moment: str) -> None:
        from axe_playwright_python.sync_playwright import Axe

        pg = self.pg
        over = pg.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        if over > 0:
            wide = pg.evaluate("[...document.querySelectorAll('main *')].filter(e => e.getBoundingClientRect().right"
                               " > document.documentElement.clientWidth + 1 && !e.closest('.math-inline, .math-display,"
                               " pre, .table-scroll, .visually-hidden')).slice(0, 3).map(e => e.outerHTML.slice(0, 80))")
            self.problems.append(f"{moment}: {over} px wider than the window: {wide}")
        for v in Axe().run(pg).response["violations"]:
            if v["impact"] in MODERATE:
                targets = [n["target"] for n in v["nodes"][:3]]
                self.problems.append(f"{moment}: {v['id']} ({v['impact']}): {v['help']} {targets}")
        SHOTS.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(SHOTS / f"grown-{moment}-{self.lang}-{self.size[0]}.png"), full_page=True)


def fill_blanks(pg, fills: list[str]) -> None:
    for i, fill in enumerate(fills, 1):
        pg.fill(f"#blank-{i}", fill)


@pytest.mark.parametrize("size", SIZES, ids=["1280", "390"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_page_that_grows_still_fits_and_stays_accessible(browser, server, lang, size):
    context = browser.new_context(viewport={"width": size[0], "height": size[1]}, base_url=server)
    pg = context.new_page()
    pg.set_default_timeout(60_000)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    audit = Audit(pg, lang, size)
    try:
        pg.goto(f"/?lang={lang}")
        audit("home")

        # a fill-in: a wrong blank's verdict, a hint, the revealed answer (its inline gradient formula)
        pg.goto("/exercises/dpo-loss")
        fills = [b.answer for b in bl.find_blanks(DPO.solution_source)]
        m = next(m for m in DPO.misconceptions if m.blank == 1)
        fill_blanks(pg, [m.fill, *fills[1:]])
        pg.click("#check-btn")
        pg.wait_for_selector(".verdict.failed")
        audit("verdict")
        pg.click("#hint-btn")
        pg.wait_for_selector("#hint-list li")
        audit("hint")
        pg.click("#reveal-btn")
        pg.click("#reveal-yes")
        pg.wait_for_selector("#solution:not([hidden])")
        audit("reveal")

        # a predict item: the result (inline math in "Why", the chart and its table for screen readers)
        pg.goto("/exercises/predict-k3-gradient")
        pg.get_by_role("radio").first.check()
        pg.locator("form.predict-form button[type=submit]").first.click()
        pg.wait_for_selector(".predict-result")
        audit("predict-result")

        # a bug drill: a wrong fix, its diff and the failing cases
        pg.goto(f"/exercises/{DRILL.id}")
        wrong = DRILL.wrong_fixes[0]
        pg.locator("#bug-editor").fill(bugdrill.apply_wrong_fix(DRILL, wrong))
        pg.click("#check-btn")
        pg.wait_for_selector("#bug-diff .diff-add")
        pg.wait_for_selector("#verdict:not([hidden])")
        audit("bug-diff")

        # bug or not: an answer shows every option's explanation (a drill this run has not answered yet)
        pg.goto(f"/exercises/{BUG_OR_NOT[(lang, size[0])]}")
        pg.locator("article.question:not([hidden]) button.option").first.click()
        pg.wait_for_selector("article.question:not([hidden]) .why:not([hidden])")
        audit("bug-or-not-answer")

        # review: its counts (one date format per language) and, with nothing due, something to do
        pg.goto("/review")
        pg.wait_for_function("document.getElementById('review-counts').textContent.length > 0")
        counts = pg.locator("#review-counts").inner_text()
        assert not re.search(r"\d+/\d+/\d{4}", counts), counts  # not 03/12/2026 (March 12 to many readers)
        if re.search(r"\d{4}", counts):
            assert re.search(DATE[lang], counts), counts
        if pg.locator("#review-item").is_hidden():
            assert pg.locator("#review-offer a").count() >= 1 and pg.locator("#review-offer").is_visible()
        audit("review")

        # a toy run: the chart, its legend and the run's summary
        pg.goto("/toy-grpo")
        pg.fill("#iterations", "3")
        pg.click("#run-btn")
        pg.wait_for_function("Number(document.getElementById('chart-p').dataset.points) >= 3", timeout=240_000)
        pg.wait_for_function("!document.getElementById('run-btn').disabled")
        audit("toy-run")

        pg.goto("/exercises/no-such-exercise")
        audit("not-found")
    finally:
        context.close()
    assert not errors, errors
    assert not audit.problems, "\n".join(audit.problems)
