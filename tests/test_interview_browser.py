"""The Interview page in a real browser (Debian's Chromium through Playwright), in English and Chinese,
at 1280×800 and 390×844: start from the form, answer a question, check a file (the real grader),
finish, read the report. The page never grows wider than the phone after any of these; axe-core
finds no serious or critical violation on the running interview or the report."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")

from serving import served  # noqa: E402  (tests/serving.py)
from test_predict_browser import axe_problems, browser  # noqa: E402, F401  (Chromium; axe's serious violations)

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-artifacts" / "screenshots"
TEXTS = {"en": {"start": "Start the interview", "chosen": "Your choice is recorded.", "finish": "Finish and see the report",
                "report": "Report", "fails": "cases fail"},
         "zh": {"start": "开始面试", "chosen": "你的选择已记录。", "finish": "结束并查看报告", "report": "报告",
                "fails": "个用例中"}}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with served([], tmp_path_factory.mktemp("alignlings-home"), start_s=60, ready_s=180) as (url, _):
        yield url


def fits(pg, width: int) -> None:
    assert pg.evaluate("document.documentElement.scrollWidth") <= width, "the page is wider than the window"


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["1280", "390"])
def test_an_interview_from_start_to_report(browser, server, lang, size):  # noqa: F811 - the fixture
    context = browser.new_context(viewport={"width": size[0], "height": size[1]}, base_url=server)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    tx = TEXTS[lang]
    pg.goto(f"/interview?lang={lang}")
    fits(pg, size[0])
    pg.fill("#iv-minutes", "20")
    pg.fill("#iv-seed", "21")
    pg.get_by_role("button", name=tx["start"]).click()
    pg.wait_for_selector("#interview-clock")
    fits(pg, size[0])
    assert axe_problems(pg) == []
    first = pg.locator("article.interview-item").nth(0)
    first.locator("input[type=radio]").first.check()
    first.locator(".iv-submit").click()
    pg.wait_for_function("(t) => document.querySelector('article.interview-item .iv-status').textContent === t",
                         arg=tx["chosen"])
    fits(pg, size[0])
    code = pg.locator("article.interview-item[data-kind=file]").first
    code.locator(".iv-submit").click()  # the template as it is: it fails, and says how many cases
    code.locator(".iv-status").filter(has_text=tx["fails"]).wait_for(timeout=120_000)
    fits(pg, size[0])
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(SHOTS / f"interview-running-{lang}-{size[0]}.png"), full_page=True)
    pg.get_by_role("button", name=tx["finish"]).click()
    pg.wait_for_selector("#interview-report")
    assert tx["report"] in pg.locator("#interview-report h2").inner_text()
    fits(pg, size[0])
    assert axe_problems(pg) == []
    pg.screenshot(path=str(SHOTS / f"interview-report-{lang}-{size[0]}.png"), full_page=True)
    assert errors == []
    context.close()
