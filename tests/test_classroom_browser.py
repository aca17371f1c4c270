"""A class in a real browser (Debian's headless Chromium through Playwright), on SQLite and on
PostgreSQL: three learners, each in a browser context of their own, join with a name and the class
code, check dpo-loss (one right, two with the same misconception) and take a hint; the teacher page
shows the three rows and the misconception hit by two learners. A learner's browser cannot open the
teacher's pages, and sees only its own progress. Never downloads a browser: without
/usr/bin/chromium the tests skip; without ``ALIGNLINGS_TEST_DATABASE_URL`` the PostgreSQL run skips."""

from __future__ import annotations

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

from alignlings.content import blanks as bl  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync"]
EX = load_pack().get("dpo-loss")
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


def learner_joins_checks_and_takes_a_hint(browser, url: str, name: str, fills: list[str]):
    context = browser.new_context(base_url=url)
    context.set_default_timeout(90_000)
    page = context.new_page()
    page.goto("/exercises/dpo-loss?lang=en")
    page.wait_for_url(re.compile(r"/join\?next=.*lang=en$"))  # no cookie yet: sent to the join page
    page.fill("#join-name", name)
    page.fill("#join-code", CODE.lower())  # read from a board: any case
    page.click("#join-button")
    page.wait_for_selector("#join-done:not([hidden])")  # the recovery code, shown once before going on
    assert re.fullmatch(r"[A-Z2-9]{4}-[A-Z2-9]{4}-[A-Z2-9]{4}", page.locator("#recovery-code").inner_text())
    page.click("#join-continue")
    page.wait_for_url(re.compile(r"/exercises/dpo-loss\?lang=en$"))  # back to the page asked for
    cookies = {c["name"]: c for c in context.cookies()}
    assert cookies["alignlings_learner"]["httpOnly"] and cookies["alignlings_learner"]["sameSite"] == "Strict"
    page.goto("/exercises/dpo-loss")
    for i, text in enumerate(fills, start=1):
        page.fill(f"#blank-{i}", text)
    page.click("#check-btn")
    page.wait_for_selector(".verdict.passed" if fills == RIGHT else ".verdict.failed")
    if fills != RIGHT:
        assert "bad" in page.get_attribute(f"#blank-{MISC.blank}", "class")
        assert MISC.feedback["en"] in page.locator(f'.blank-fb[data-index="{MISC.blank}"]').inner_text()
    page.click("#hint-btn")
    page.wait_for_selector("#hint-list li")
    assert page.locator("#hint-count").inner_text() == "1"
    return context, page


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.skipif(
    not PG_URL, reason=PG_SKIP))])
def test_three_learners_and_a_teacher_in_the_browser(browser, backend, tmp_path):
    with classroom_server(backend, tmp_path) as url:
        learners = {name: learner_joins_checks_and_takes_a_hint(browser, url, name, fills)
                    for name, fills in PLAN.items()}

        # each learner's own progress, as their browser gets it
        for name, (context, _) in learners.items():
            rows = {r["key"]: r for r in context.request.get(f"{url}/api/progress").json()["exercises"]}
            mine = rows["dpo-loss"]
            assert (mine["attempts"], mine["hints"], bool(mine["solved"])) == (1, 1, name == "Ann"), (name, mine)
            assert sum(r["attempts"] for r in rows.values()) == 1  # nobody else's attempts leak in
        ann_page = learners["Ann"][1]
        ann_page.goto("/exercises/dpo-loss")  # Ann's page puts back her own fills, never Bo's wrong one
        assert ann_page.input_value(f"#blank-{MISC.blank}") == RIGHT[MISC.blank - 1] != MISC.fill

        # a learner cannot open the teacher's pages, with or without guessing the token
        ann = learners["Ann"][0]
        for path in ("/teacher", "/api/teacher/class", "/teacher/progress.csv"):
            assert ann.request.get(url + path).status == 401
        assert ann_page.goto("/teacher?token=guess").status == 403
        assert ann_page.goto("/teacher").status == 401
        assert not re.search(r"\b(Bo|Cy)\b", ann_page.content())  # no other learner's name on the refusal

        # the teacher
        teacher = browser.new_context(base_url=url)
        teacher.set_default_timeout(60_000)
        page = teacher.new_page()
        page.goto(f"/teacher?token={TEACHER}&lang=en")
        page.wait_for_url(re.compile(r"/teacher(\?lang=en)?$"))  # the token moved into an HttpOnly cookie
        assert page.locator("#class-code").inner_text() == CODE
        rows = page.locator("#class-progress tbody tr")
        assert rows.count() == 3
        assert [rows.nth(i).locator("th").inner_text() for i in range(3)] == ["Ann", "Bo", "Cy"]
        cells = [rows.nth(i).locator('td[data-exercise="dpo-loss"]') for i in range(3)]
        assert [c.get_attribute("class") for c in cells] == ["status-solved", "status-attempted", "status-attempted"]
        assert all("1 / 1" in c.inner_text() for c in cells)  # one attempt, one hint each
        misc = page.locator(f'#class-misconceptions tr[data-misconception="{MISC.id}"]')
        assert misc.locator("td.count").inner_text() == "2"
        assert misc.locator("a").get_attribute("href") == f"/exercises/dpo-loss#blank-{MISC.blank}"
        assert page.locator("#class-misconceptions tbody tr").first.get_attribute("data-misconception") == MISC.id
        os.makedirs("test-artifacts/screenshots", exist_ok=True)
        page.screenshot(path=f"test-artifacts/screenshots/classroom-teacher-{backend}.png", full_page=True)
        page.goto("/teacher?lang=zh")
        assert page.locator("h1").inner_text() == "课堂进度"
        for context, _ in learners.values():
            context.close()
        teacher.close()


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.skipif(
    not PG_URL, reason=PG_SKIP))])
