"""The Review page's hint in a real browser (issue 30 §1): the queue sends no hint text; the hint
button asks the server, which records it, and the right answer that follows is rated Hard."""

from __future__ import annotations

import socket
import threading
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from alignlings.practice import review as rv
from alignlings.practice.store import ProgressStore

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
PACK = "dpo-grpo"
CLOZE = {"12:4": "loss", "12:11": "-", "12:12": "F", "12:14": "logsigmoid", "12:25": "margin", "12:33": "mean"}


@pytest.mark.browser
def test_review_hint_is_served_by_the_server_and_rates_hard(tmp_path, monkeypatch):
    import uvicorn
    from playwright.sync_api import sync_playwright

    from alignlings.web.app import create_app

    monkeypatch.setenv("ALIGNLINGS_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(rv, "CLOCK", rv.FixedClock(T0 + timedelta(days=3)))
    store = ProgressStore(tmp_path / "web.sqlite3")
    store.import_({"format": "alignlings-progress", "version": 2, "cloze": [
        {"uuid": str(uuid.uuid4()), "pack": PACK, "snippet": "dpo-loss", "key": k, "token": tok, "correct": True,
         "created_at": T0.isoformat()} for k, tok in CLOZE.items()]})
    app = create_app(store=store, warm_up=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            threading.Event().wait(0.05)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-dev-shm-usage"])
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/review?lang=en")
            page.wait_for_selector("#review-item:not([hidden])")
            assert page.locator("#review-hint").is_hidden()
            page.locator("#review-hint-btn").click()
            page.wait_for_selector("#review-hint:not([hidden])")
            assert page.locator("#review-hint").inner_text().startswith("[1] starts with “l”")
            for key, token in CLOZE.items():
                page.locator(f"input[data-key='{key}']").fill(token)
            page.locator("#review-check").click()
            page.wait_for_selector(".review-rate")
            assert "hard" in page.locator("#review-rated").inner_text()
            browser.close()
        log = store.review_log(pack=PACK, item="cloze/dpo-loss/12")
        assert log[-1]["source"] == "review" and log[-1]["rating"] == rv.HARD
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        store.close()
