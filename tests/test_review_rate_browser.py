"""The Review page after a right answer (issue 22 §2): "That was hard" / "Too easy" in a real
browser, keyboard only, in both languages, on a phone-sized page (axe: nothing serious); the same
review is re-rated in the store."""

from __future__ import annotations

import socket
import threading
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from alignlings.practice import review as rv
from alignlings.content.pack import load_pack
from alignlings.practice.store import ProgressStore

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
PACK = "dpo-grpo"
WORDS = {"en": {"right": "Right.", "good": "good", "easy": "easy", "hard": "hard",
                "hard_btn": "That was hard", "easy_btn": "Too easy"},
         "zh": {"right": "答对了。", "good": "良好", "easy": "简单", "hard": "困难",
                "hard_btn": "有点难", "easy_btn": "太简单"}}


def axe_problems(page) -> list[str]:
    """axe-core's serious and critical violations on the page as it is now."""
    from axe_playwright_python.sync_playwright import Axe

    result = Axe().run(page)
    return [f"{v['id']} ({v['impact']}): {v['help']} {[n['target'] for n in v['nodes'][:3]]}"
            for v in result.response["violations"] if v["impact"] in ("serious", "critical")]


@pytest.mark.browser
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_review_page_rates_a_right_answer_hard_or_easy_by_keyboard(tmp_path, monkeypatch, lang):
    import uvicorn
    from playwright.sync_api import sync_playwright

    from alignlings.web.app import create_app

    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(rv, "CLOCK", rv.FixedClock(T0 + timedelta(days=3)))
    store = ProgressStore(tmp_path / "web.sqlite3")
    quiz = {q.id: q for q in load_pack().get("concepts").quiz}
    store.import_({"format": "alignlings-progress", "version": 2, "quiz_answers": [
        {"uuid": str(uuid.uuid4()), "pack": PACK, "question_id": q, "choice": quiz[q].answer, "correct": True,
         "created_at": T0.isoformat()} for q in ("bt-probability", "grpo-vs-ppo")]})
    app = create_app(store=store, warm_up=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    w = WORDS[lang]
    try:
        while not server.started:
            threading.Event().wait(0.05)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-dev-shm-usage"])
            page = browser.new_page(viewport={"width": 390, "height": 844})
            page.goto(f"http://127.0.0.1:{port}/review?lang={lang}")
            page.wait_for_selector("#review-item:not([hidden])")
            answered = []
            for n in range(2):
                heading = page.locator("#review-item .q-text").inner_text()
                q = next(q for q in quiz.values() if q.question[lang].split("$")[0][:12] in heading)
                answered.append(q.id)
                page.keyboard.press("abcd"[q.answer])
                page.wait_for_selector(".review-rate")
                assert page.locator(".review-result").inner_text() == w["right"]
                rated = page.locator("#review-rated")
                assert w["good"] in rated.inner_text()  # a right answer is good, however fast
                hard_btn = page.locator(".review-rate button[data-rating=hard]")
                easy_btn = page.locator(".review-rate button[data-rating=easy]")
                assert hard_btn.inner_text() == w["hard_btn"] and easy_btn.inner_text() == w["easy_btn"]
                assert page.evaluate("document.activeElement.id") == "review-next"
                if n == 0:
                    page.keyboard.press("e")  # too easy
                    page.wait_for_function("document.querySelector('.review-rate button[data-rating=easy]')"
                                           ".getAttribute('aria-pressed') === 'true'")
                    assert w["easy"] in rated.inner_text()
                    page.keyboard.press("e")  # pressed again: taken back, good again
                    page.wait_for_function("document.querySelector('.review-rate button[data-rating=easy]')"
                                           ".getAttribute('aria-pressed') === 'false'")
                    assert w["good"] in rated.inner_text()
                    page.keyboard.press("e")
                    page.wait_for_function("document.querySelector('.review-rate button[data-rating=easy]')"
                                           ".getAttribute('aria-pressed') === 'true'")
                    page.keyboard.press("Enter")  # focus stayed on Next: Enter moves on
                else:  # the buttons are reachable with Tab from Next
                    for _ in range(4):
                        page.keyboard.press("Tab")
                        if page.evaluate("document.activeElement.dataset.rating") == "hard":
                            break
                    assert page.evaluate("document.activeElement.dataset.rating") == "hard"
                    page.keyboard.press("Enter")
                    page.wait_for_function("document.querySelector('.review-rate button[data-rating=hard]')"
                                           ".getAttribute('aria-pressed') === 'true'")
                    assert w["hard"] in rated.inner_text()
                    assert easy_btn.get_attribute("aria-pressed") == "false"
                    assert not axe_problems(page)
                    shots = Path("test-artifacts/screenshots")
                    shots.mkdir(parents=True, exist_ok=True)
                    page.screenshot(path=str(shots / f"review-rate-{lang}-390.png"), full_page=True)
                    page.locator("#review-next").click()
            page.wait_for_selector("#review-done:not([hidden])")
            browser.close()
        # one review per item, re-rated in place: easy for the first, hard for the second
        for qid, rating in zip(answered, (rv.EASY, rv.HARD)):
            log = store.review_log(pack=PACK, item=f"quiz/{qid}")
            assert [(r["source"], r["rating"]) for r in log] == [("quiz", rv.GOOD), ("review", rating)]
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        store.close()