def test_a_class_survives_a_restart_and_a_learner_comes_back_on_another_browser(browser, backend, tmp_path):
    """Issue 24 §1: three learners join a class started without --class-code (Ann from a shared
    Chinese exercise link); the server restarts, still without a code; the class, its code and
    every browser's sign-in survive; Ann comes back on a second browser with her recovery code."""
    contexts = []

    def new_context(url):
        context = browser.new_context(base_url=url)
        context.set_default_timeout(90_000)
        contexts.append(context)
        return context

    with classroom_server(backend, tmp_path, class_code=None) as url:
        teacher = new_context(url).new_page()
        teacher.goto(f"/teacher?token={TEACHER}&lang=en")
        code = teacher.locator("#class-code").inner_text()
        ann = new_context(url).new_page()
        ann.goto("/exercises/dpo-loss?lang=zh")  # a shared link, in Chinese
        ann.wait_for_url(re.compile(r"/join\?"))
        assert ann.locator("h1").inner_text() == "加入课堂"
        ann.fill("#join-name", "Ann")
        ann.fill("#join-code", "wrong999")
        ann.click("#join-button")
        ann.wait_for_selector("#join-error:not(:empty)")
        assert ann.locator("#join-error").inner_text() == "课堂码不对（请向老师确认）"  # plain, in her language
        ann.fill("#join-code", code)
        ann.click("#join-button")
        ann.wait_for_selector("#join-done:not([hidden])")
        recovery = ann.locator("#recovery-code").inner_text()
        ann.click("#join-continue")
        ann.wait_for_url(re.compile(r"/exercises/dpo-loss\?lang=zh$"))
        ann.click("#hint-btn")
        ann.wait_for_selector("#hint-list li")
        others = {}
        for name in ("Bo", "Cy"):
            page = new_context(url).new_page()
            page.goto("/join")
            page.fill("#join-name", name)
            page.fill("#join-code", code)
            page.click("#join-button")
            page.wait_for_selector("#join-done:not([hidden])")
            others[name] = page
    for context in contexts:
        context.close()
    contexts.clear()

    with classroom_server(backend, tmp_path, class_code=None, wipe=False) as url:  # the restart
        teacher = new_context(url).new_page()
        teacher.goto(f"/teacher?token={TEACHER}&lang=en")
        assert teacher.locator("#class-code").inner_text() == code  # the same code, not a new one
        rows = teacher.locator("#class-progress tbody tr")
        assert [rows.nth(i).locator("th").inner_text() for i in range(rows.count())] == ["Ann", "Bo", "Cy"]
        joining = new_context(url).new_page()
        joining.goto("/join?lang=en")
        joining.fill("#join-name", "Dee")
        joining.fill("#join-code", code.lower())  # the old code still admits
        joining.click("#join-button")
        joining.wait_for_selector("#join-done:not([hidden])")

        phone = new_context(url).new_page()  # Ann, on another browser
        phone.goto("/join?lang=en")
        phone.fill("#recover-code", recovery.lower())
        phone.click("#recover-button")
        phone.wait_for_url(re.compile(r"/$"))
        rows_ = {r["key"]: r for r in phone.context.request.get(f"{url}/api/progress").json()["exercises"]}
        assert rows_["dpo-loss"]["hints"] == 1  # her progress, not a second empty learner
        phone.goto("/progress?lang=en")
        assert phone.locator("#my-recovery-code").inner_text() == recovery
        assert phone.locator("#import-btn").count() == 0 and "sqlite3" not in phone.content()

        teacher.goto("/teacher?lang=en")
        rows = teacher.locator("#class-progress tbody tr")
        assert [rows.nth(i).locator("th").inner_text() for i in range(rows.count())] == ["Ann", "Bo", "Cy", "Dee"]
        os.makedirs("test-artifacts/screenshots", exist_ok=True)
        teacher.screenshot(path=f"test-artifacts/screenshots/classroom-restart-teacher-{backend}-en.png",
                           full_page=True)
        teacher.goto("/teacher?lang=zh")
        teacher.screenshot(path=f"test-artifacts/screenshots/classroom-restart-teacher-{backend}-zh.png",
                           full_page=True)
        for context in contexts:
            context.close()


