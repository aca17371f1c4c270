"""What every page and route of the web app shares, and how a route gets it.

``WebContext`` holds the pack, the progress store, the warm grader and the queues; ``create_app``
(``web/app.py``) makes one per app. Page modules import from here, never from ``web/app.py``, so
there is no import circle: ``app`` imports the pages, the pages import ``context``. ``ctx`` works
as a plain call (``ctx(request)``) or as a FastAPI dependency (``c: WebContext = Depends(ctx)``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse

from alignlings.practice.pack import Pack
from alignlings.web import i18n
from alignlings.web.checkqueue import CheckQueue

log = logging.getLogger("alignlings.web")


class WebContext:
    """What every route shares: the pack, the progress store, the grader and the queues.

    The progress store is safe to share between threads (one SQLite connection per thread).
    """

    def __init__(self, pack: Pack, store, grader=None, *, check_queue: CheckQueue, toy_runs):
        self.pack = pack
        self.store = store
        self.check_queue = check_queue
        self.toy_runs = toy_runs
        self._grader = grader
        self._owns_grader = grader is None
        self._grader_lock = threading.Lock()
        self._grader_error: BaseException | None = None

    def grader(self):
        """The warm grader, started on first use (or by the warm-up thread at startup)."""
        if self._grader is None:
            with self._grader_lock:
                if self._grader is None:
                    from alignlings.practice.grader import Grader

                    self._grader = Grader(self.pack, warm=True)
        return self._grader

    def warm_up(self) -> None:
        try:
            self.grader()
        except BaseException as exc:  # noqa: BLE001 - reported on the first check instead
            self._grader_error = exc
            log.warning("grader warm-up failed: %s", exc)

    def close(self) -> None:
        self.toy_runs.close()
        if self._owns_grader and self._grader is not None:
            self._grader.close()
            self._grader = None


def ctx(request: Request) -> WebContext:
    """The app's shared state; in a classroom, the learner's view of it (``web/classroom.py``)."""
    return getattr(request.state, "ctx", None) or request.app.state.ctx


def lang_of(request: Request) -> str:
    return i18n.resolve_lang(request)


def render_page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """Render a page template with the common context (language, strings, nav)."""
    lang = lang_of(request)
    strings = i18n.ui(lang)
    response = request.app.state.templates.TemplateResponse(request, template, {
        "lang": lang, "t": strings, "other_lang": "zh" if lang == "en" else "en", "pack": ctx(request).pack,
        "client": {"lang": lang, "t": strings}, "nav": context.pop("nav", ""), **context,
    }, status_code=status_code)
    if request.query_params.get("lang") in i18n.LANGS:
        response.set_cookie(i18n.LANG_COOKIE, lang, path="/", samesite="strict", max_age=365 * 24 * 3600)
    return response
