"""A predict item in a real browser (Debian's Chromium through Playwright), in English and Chinese,
at 1280×800 and 390×844: the question, a commit through the plain HTML form (also with JavaScript
off), then the result with its chart and the explanation. axe-core: no serious or critical
violation before or after the commit. Screenshots go to test-artifacts/screenshots/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")

from serving import CHROMIUM_ARGS, served  # noqa: E402  (tests/serving.py)
from test_predict import make_pack  # noqa: E402  (the toy pack with one predict item)

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-artifacts" / "screenshots"
SERIOUS = ("serious", "critical")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    pack = make_pack(tmp_path_factory.mktemp("predict-pack") / "toy")
    with served(["--pack", str(pack)], tmp_path_factory.mktemp("alignlings-home"), start_s=60, ready_s=180) as (url, _):
        yield url


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


def axe_problems(pg) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    result = Axe().run(pg)
    return [f"{v['id']} ({v['impact']}): {v['help']} {[n['target'] for n in v['nodes'][:3]]}"
            for v in result.response["violations"] if v["impact"] in SERIOUS]


TEXTS = {"en": {"commit": "Commit and run", "verdict": "You predicted C: the run supports B.",
                "result": "slow ends at 0.25, fast at 0.75.", "why": "Because fast has the larger slope."},
         "zh": {"commit": "提交并运行", "verdict": "你预测的是 C：运行结果支持的是 B。",
                "result": "slow 最终为 0.25，fast 为 0.75。", "why": "因为 fast 的斜率更大。"}}


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["1280", "390"])
def test_question_commit_result_in_both_languages_and_sizes(browser, server, lang, size):
    context = browser.new_context(viewport={"width": size[0], "height": size[1]}, base_url=server)
    pg = context.new_page()
    pg.set_default_timeout(45_000)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    try:
        pg.goto(f"/exercises/predict-toy?lang={lang}")
        t = TEXTS[lang]
        assert t["why"] not in pg.content() and t["result"] not in pg.content()  # nothing before the commit
        assert axe_problems(pg) == []
        pg.get_by_role("radio").nth(2).check()  # the label is the radio's accessible name
        pg.get_by_role("button", name=t["commit"]).click()
        pg.wait_for_selector(".predict-result")
        assert pg.locator(".verdict-head").inner_text() == t["verdict"]
        assert pg.locator(".predict-result-text").inner_text() == t["result"]
        assert pg.locator("svg.predict-svg").is_visible()
        assert pg.locator("figure table.visually-hidden tbody tr").count() == 10  # the chart's numbers, for screen readers
        assert t["why"] in pg.locator(".predict-explanation").inner_text()
        box = pg.locator("svg.predict-svg").bounding_box()
        assert box is not None and box["width"] <= size[0]  # the chart fits a phone's width
        SHOTS.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(SHOTS / f"predict-{lang}-{size[0]}.png"), full_page=True)
        assert axe_problems(pg) == []
    finally:
        context.close()
    assert not errors, errors


def test_the_form_works_without_javascript(browser, server):
    context = browser.new_context(java_script_enabled=False, base_url=server)
    pg = context.new_page()
    try:
        pg.goto("/exercises/predict-toy?lang=en")
        pg.get_by_role("radio").nth(1).check()
        pg.get_by_role("button", name="Commit and run").click()
        pg.wait_for_selector(".predict-result")
        assert pg.locator(".verdict-head").inner_text() == "You predicted B: the run supports it."
    finally:
        context.close()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_review_asks_the_prediction_again_then_shows_the_run(browser, server, lang):
    """After the commits above the item has been met: practising its concept asks it as a quiz
    question, then shows the (cached) run, its chart and the explanation."""
    context = browser.new_context(viewport={"width": 390, "height": 844}, base_url=server)
    pg = context.new_page()
    pg.set_default_timeout(45_000)
    try:
        pg.goto(f"/review?concept=toy-tag&lang={lang}")
        pg.locator("button.option").nth(1).click()
        pg.wait_for_selector(".predict-review")
        assert TEXTS[lang]["result"] in pg.locator(".predict-review").inner_text()
        assert TEXTS[lang]["why"] in pg.locator(".predict-review").inner_text()
        assert pg.locator("figure.predict-chart svg.predict-svg").is_visible()
        assert axe_problems(pg) == []
    finally:
        context.close()