@pytest.mark.parametrize("size", [(1280, 800), (390, 844)], ids=["1280", "390"])
def test_the_teacher_and_join_pages_are_accessible_and_fit_a_phone(browser, size, tmp_path):
    """Issue 24 §2: no serious axe violation on the teacher page (its wide table's scroll box is
    reachable by keyboard) and the join page, nothing pushes them sideways at 390 px, in both
    languages, with every learner's report opened; screenshots of each."""
    import httpx
    from axe_playwright_python.sync_playwright import Axe

    with classroom_server("sqlite", tmp_path) as url:
        for name, fills in PLAN.items():
            with httpx.Client(base_url=url, headers={"Origin": url}, timeout=120) as c:
                assert c.post("/api/join", json={"name": name, "code": CODE}).status_code == 200
                assert c.post("/api/exercises/dpo-loss/check", json={"fills": fills}).status_code == 200
                c.post("/api/exercises/dpo-loss/hint", json={})
        axe = Axe()
        context = browser.new_context(viewport={"width": size[0], "height": size[1]}, base_url=url)
        context.set_default_timeout(60_000)
        page = context.new_page()
        problems = []
        os.makedirs("test-artifacts/screenshots", exist_ok=True)
        for path in ("/join?lang=en", "/join?lang=zh", f"/teacher?token={TEACHER}&lang=en", "/teacher?lang=zh"):
            page.goto(path)
            page.wait_for_load_state("networkidle")
            page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
            lang = "zh" if "lang=zh" in path else "en"
            name = ("teacher" if "teacher" in path else "join") + f"-{lang}-{size[0]}"
            page.screenshot(path=f"test-artifacts/screenshots/classroom-{name}.png", full_page=True)
            over = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
            if over > 0:
                problems.append(f"{path}: {over} px of horizontal overflow")
            for v in axe.run(page).response["violations"]:
                if v["impact"] in ("serious", "critical"):
                    problems.append(f"{path}: {v['id']} ({v['impact']}): {v['help']} {[n['target'] for n in v['nodes'][:3]]}")
        context.close()
        assert not problems, "\n".join(problems)


