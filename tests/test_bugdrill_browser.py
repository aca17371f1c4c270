"""The spot-the-bug drill page in a real browser (Debian's headless Chromium through Playwright):
the whole file in an editor with line numbers, a wrong fix named with its feedback and a hint toward
the region, the diff of the learner's change, and the story of the real bug once solved.
Never downloads a browser: without /usr/bin/chromium the test skips."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")
httpx = pytest.importorskip("httpx")

from serving import CHROMIUM_ARGS, served  # noqa: E402  (tests/serving.py)

from alignlings.content import bugdrill  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402

PACK = load_pack("bug-drills")
EX = PACK.get("scale-rewards-batch")
ARGS = CHROMIUM_ARGS


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with served(["--pack", "bug-drills"], tmp_path_factory.mktemp("alignlings-home"), start_s=60,
                ready_s=120) as (url, _):
        yield url


@pytest.fixture(scope="module")
def page(server):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page()
        pg.set_default_timeout(90_000)
        yield pg
        browser.close()


def test_bug_drill_page_wrong_fix_diff_and_story(server, page):
    page.goto(f"{server}/exercises/scale-rewards-batch?lang=en")
    editor = page.locator("#bug-editor")
    assert editor.input_value() == EX.buggy_source
    n_lines = len(EX.buggy_source.split("\n"))
    assert page.locator("#bug-gutter").text_content().split("\n")[-1] == str(n_lines)
    page.wait_for_function("document.getElementById('bug-changes').textContent.length > 0")
    assert page.locator("#bug-changes").text_content() == bugdrill.msg("unchanged", "en")
    assert page.locator("#story").is_hidden()

    wrong = next(f for f in EX.wrong_fixes if f.id == "batch-mean-too")
    editor.fill(bugdrill.apply_wrong_fix(EX, wrong))
    page.click("#check-btn")
    page.wait_for_selector("#bug-notes .bug-message")
    assert page.locator("#bug-notes .bug-message").get_attribute("data-wrong-fix") == "batch-mean-too"
    assert page.locator("#bug-notes .bug-message").text_content() == wrong.feedback["en"]
    assert page.locator("#bug-notes .bug-hint").text_content().startswith("You are looking in the right place")
    page.wait_for_selector("#bug-diff .diff-add")
    assert "rewards.mean().expand_as(rewards)" in page.locator("#bug-diff .diff-add").all_text_contents()[-1]
    assert page.locator("#bug-diff .diff-del").count() == 1
    assert page.locator("#cases li.bad").count() >= 1

    editor.fill(EX.solution_source)
    page.click("#check-btn")
    page.wait_for_selector("#story:not([hidden])")
    assert "#3991" in page.locator("#story-body").text_content()
    assert page.locator("#solved-badge").is_visible()
    assert page.locator("#cases li.bad").count() == 0
    os.makedirs("test-artifacts/screenshots", exist_ok=True)
    page.screenshot(path="test-artifacts/screenshots/bug-drill.png", full_page=True)

    page.goto(f"{server}/exercises/scale-rewards-batch?lang=zh")  # solved: the last file and the story stay
    assert page.locator("#bug-editor").input_value() == EX.solution_source
    assert page.locator("#story").is_visible() and "TRL issue #3991" in page.locator("#story-body").text_content()


def test_bug_or_not_drill_is_answered_on_the_quiz_page(server, page):
    page.goto(f"{server}/exercises/grpo-loss-zero?lang=en")
    assert "Is this a bug, or expected?" in page.content()
    assert page.locator("pre code, pre").first.is_visible()
