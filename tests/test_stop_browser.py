"""Issue 33 (Major 3) in a real browser: while a check runs, the fill-in and bug pages show the time
it has taken and "Stop"; Stop ends it and the page says it was stopped. In English and Chinese, at
1280 and 390 px (the page stays as wide as the screen). The server is the real app on uvicorn with
a grader that answers only when Stop is pressed (the sandbox side is tests/test_stop.py's)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")
uvicorn = pytest.importorskip("uvicorn")

from serving import CHROMIUM_ARGS  # noqa: E402
from test_stop import _BlockingGrader  # noqa: E402

from alignlings.cli.serve import server_config  # noqa: E402
from alignlings.content.pack import load_pack  # noqa: E402
from alignlings.web.app import create_app  # noqa: E402
from alignlings.web.kinds import view_of  # noqa: E402

PACK = load_pack()
SHOTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "screenshots"
BUG = next(ex for ex in PACK if view_of(ex).page == "bug")


class _PageGrader(_BlockingGrader):
    def check(self, exercise_id, code=None, **kw):
        self.started.clear()
        return super().check(exercise_id, code, **kw)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    web = create_app(db_path=tmp_path_factory.mktemp("stop") / "p.sqlite3", grader=_PageGrader(PACK),
                     warm_up=False, warm_references=False)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    srv = uvicorn.Server(server_config(web, []))
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not srv.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    srv.should_exit = True
    thread.join(15)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@contextlib.contextmanager
def page_at(browser, server, width):
    context = browser.new_context(viewport={"width": width, "height": 900}, base_url=server)
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    try:
        yield pg
    finally:
        context.close()
    assert not errors, errors


@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("which", ["fill", "bug"])
def test_a_running_check_shows_the_time_and_stop(browser, server, lang, width, which):
    words = {"en": ("Stop", "s so far", "stopped before it finished"),
             "zh": ("停止", "已用", "在运行结束前被停止")}[lang]
    with page_at(browser, server, width) as pg:
        pg.goto(f"/exercises/{'dpo-loss' if which == 'fill' else BUG.key}?lang={lang}")
        if which == "fill":
            pg.fill("#blank-1", "x")
        pg.click("#check-btn")
        stop = pg.locator("#stop-btn")
        stop.wait_for(state="visible")
        assert stop.inner_text() == words[0]
        assert words[1] in pg.inner_text(".check-elapsed")
        pg.wait_for_function("/[1-9]/.test(document.querySelector('.check-elapsed').textContent)")  # it counts
        assert pg.evaluate("document.documentElement.scrollWidth") <= width
        SHOTS.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(SHOTS / f"stop-{which}-{lang}-{width}.png"))
        stop.click()
        pg.locator("#stop-btn").wait_for(state="detached")
        pg.wait_for_function(f"document.body.innerText.includes({words[2]!r})")
        assert pg.evaluate("document.documentElement.scrollWidth") <= width
