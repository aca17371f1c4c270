"""A class on one server (``alignlings serve --classroom``): learners join, a teacher watches.

Each learner opens the server, gives a name and the class code (printed when the server starts)
on ``/join`` and gets a token of their own in an ``HttpOnly; SameSite=Strict`` cookie. The store
keeps only a hash of it. :class:`ClassroomMiddleware` maps that cookie to the learner and gives
the request a view of the app's shared state whose progress store is bound to that learner
(``ProgressStore.for_learner``), so every page and route (check, hints, quiz, cloze, review,
progress) reads and writes that learner's rows only, exactly as when practising alone. Without
the cookie, pages redirect to ``/join`` and the API answers 401.

The teacher's pages (``/teacher``, its CSV exports and ``/api/teacher/class``) need the teacher
token instead (``?token=`` once, which sets an ``HttpOnly`` cookie, or a ``Bearer`` /
``X-Alignlings-Token`` header). They show learners x exercises (status, attempts, hints,
solution seen) and, per misconception, how many learners hit it, most common first, linked to the
blank. Learners never see these pages nor each other's rows.

State-changing requests go through :class:`alignlings.web.guard.SameOriginMiddleware` (the
cookie authenticates, so a cross-site form or script must not be able to ride on it).
"""

from __future__ import annotations

import csv
import io
import secrets
from http.cookies import SimpleCookie
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from alignlings import i18n
from alignlings.web.context import WebContext, lang_of, render_page
from alignlings.web.guard import _headers, _is_https, _page, _send_error, _without_token
from alignlings.web.i18n import resolve_lang, ui

LEARNER_COOKIE = "alignlings_learner"
TEACHER_COOKIE = "alignlings_teacher"
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read aloud or from a board
PUBLIC = ("/join", "/api/join", "/static/", "/api/health", "/favicon.ico")
TEACHER = ("/teacher", "/api/teacher/")

router = APIRouter()

STRINGS = i18n.lang_table("web.classroom")  # strings: locales/{en,zh}.toml [web.classroom]


def new_class_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(8))


class LearnerContext:
    """The app's shared state as one learner sees it: everything of :class:`WebContext` (the
    grader, queues and runs are shared), but the progress store is bound to the learner."""

    def __init__(self, base: WebContext, store, learner: dict):
        self._base, self.store, self.learner = base, store, learner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._base, name)


def _cookie(scope, name: str) -> str | None:
    jar = SimpleCookie()
    try:
        jar.load(_headers(scope).get("cookie", ""))
    except Exception:  # noqa: BLE001 - a malformed cookie header is just "no cookie"
        return None
    morsel = jar.get(name)
    return morsel.value if morsel else None


def set_cookie_header(scope, name: str, value: str, max_age: int = 180 * 24 * 3600) -> bytes:
    return (f"{name}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}"
            + ("; Secure" if _is_https(scope) else "")).encode()


class ClassroomMiddleware:
    """Who is asking: a learner (their cookie), the teacher (the teacher token) or nobody yet."""

    def __init__(self, app, context: WebContext, teacher_token: str):
        if not isinstance(teacher_token, str) or not teacher_token.strip():
            raise ValueError("teacher_token: expected a non-empty string")
        self.app, self.context, self.teacher_token = app, context, teacher_token

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        if path.startswith(TEACHER):
            return await self._teacher(scope, receive, send)
        if path.startswith(PUBLIC):
            return await self.app(scope, receive, send)
        token = _cookie(scope, LEARNER_COOKIE)
        learner = await run_in_threadpool(self.context.store.learner_by_token, token) if token else None
        if learner is None:
            if scope["type"] == "http" and scope.get("method") in ("GET", "HEAD") and not path.startswith("/api"):
                await send({"type": "http.response.start", "status": 303,
                            "headers": [(b"location", b"/join"), (b"content-length", b"0"),
                                        (b"cache-control", b"no-store")]})
                return await send({"type": "http.response.body", "body": b""})
            return await _send_error(scope, send, 401, _scope_strings(scope)["join_first"])
        state = scope.setdefault("state", {})
        state["learner"] = learner
        state["ctx"] = LearnerContext(self.context, self.context.store.for_learner(learner["id"]), learner)
        return await self.app(scope, receive, send)

    async def _teacher(self, scope, receive, send):
        query_token = _query_token(scope)
        headers = _headers(scope)
        auth = headers.get("authorization", "")
        given = (query_token or (auth[7:].strip() if auth.lower().startswith("bearer ") else None)
                 or headers.get("x-alignlings-token") or _cookie(scope, TEACHER_COOKIE))
        s = _scope_strings(scope)
        if not given:
            return await _send_error(scope, send, 401, s["token_required_title"],
                                     _page(401, s["token_required_title"], s["token_required_text"]))
        if not secrets.compare_digest(given.encode(), self.teacher_token.encode()):
            return await _send_error(scope, send, 403, s["wrong_token_title"],
                                     _page(403, s["wrong_token_title"], s["wrong_token_text"]))
        scope.setdefault("state", {})["teacher"] = True
        if query_token and scope["type"] == "http" and scope.get("method") in ("GET", "HEAD"):
            await send({"type": "http.response.start", "status": 307, "headers": [
                (b"location", _without_token(scope).encode("latin-1")),
                (b"set-cookie", set_cookie_header(scope, TEACHER_COOKIE, self.teacher_token, 12 * 3600)),
                (b"content-length", b"0"), (b"cache-control", b"no-store")]})
            return await send({"type": "http.response.body", "body": b""})
        return await self.app(scope, receive, send)


