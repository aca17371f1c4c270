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

from collections.abc import Callable

from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse

from alignlings.content.exercise import Exercise
from alignlings.content.pack import Pack, PackError
from alignlings.practice.session import Locked, Practice, StoreUnavailable, UsageError
from alignlings.web import i18n
from alignlings.web.checkqueue import CheckQueue, QueueFull, client_key

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
                    from alignlings.grading.grader import Grader

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


_practice_lock = threading.Lock()


def practice(request: Request) -> Practice:
    """The learner's practice session (``alignlings.practice.session``): what every route calls.

    One per app and store (its review engine keeps what it folded in); in a classroom, one per
    learner's view of the store."""
    c = ctx(request)
    with _practice_lock:
        cached = c.__dict__.get("_practice")
        if cached is None or cached.store is not c.store or cached.course is not c.pack:
            cached = Practice(c.store, c.pack, c.grader, source="web")
            c.__dict__["_practice"] = cached
    return cached


def get_exercise(request: Request, exercise_id: str) -> Exercise:
    """The exercise of the loaded course, or 404."""
    try:
        return ctx(request).pack.get(exercise_id)
    except PackError:
        raise HTTPException(404, f"unknown exercise {exercise_id!r}") from None


def usage_error(exc: UsageError) -> HTTPException:
    """A request the course cannot serve: 404 when the thing asked for does not exist, 403 with the
    reason alone when its track is locked for the learner (``Locked``), else 422."""
    if isinstance(exc, Locked):
        return HTTPException(403, exc.message)
    detail = exc.message
    if not exc.missing and not detail.startswith(f"{exc.argument}:"):
        detail = f"{exc.argument}: {detail}"  # name the field, as the API's other 422s do
    return HTTPException(404 if exc.missing else 422, detail)


def call(fn: Callable, *args, **kwargs):
    """Run a session method, its UsageError as the HTTP error."""
    try:
        return fn(*args, **kwargs)
    except UsageError as exc:
        raise usage_error(exc) from None
    except StoreUnavailable as exc:
        raise HTTPException(503, str(exc), headers={"Retry-After": "5"}) from None


async def graded(request: Request, fn: Callable, *, what: str, alone: str | None = None):
    """Run a grading (``fn``, which may record through the session) through the bounded, fair
    grading queue, and map what can go wrong to an HTTP status, in one place: a full queue 429, a
    request the course cannot serve 404/422, a submission the engine refuses 422, and anything
    else 500 with a fixed message. No exception text reaches the client; the error is logged.
    ``alone``: a kind of run a learner may have one of at a time (``CheckQueue.run``)."""
    try:
        return await ctx(request).check_queue.run(fn, client=client_key(request), alone=alone)
    except (HTTPException, QueueFull):
        raise
    except UsageError as exc:
        raise usage_error(exc) from None
    except ValueError:  # the engine refused the submission (its checks run before any grading)
        log.warning("%s: the submission was refused", what, exc_info=True)
        raise HTTPException(422, "the submission could not be graded as given") from None
    except Exception:  # noqa: BLE001 - the grader itself failed: report it, keep serving
        log.exception("the grader failed on %s", what)
        raise HTTPException(500, "the grader failed; the error is in the server's log") from None


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