def test_the_teacher_locks_a_track_and_gives_an_assignment_in_both_languages(browser, tmp_path):
    """Issue 24 §2 (optional items) on the teacher page: the teacher locks a track and gives an
    assignment through the page (its due time typed in the teacher's own time zone, kept in UTC);
    the learner's home says the track is locked, in Chinese; the assignment's page says who finished
    by the due time; the teacher page and the assignment page have no serious axe violation, in both
    languages; screenshots of each."""
    import httpx
    from axe_playwright_python.sync_playwright import Axe

    locked = "dpo-grpo/reward-models"
    with classroom_server("sqlite", tmp_path) as url:
        with httpx.Client(base_url=url, headers={"Origin": url}, timeout=120) as bo:
            assert bo.post("/api/join", json={"name": "Bo", "code": CODE}).status_code == 200
            assert bo.post("/api/exercises/dpo-loss/check", json={"fills": RIGHT}).json()["passed"] is True
        context = browser.new_context(base_url=url, timezone_id="Asia/Shanghai")  # UTC+8, no summer time
        context.set_default_timeout(90_000)
        teacher = context.new_page()
        teacher.goto(f"/teacher?token={TEACHER}&lang=en")
        row = teacher.locator(f'#track-locks li[data-track="{locked}"]')
        assert row.locator(".lock-state").inner_text() == "Open"
        row.locator("button.track-lock").click()
        teacher.wait_for_selector(f'#track-locks li.locked[data-track="{locked}"]')
        assert teacher.locator(f'#track-locks li[data-track="{locked}"] .lock-state').inner_text() == "Locked"

        teacher.fill("#assignment-title", "Week 1")
        teacher.select_option("#assignment-exercises", ["dpo-loss", "grpo-loss"])
        teacher.fill("#assignment-due", "2030-01-01T20:00")  # 20:00 in Shanghai is 12:00 UTC
        teacher.click("#assignment-add")
        teacher.wait_for_selector("#assignment-list li")
        item = teacher.locator("#assignment-list li").first
        assert "2030-01-01 12:00 UTC" in item.inner_text() and "0 of 1 finished by the due date" in item.inner_text()
        teacher.fill("#assignment-title", "")
        teacher.click("#assignment-add")  # the browser's own check: a title is required, nothing is sent
        assert teacher.locator("#assignment-list li").count() == 1

        learner = browser.new_context(base_url=url).new_page()
        learner.goto("/join?lang=zh")
        learner.fill("#join-name", "Ann")
        learner.fill("#join-code", CODE)
        learner.click("#join-button")
        learner.wait_for_selector("#join-done:not([hidden])")
        learner.click("#join-continue")
        learner.goto("/?lang=zh")
        note = learner.locator(f'.track[data-track="{locked}"] .track-locked').inner_text()
        assert "老师已锁定" in note and "「基础：对数概率、SFT 与 KL」" in note
        r = learner.context.request.post(f"{url}/api/exercises/reward-pooling/hint?lang=zh",
                                         headers={"Origin": url}, data={})
        assert r.status == 403 and "老师已锁定" in r.json()["detail"]
        learner.context.close()

        axe = Axe()
        problems = []
        os.makedirs("test-artifacts/screenshots", exist_ok=True)
        teacher.goto("/teacher?lang=en")
        teacher.locator("#assignment-list li a").first.click()
        teacher.wait_for_selector("#assignment-report")
        page_url = teacher.url.split("?")[0]
        bo_row = teacher.locator("#assignment-report tbody tr", has_text="Bo")
        assert bo_row.locator(".on-time-cell").inner_text() == "not yet"  # grpo-loss is still to do
        for path in ("/teacher?lang=en", "/teacher?lang=zh", f"{page_url}?lang=en", f"{page_url}?lang=zh"):
            teacher.goto(path)
            teacher.wait_for_load_state("networkidle")
            lang = "zh" if "lang=zh" in path else "en"
            name = ("assignment" if "assignments" in path else "teacher-plan") + f"-{lang}"
            teacher.screenshot(path=f"test-artifacts/screenshots/classroom-{name}.png", full_page=True)
            if path == "/teacher?lang=zh":
                assert teacher.locator(f'#track-locks li[data-track="{locked}"] .lock-state').inner_text() == "已锁定"
                assert "2 人中有 0 人在截止前完成" in teacher.locator("#assignment-list").inner_text()  # Ann and Bo
            if "assignments" in path and lang == "zh":
                assert teacher.locator("#assignment-summary").inner_text() == "2 人中有 0 人在截止前完成"
            for v in axe.run(teacher).response["violations"]:
                if v["impact"] in ("serious", "critical"):
                    problems.append(f"{path}: {v['id']} ({v['impact']}): {v['help']} {[n['target'] for n in v['nodes'][:3]]}")
        context.close()
        assert not problems, "\n".join(problems)
