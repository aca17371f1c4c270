"""Levels 4 and 5 on the exercise page in a real browser (Debian's headless Chromium through
Playwright): the level switch, dpo-loss written from the statement at level 5 in English and in
Chinese (a known mistake named first, then a pass), and each level's work kept apart. Never
downloads a browser: without /usr/bin/chromium the test skips."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")

from serving import CHROMIUM_ARGS, served  # noqa: E402  (tests/serving.py)

from alignlings.grading import levels  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402

EX = load_pack().get("dpo-loss")

BODY = ("    margin = beta * ((policy_chosen_logp - ref_chosen_logp) - (policy_rejected_logp - ref_rejected_logp))\n"
        "    return -F.logsigmoid(margin).mean()\n")
NO_BETA = BODY.replace("margin = beta * (", "margin = (")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with served(["--pack", "dpo-grpo"], tmp_path_factory.mktemp("alignlings-home"), start_s=60, ready_s=120) as (url, _):
        yield url


@pytest.fixture(scope="module")
def browser(server):
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def page(browser):
    pg = browser.new_page()
    pg.set_default_timeout(90_000)
    return pg


def write(page, lang: str, body: str) -> None:
    """The level-5 file in ``lang`` with ``body`` written in place of the learner's part."""
    page.locator("#level-editor").fill(levels.level_file(EX, 5, lang).replace("    raise NotImplementedError\n", body))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_dpo_loss_written_from_the_statement_at_level_five(server, page, lang):
    page.goto(f"{server}/exercises/dpo-loss?lang={lang}")
    switch = page.locator("#level-switch a")
    assert switch.count() == 3
    switch.nth(2).click()  # level 5
    page.wait_for_selector("#level-editor")
    assert page.url.endswith("?level=5")
    start = page.locator("#level-editor").input_value()
    if lang == "en":  # the first visit: the generated file; later ones: the last file checked at level 5
        assert start == levels.level_file(EX, 5, "en")
        assert "# TODO" not in start and "chosen_implicit_r =" not in start
    else:
        assert "-F.logsigmoid(margin).mean()" in start
    assert ("根据题目描述" in page.content()) == (lang == "zh")

    write(page, lang, NO_BETA)
    page.click("#check-btn")
    page.wait_for_selector("#level-misconception:not([hidden])")
    message = page.locator("#level-misconception").text_content()
    assert message.startswith("你的输出与一个已知错误完全一致" if lang == "zh" else "Your outputs equal those of a known mistake")
    assert page.locator("#cases li.bad").count() >= 1
    assert page.locator("#solved-badge").is_hidden() == (lang == "en")  # once solved, a level stays solved

    write(page, lang, BODY)
    page.click("#check-btn")
    page.wait_for_selector("#verdict-head.ok")
    assert page.locator("#cases li.bad").count() == 0 and page.locator("#level-misconception").is_hidden()
    assert page.locator("#solved-badge").is_visible()
    assert page.locator('#level-switch a[data-level="5"]').text_content().endswith("✓")
    os.makedirs("test-artifacts/screenshots", exist_ok=True)
    page.screenshot(path=f"test-artifacts/screenshots/level5-{lang}.png", full_page=True)

    # each level keeps its own work: level 4 starts from its own file, level 5 comes back as written
    page.goto(f"{server}/exercises/dpo-loss?level=4&lang={lang}")
    assert "# TODO 1:" in page.locator("#level-editor").input_value()
    page.locator("#level-editor").fill(page.locator("#level-editor").input_value() + "\n# my notes\n")
    page.goto(f"{server}/exercises/dpo-loss?level=5&lang={lang}")
    assert "-F.logsigmoid(margin).mean()" in page.locator("#level-editor").input_value()
    page.goto(f"{server}/exercises/dpo-loss?level=4&lang={lang}")  # an unchecked draft is kept in the browser
    assert page.locator("#level-editor").input_value().endswith("# my notes\n")
    assert page.locator("#draft-note").is_visible()
    page.evaluate("localStorage.clear()")


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["1280", "390"])
def test_the_level_pages_are_accessible_and_fit_a_phone(server, browser, size):
    """axe-core: no serious or critical violation on the fill-in page with its level switch and on
    both level pages, in both languages; at 390 px nothing pushes the page sideways."""
    from axe_playwright_python.sync_playwright import Axe

    problems = []
    context = browser.new_context(viewport={"width": size[0], "height": size[1]}, base_url=server)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    try:
        for lang in ("en", "zh"):
            for path in ("/exercises/grpo-loss", "/exercises/grpo-loss?level=4", "/exercises/reward-model?level=5"):
                pg.goto(f"{path}{'&' if '?' in path else '?'}lang={lang}")
                pg.wait_for_load_state("networkidle")
                if size[0] <= 400:
                    over = pg.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
                    if over > 0:
                        problems.append(f"{path} {lang}: {over} px of horizontal overflow")
                for v in Axe().run(pg).response["violations"]:
                    if v["impact"] in ("serious", "critical"):
                        problems.append(f"{path} {lang}: {v['id']} ({v['impact']}): {v['help']}")
    finally:
        context.close()
    assert not errors, errors
    assert not problems, "\n".join(problems)
