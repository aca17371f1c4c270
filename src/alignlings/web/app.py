"""The web practice app: ``create_app()`` builds the FastAPI application behind ``alignlings serve``.

A thin layer over the practice engine (``alignlings.practice``) and the library: pages and JSON
routes live in one module per page (home, exercises, quiz, cloze, toy_grpo, progress); this module
wires them with the shared state in :class:`WebContext`, the safety middlewares (token, body
limit) and the error handlers. No grading logic lives here: learner code is graded by the engine's
warm grader, whose fork server runs it in sandboxed children, never in this process.
"""

from __future__ import annotations

import logging
import threading
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from alignlings import i18n
from alignlings.content.pack import load_pack
from alignlings.web.guard import (
    BodyLimitMiddleware,
    CheckQueue,
    QueueFull,
    SameOriginMiddleware,
    SecurityHeadersMiddleware,
    TokenMiddleware,
)

from alignlings.web.context import WebContext, ctx, lang_of, render_page  # noqa: F401 - re-exported

HERE = Path(__file__).parent
log = logging.getLogger("alignlings.web")


def _is_api(request: Request) -> bool:
    return request.url.path.startswith("/api") or "application/json" in request.headers.get("accept", "")


def create_app(pack_path: str | Path | list | tuple | None = None, *, db_path: str | Path | None = None, token: str | None = None,
               grader=None, store=None, max_body_bytes: int = 1 << 20, max_concurrent_checks: int = 2,
               max_queue: int = 8, check_wait_seconds: float = 120.0, max_checks_per_client: int = 2,
               max_toy_runs: int = 2, max_checks_per_address: int | None = None,
               max_toy_runs_per_learner: int | None = None, max_joins_per_address: int = 10,
               warm_up: bool = True, allowed_hosts: list[str] | None = None,
               allow_import: bool | None = None, classroom: bool = False,
               class_code: str | None = None, warm_references: bool | None = None) -> FastAPI:
    """Build the practice app.

    Args:
        pack_path: exercise pack folder, or a list of them (a course, in order: ``load_pack``); None
            is the built-in pack.
        db_path: SQLite progress file, or a ``postgresql://`` URL; None is the default under ``$ALIGNLINGS_HOME``.
        token: when set, every request must carry it (see ``alignlings.web.guard``).
        grader: a grader object (tests inject fakes); None starts the engine's warm grader.
        store: a progress store object; None opens ``ProgressStore(db_path)``.
        max_body_bytes: larger request bodies are refused with 413 (default 1 MiB).
        max_concurrent_checks: gradings running at once (default 2).
        max_queue: gradings allowed to wait for a slot; one more is refused with 429 (default 8).
        check_wait_seconds: a grading that waits longer than this for a slot is refused with 429.
        max_checks_per_client: gradings one client (remote address) may have running or waiting;
            one more is refused with 429, and waiting gradings are served round-robin across
            clients, so one client's slow checks cannot starve the others (default 2).
        max_toy_runs: toy GRPO runs training or waiting at once; one more gets 429. Only one
            trains at a time because torch's random generator is global to the process.
        max_checks_per_address: gradings one remote address may have running or waiting, whatever
            names it joined a class under (default: twice ``max_checks_per_client``).
        max_toy_runs_per_learner: toy runs one learner (and one address) may have training or
            waiting (default: 1 in a classroom, else ``max_toy_runs``).
        max_joins_per_address: joins (and recovery attempts) one address may make in a classroom
            per 10 minutes; one more gets 429 (default 10).
        warm_up: start the warm grader in the background at startup (default True).
        allowed_hosts: when set, requests whose Host header names another host get 400. ``serve``
            sets the loopback names when it runs without a token, so that a web page elsewhere
            cannot reach this server by pointing its own domain at 127.0.0.1 (DNS rebinding).
        allow_import: whether ``POST /api/progress/import`` works. None (the default): only
            without a token, since a server with a token is shared and its one store with it.

        classroom: a class on one server (``web/classroom.py``): learners join on ``/join`` with a
            name and ``class_code`` and get their own progress; ``token`` is then the teacher's
            (``/teacher`` only), not required of learners. Needs a token; import is off.
        class_code: the code learners join with (None: a new random one, ``app.state.class_code``).
        warm_references: compute every code exercise's trusted reference values in the background
            at startup (``alignlings.web.references``), so that no first check waits for them.
            None (the default): on with ``warm_up`` unless ``$ALIGNLINGS_WARM_REFERENCES=0``.

    Without a token, state-changing requests must be same-origin JSON (``SameOriginMiddleware``:
    a cross-site form or script cannot change progress); every response says
    ``Referrer-Policy: no-referrer``.
    """
    from alignlings.web import cloze, exercises, home, progress, quiz, runs, toy_grpo
    from alignlings.web import review

    if classroom and not token:
        raise ValueError("token: a classroom needs the teacher's token (a non-empty string)")
    pack = load_pack(pack_path)
    if store is None:
        from alignlings.practice.store import ProgressStore

        store = ProgressStore(db_path)
    from alignlings.practice.private import tighten

    changed = tighten(getattr(store, "path", None) or db_path)  # the class database: its owner's alone
    if changed:
        log.warning("made %d files and folders readable by this user alone (others could read them), e.g. %s",
                    len(changed), changed[0])
    context = WebContext(pack, store, grader,
                         check_queue=CheckQueue(max_concurrent_checks, max_queue, check_wait_seconds,
                                                max_checks_per_client, max_checks_per_address),
                         toy_runs=runs.RunManager(max_runs=max_toy_runs, max_per_owner=max_toy_runs_per_learner or (
                             min(1, max_toy_runs) if classroom else max_toy_runs)))

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if warm_up and context._grader is None:
            threading.Thread(target=context.warm_up, name="alignlings-grader-warmup", daemon=True).start()
        from alignlings.web import references

        warm_refs = (warm_up and context._owns_grader and references.enabled_by_env()
                     if warm_references is None else warm_references)
        if warm_refs:
            references.start(context)  # after the grader: it waits for it (issue 22)
        try:
            yield
        finally:
            if getattr(context, "references", None) is not None:
                context.references.stop()
            context.close()

    app = FastAPI(title="alignlings", version=_version(), lifespan=lifespan,
                  description="Practise DPO, GRPO and reward models: the JSON API behind `alignlings serve`.")
    app.state.ctx = context
    app.state.allow_import = (token is None if allow_import is None else bool(allow_import)) and not classroom
    app.state.templates = Jinja2Templates(directory=str(HERE / "templates"))
    app.state.templates.env.globals["static_version"] = _version()
    from alignlings.web.i18n import learner

    app.state.templates.env.globals["learner"] = learner  # templates: {% set l = learner(lang) %}
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")
    for module in (home, exercises, quiz, cloze, toy_grpo, progress):
        app.include_router(module.router)
    app.include_router(review.router)
    from alignlings.web import interview as interview_pages  # the mock interview (issue 32 §2)

    app.include_router(interview_pages.router)
    app.state.templates.env.globals["review_due"] = review.due_count  # the nav's count of due reviews
    from alignlings.web import predict as predict_pages  # predict items (issue 21 §5)

    app.include_router(predict_pages.router)
    from alignlings.web import bugdrill  # spot-the-bug drills (issue 13)

    app.include_router(bugdrill.router)
    from alignlings.web import references, toy_dpo  # the toy DPO page, reference warm-up (issue 22)

    app.include_router(toy_dpo.router)
    app.include_router(references.router)
    from alignlings.web import toy_ppo  # the toy PPO capstone's page (issue 21 §5)

    app.include_router(toy_ppo.router)
    from alignlings.web import figures as figure_pages

    app.include_router(figure_pages.router)
    app.state.templates.env.globals["figures_for"] = figure_pages.for_page  # {% for f in figures_for(id, lang) %}
    if classroom:
        from alignlings.web import classroom_interview  # class interviews (issue 32 §2)
        from alignlings.web import classroom as class_pages

        from alignlings.web.guard import RateLimiter

        if class_code:  # the teacher's code replaces the kept one; else the kept one (a restart keeps the class)
            store.set_class_code(class_code.strip().upper())
        app.state.class_code = store.class_code(class_pages.new_class_code)
        app.state.join_limiter = RateLimiter(max_joins_per_address, class_pages.JOIN_WINDOW_S)
        app.state.templates.env.globals["class_recovery"] = class_pages.recovery_code_of
        app.state.templates.env.globals["in_class"] = class_pages.in_class
        app.state.templates.env.globals["class_strings"] = class_pages._s
        app.state.templates.env.globals["class_lock"] = class_pages.lock_reason_for
        app.include_router(class_pages.router)
        app.include_router(classroom_interview.router)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        if _is_api(request) or exc.status_code not in (404, 400):
            return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)
        # the engine says why in English: the page says it in the learner's language
        detail = i18n.reword("web.page_errors", str(exc.detail), lang_of(request))
        return render_page(request, "error.html", status_code=exc.status_code, status=exc.status_code,
                           detail=detail)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError):
        errors = [{k: v for k, v in e.items() if k in ("loc", "msg", "type")} for e in exc.errors()]
        return JSONResponse({"detail": errors}, status_code=422)

    @app.exception_handler(QueueFull)
    async def queue_full(request: Request, exc: QueueFull):
        return JSONResponse({"detail": f"busy: {exc}; retry shortly"}, status_code=429, headers={"Retry-After": "2"})

    @app.get("/api/health", tags=["meta"])
    def health() -> dict:
        """Liveness and load: grading queue occupancy, whether the warm grader is up, toy runs."""
        return {"ok": True, "grader": "ready" if context._grader is not None else "starting",
                "checks": context.check_queue.stats(), "toy_runs": context.toy_runs.active()}

    # the last added runs first: headers on every response, Host, token, origin, then the body
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)
    if classroom:  # learners by their cookie, the teacher by the token; cookies need same-origin writes
        app.add_middleware(class_pages.ClassroomMiddleware, context=context, teacher_token=token)
        app.add_middleware(SameOriginMiddleware)
    else:
        if token is None:
            app.add_middleware(SameOriginMiddleware)
        app.add_middleware(TokenMiddleware, token=token)  # refuse before reading a body
    if allowed_hosts:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    app.add_middleware(SecurityHeadersMiddleware)
    return app


def _version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("alignlings")
    except PackageNotFoundError:
        return "0"