def _query_token(scope) -> str | None:
    from urllib.parse import parse_qs

    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
    return values[0] if values else None


def _s(request: Request) -> dict[str, str]:
    return STRINGS.get(lang_of(request), STRINGS["en"])


def _scope_strings(scope) -> dict[str, str]:
    """The strings in the language of a request the middleware answers itself (``?lang=``, cookie)."""
    if scope["type"] != "http":
        return STRINGS["en"]
    return STRINGS.get(resolve_lang(Request(scope)), STRINGS["en"])


# -- joining -----------------------------------------------------------------------------------
class JoinBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=200, description="The learner's name, as the teacher will see it.")
    code: str = Field(max_length=64, description="The class code printed when the server started.")


@router.get("/join", include_in_schema=False)
def join_page(request: Request):
    s = _s(request)
    return render_page(request, "join.html", nav="", title=s["join_title"], s=s,
                       client={"lang": lang_of(request), "t": ui(lang_of(request)), "s": s})


@router.post("/api/join", tags=["classroom"])
def join(request: Request, body: JoinBody) -> Response:
    """Join with a name and the class code: sets the learner's cookie (their key to their progress)."""
    expected = request.app.state.class_code
    code = body.code.strip().upper()
    if not secrets.compare_digest(code.encode(), expected.encode()):
        raise HTTPException(403, _s(request)["wrong_code"])
    store = request.app.state.ctx.store
    try:
        learner, token = store.add_learner(body.name)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    response = Response(content=f'{{"learner": "{learner}", "next": "/"}}', media_type="application/json")
    response.headers.append("set-cookie", set_cookie_header(request.scope, LEARNER_COOKIE, token).decode())
    return response


# -- the teacher's view ------------------------------------------------------------------------
def status_of(row: dict) -> str:
    from alignlings.practice.session import status_of as status

    return status(row)


def class_progress(context: WebContext) -> list[dict]:
    """One row per learner and exercise: ``learner`` (id), ``name``, ``exercise`` (key), ``pack``,
    ``status`` (solved, attempted, not_started), ``attempts``, ``hints``, ``solution_seen``
    (``Practice.class_report``: a few queries per pack, however many learners)."""
    from alignlings.practice.session import Practice

    return Practice(context.store, context.pack).class_report().progress


def class_misconceptions(context: WebContext, lang: str = "en") -> list[dict]:
    """Per misconception: how many learners' attempts hit it (``learners``, most common first), the
    exercise, the blank, a link to it and the misconception's feedback (``Practice.class_report``)."""
    from alignlings.practice.session import Practice

    return Practice(context.store, context.pack).class_report(lang).misconceptions


def _csv(rows: list[dict], columns: list[str], filename: str) -> Response:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for r in rows:  # a cell starting with = + - @ would be a formula in a spreadsheet: quote it
        writer.writerow({k: ("'" + v if isinstance(v, str) and v[:1] in "=+-@" else v) for k, v in r.items()})
    return Response(buf.getvalue(), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{filename}"'})


PROGRESS_COLUMNS = ["name", "learner", "exercise", "pack", "status", "attempts", "hints", "solution_seen"]
MISCONCEPTION_COLUMNS = ["misconception", "exercise", "pack", "blank", "learners", "feedback"]


def _teacher_context(request: Request) -> WebContext:
    if not getattr(request.state, "teacher", False):  # the middleware lets only the teacher through
        raise HTTPException(403, "teacher only")
    return request.app.state.ctx


@router.get("/api/teacher/class", tags=["classroom"])
def class_json(request: Request) -> dict:
    """The class: learners, learners x exercises, misconceptions (teacher token only)."""
    context = _teacher_context(request)
    return {"learners": context.store.learners(), "progress": class_progress(context),
            "misconceptions": class_misconceptions(context, lang_of(request))}


@router.get("/teacher/progress.csv", include_in_schema=False)
def progress_csv(request: Request) -> Response:
    return _csv(class_progress(_teacher_context(request)), PROGRESS_COLUMNS, "class-progress.csv")


@router.get("/teacher/misconceptions.csv", include_in_schema=False)
def misconceptions_csv(request: Request) -> Response:
    rows = class_misconceptions(_teacher_context(request), lang_of(request))
    return _csv(rows, MISCONCEPTION_COLUMNS, "class-misconceptions.csv")


@router.get("/teacher", include_in_schema=False)
def teacher_page(request: Request):
    context = _teacher_context(request)
    lang, s = lang_of(request), _s(request)
    learners = context.store.learners()
    progress = class_progress(context)
    cells = {(r["learner"], r["exercise"]): r for r in progress}
    exercises = [{"key": ex.key, "title": ex.title.get(lang, ex.id)} for ex in context.pack]
    table = [{"name": lr["name"], "id": lr["id"],
              "cells": [cells[(lr["id"], e["key"])] for e in exercises]} for lr in learners]
    return render_page(request, "teacher.html", nav="", title=s["teacher_title"], s=s, exercises=exercises,
                       table=table, misconceptions=class_misconceptions(context, lang),
                       class_code=request.app.state.class_code)
