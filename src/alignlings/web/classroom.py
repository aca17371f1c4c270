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

Why one long module: it is the classroom's routes only (join, teacher pages, CSVs, the teacher's
plan), each a thin call into ``practice.classroom`` and ``practice.report``; they share one
authentication and one CSV writer.
"""

from __future__ import annotations

import csv
import io
import math
import secrets
from http.cookies import SimpleCookie
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from alignlings import i18n
from alignlings.practice.store.sqlite import MAX_LEARNER_NAME, _learner_name
from alignlings.practice.service import STORE_ERRORS
from alignlings.web.checkqueue import address_of
from alignlings.web.context import WebContext, lang_of, render_page
from alignlings.web.guard import _headers, _is_https, _page, _send_error, _without_token
from alignlings.web.i18n import resolve_lang, ui

LEARNER_COOKIE = "alignlings_learner"
TEACHER_COOKIE = "alignlings_teacher"
CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read aloud or from a board
PUBLIC = ("/join", "/api/join", "/static/", "/api/health", "/favicon.ico")
TEACHER = ("/teacher", "/api/teacher/", "/docs", "/redoc", "/openapi.json")  # the API docs: the teacher's too

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
                            "headers": [(b"location", join_url(scope).encode("latin-1")), (b"content-length", b"0"),
                                        (b"cache-control", b"no-store")]})
                return await send({"type": "http.response.body", "body": b""})
            return await _send_error(scope, send, 401, _scope_strings(scope)["join_first"])
        state = scope.setdefault("state", {})
        state["learner"] = learner
        state["learner_token"] = token
        state["ctx"] = LearnerContext(self.context, self.context.store.for_learner(learner["id"]), learner)
        # who is asking is settled here; whether they may (a locked track) is the session's gate
        # (practice.session.gated), which every route's action passes: a refusal is a 403 with its reason
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


def safe_next(value: object) -> str:
    """Where to go after joining: a path on this server (``/exercises/x?lang=zh``), else ``/``.
    Never another site (``//evil``, ``/\\evil``, ``https:...``) nor the join page itself."""
    if not isinstance(value, str) or not value.startswith("/") or value.startswith(("//", "/\\")) \
            or len(value) > 500 or any(ord(ch) < 32 for ch in value):
        return "/"
    path = value.split("?", 1)[0]
    if path.startswith(("/join", "/api/", "/teacher")) or "\\" in path:
        return "/"
    return value


def join_url(scope) -> str:
    """``/join`` that comes back to the page asked for, in the language asked for (``?lang=``)."""
    from urllib.parse import parse_qs, urlencode

    query = scope.get("query_string", b"").decode("latin-1")
    asked = scope.get("path", "/") + (f"?{query}" if query else "")
    params = {}
    if scope.get("path", "/") != "/" and safe_next(asked) != "/":
        params["next"] = asked
    lang = parse_qs(query).get("lang", [""])[0]
    if lang in i18n.LANGS:
        params["lang"] = lang
    return "/join" + (f"?{urlencode(params)}" if params else "")


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
JOIN_WINDOW_S = 600.0  # max_joins_per_address counts the joins (and recovery tries) of 10 minutes


class JoinBody(BaseModel):
    """What ``/api/join`` reads (the route parses it itself, so that every refusal is plain words
    in the learner's language rather than a validation dump)."""
    name: str = Field("", description="The learner's name, as the teacher will see it (1 to 60 characters).")
    code: str = Field("", description="The class code printed when the server started.")
    recovery: str = Field("", description="A recovery code instead of name and code: come back as that learner.")
    next: str = Field("/", description="The page to go to after joining (a path on this server).")


@router.get("/join", include_in_schema=False)
def join_page(request: Request):
    s = _s(request)
    nxt = safe_next(request.query_params.get("next", "/"))
    return render_page(request, "join.html", nav="", title=s["join_title"], s=s, next=nxt,
                       client={"lang": lang_of(request), "t": ui(lang_of(request)), "s": s, "next": nxt})


def _refuse(status: int, detail: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def _name_problem(name: object, s: dict[str, str]) -> str | None:
    if not isinstance(name, str) or not " ".join(name.split()):
        return s["name_missing"]
    name = " ".join(name.split())
    if len(name) > MAX_LEARNER_NAME:
        return s["name_too_long"]
    try:
        _learner_name(name)
    except ValueError:
        return s["name_bad"]
    return None


@router.post("/api/join", tags=["classroom"], openapi_extra={"requestBody": {
    "required": True, "content": {"application/json": {"schema": JoinBody.model_json_schema()}}}})
async def join(request: Request) -> Response:
    """Join with a name and the class code, or come back with a recovery code: sets the learner's
    cookie (their key to their progress). A new learner's answer carries their ``recovery_code``
    (shown once here, and again on their progress page in this browser). Refusals are plain words
    in the request's language; one address may try ``max_joins_per_address`` times per 10 minutes."""
    s = _s(request)
    wait = request.app.state.join_limiter.hit(address_of(request))
    if wait:
        minutes = max(1, math.ceil(wait / 60))
        return _refuse(429, s["too_many_joins"].format(minutes=minutes), {"Retry-After": str(math.ceil(wait))})
    try:
        raw = await request.json()
    except ValueError:
        raw = None
    if not isinstance(raw, dict) or not all(isinstance(raw.get(k, ""), str) for k in ("name", "code", "recovery", "next")):
        return _refuse(422, s["bad_request"])
    store = request.app.state.ctx.store
    nxt = safe_next(raw.get("next", "/"))
    recovery = raw.get("recovery", "").strip()
    if recovery:
        found = await run_in_threadpool(store.recover_learner, recovery[:64])
        if found is None:
            return _refuse(403, s["wrong_recovery"])
        learner, token = found
        body = {"learner": learner["id"], "name": learner["name"], "next": nxt, "recovered": True}
    else:
        expected = await run_in_threadpool(current_class_code, request.app)
        code = raw.get("code", "").strip().upper()[:64]
        if not secrets.compare_digest(code.encode(), expected.encode()):
            return _refuse(403, s["wrong_code"])
        problem = _name_problem(raw.get("name", "")[:200], s)
        if problem:
            return _refuse(422, problem)

        def add() -> tuple[str, str, str]:
            learner_id, tok = store.add_learner(raw["name"])
            return learner_id, tok, store.issue_recovery_code(learner_id, tok)

        learner_id, token, recovery_code = await run_in_threadpool(add)
        body = {"learner": learner_id, "name": " ".join(raw["name"].split()), "next": nxt,
                "recovery_code": recovery_code}
    response = JSONResponse(body)
    response.headers.append("set-cookie", set_cookie_header(request.scope, LEARNER_COOKIE, token).decode())
    return response


def current_class_code(app) -> str:
    """The class code as kept in the database (another server sharing it may have changed it)."""
    code = app.state.ctx.store.class_code(lambda: app.state.class_code)
    app.state.class_code = code
    return code


def recovery_code_of(request: Request) -> str | None:
    """The signed-in learner's recovery code, when this browser holds it (templates: progress page)."""
    token = getattr(request.state, "learner_token", None)
    if not token:
        return None
    try:
        return request.app.state.ctx.store.recovery_code(token)
    except STORE_ERRORS:
        return None


def in_class(request: Request) -> bool:
    """Whether the page is served to a learner of a class (templates hide Import and file paths)."""
    return getattr(request.state, "learner", None) is not None


# -- locked tracks (the teacher's plan) ------------------------------------------------------------
def lock_reasons(context: WebContext, learner: str, lang: str = "en") -> dict[str, str]:
    """Track key -> why it is locked for ``learner``, in ``lang``: the tracks the teacher locked whose
    ``requires`` the learner has not all solved yet (each required track: every exercise solved)."""
    from alignlings.practice.session import Practice

    if not learner:
        return {}
    return Practice(context.store.for_learner(learner), context.pack).track_locks(lang)  # the session's rule


def lock_reason_of_exercise(context: WebContext, learner: str, key: str, lang: str = "en") -> str | None:
    """Why ``learner`` may not check exercise ``key`` now (its track is locked for them), else None."""
    from alignlings.content.pack import PackError

    try:
        ex = context.pack.get(key)
    except PackError:
        return None  # the route answers 404 in its own words
    track = context.pack.track_of(ex.key)
    return lock_reasons(context, learner, lang).get(track.key) if track is not None else None


def track_locks_for(request: Request) -> dict[str, str]:
    """For the home page: the tracks locked for the signed-in learner, with the reason (none outside a class)."""
    learner = getattr(request.state, "learner", None)
    if learner is None:
        return {}
    try:
        return lock_reasons(request.app.state.ctx, learner["id"], lang_of(request))
    except STORE_ERRORS:
        return {}


def lock_reason_for(request: Request, key: str) -> str:
    """For an exercise page: why the signed-in learner cannot check ``key`` yet ('' when they can)."""
    learner = getattr(request.state, "learner", None)
    if learner is None:
        return ""
    try:
        return lock_reason_of_exercise(request.app.state.ctx, learner["id"], key, lang_of(request)) or ""
    except STORE_ERRORS:
        return ""


# -- the teacher's view ------------------------------------------------------------------------
def status_of(row: dict) -> str:
    from alignlings.practice.session import status_of as status

    return status(row)


def class_progress(context: WebContext, pack_id: str | None = None, track: str | None = None,
                   computed: Any = None) -> list[dict]:
    """One row per learner and exercise: ``learner`` (id), ``name``, ``exercise`` (key), ``pack``,
    ``track``, ``status`` (solved, attempted, not_started), ``attempts``, ``hints`` (both kinds: the
    exercise's and per blank), ``solution_seen``; only the exercises of ``pack_id`` and ``track`` when
    given (``practice.report.selected``). ``Practice.class_report``: a few queries per pack, however
    many learners. ``computed``: the request's ``Practice.class_report``, when it has one already."""
    from alignlings.practice import report
    from alignlings.practice.session import Practice

    pack = context.pack
    wanted = {ex.key: report.track_of(pack, ex) for ex in report.selected(pack, pack_id, track)}
    computed = computed or Practice(context.store, pack).class_report()
    return [row | {"track": wanted[row["exercise"]]} for row in computed.progress if row["exercise"] in wanted]


def class_misconceptions(context: WebContext, lang: str = "en", pack_id: str | None = None,
                         track: str | None = None, computed: Any = None) -> list[dict]:
    """Per misconception: how many learners' attempts hit it (``learners``, most common first), the
    exercise, the blank, a link to it and the misconception's feedback (``Practice.class_report``;
    ``computed``: the request's, when it has one already); only those of the exercises of ``pack_id``
    and ``track`` when given (``practice.report.selected``)."""
    from alignlings.practice import report
    from alignlings.practice.session import Practice

    wanted = {ex.key for ex in report.selected(context.pack, pack_id, track)}
    return [r for r in (computed or Practice(context.store, context.pack).class_report(lang)).misconceptions
            if r["exercise"] in wanted]


def _csv(rows: list[dict], columns: list[str], filename: str) -> Response:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for r in rows:  # a cell starting with = + - @ would be a formula in a spreadsheet: quote it
        writer.writerow({k: ("'" + v if isinstance(v, str) and v and v[0] in "=+-@" else v) for k, v in r.items()})
    return Response(buf.getvalue(), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{filename}"'})


PROGRESS_COLUMNS = ["name", "learner", "track", "exercise", "pack", "status", "attempts", "hints", "solution_seen",
                    "highest_level"]
LEARNER_COLUMNS = ["name", "learner", "last_activity", "time_on_task_s", "solved_count", "solved", "failing_blanks",
                   "misconceptions", "wrong_choices", "predictions", "predictions_right", "hints", "revealed",
                   "last_submission", "levels"]
EXERCISE_COLUMNS = ["track", "exercise", "pack", "title", "kind", "solved", "stuck", "median_attempts", "median_seconds",
                    "misconceptions", "blanks_wrong", "answered", "answered_right", "wrong_options"]
MISCONCEPTION_COLUMNS = ["misconception", "exercise", "pack", "blank", "learners", "feedback"]


def _teacher_context(request: Request) -> WebContext:
    if not getattr(request.state, "teacher", False):  # the middleware lets only the teacher through
        raise HTTPException(403, "teacher only")
    return request.app.state.ctx


def _filters(request: Request) -> tuple[str | None, str | None]:
    """``?pack=`` and ``?track=`` (empty: all), checked against the loaded course (422 otherwise)."""
    from alignlings.practice import report

    pack_id = request.query_params.get("pack") or None
    track = request.query_params.get("track") or None
    try:
        report.selected(request.app.state.ctx.pack, pack_id, track)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    return pack_id, track


def classroom(context: WebContext):
    """The teacher's actions on this class (``practice.classroom.Classroom``): routes call it, never the store."""
    from alignlings.practice.classroom import Classroom

    return Classroom(context.store, context.pack)


def _teacher_call(fn, *args, **kw):
    """Run a ``Classroom`` action, its UsageError as the HTTP error (404 when missing, else 422)."""
    from alignlings.practice.session import UsageError

    try:
        return fn(*args, **kw)
    except UsageError as exc:
        raise HTTPException(404 if exc.missing else 422, exc.message) from None


def class_report(context: WebContext, lang: str = "en", pack_id: str | None = None,
                 track: str | None = None) -> dict:
    """Who is stuck where: per learner and per exercise (``practice.report``), one read of the history."""
    return classroom(context).report(lang, pack_id, track)


@router.get("/api/teacher/class", tags=["classroom"])
def class_json(request: Request) -> dict:
    """The class: learners, learners x exercises, misconceptions and the report of who is stuck
    where (teacher token only); ``?pack=`` and ``?track=`` select exercises."""
    from alignlings.practice.session import Practice

    context = _teacher_context(request)
    pack_id, track = _filters(request)
    lang = lang_of(request)
    computed = Practice(context.store, context.pack).class_report(lang)  # once per request
    return {"learners": computed.learners, "progress": class_progress(context, pack_id, track, computed),
            "misconceptions": class_misconceptions(context, lang, pack_id, track, computed),
            "report": class_report(context, lang, pack_id, track)}


@router.get("/teacher/progress.csv", include_in_schema=False)
def progress_csv(request: Request) -> Response:
    context = _teacher_context(request)
    rows = class_progress(context, *_filters(request))
    course = context.pack
    track_at = {t.key: i for i, t in enumerate(course.tracks)}
    exercise_at = {ex.key: i for i, ex in enumerate(course)}
    # grouped by track in the course's order (a teacher's own exercises come together), then by learner,
    # each learner's exercises in course order
    rows.sort(key=lambda r: (track_at.get(r["track"], len(track_at)), r["name"], r["learner"],
                             exercise_at.get(r["exercise"], 0)))
    return _csv(rows, PROGRESS_COLUMNS, "class-progress.csv")


@router.get("/teacher/misconceptions.csv", include_in_schema=False)
def misconceptions_csv(request: Request) -> Response:
    rows = class_misconceptions(_teacher_context(request), lang_of(request), *_filters(request))
    return _csv(rows, MISCONCEPTION_COLUMNS, "class-misconceptions.csv")


def _when(value: str | None) -> str:
    """A stored UTC timestamp as a spreadsheet reads it: ``2026-12-02 06:30:05 UTC``."""
    return f"{value[:19].replace('T', ' ')} UTC" if value else ""


def learner_cells(r: dict) -> dict:
    """One learner row of the report as plain spreadsheet cells (no JSON): lists joined by "; "."""
    last = r["last_submission"]
    return {
        "name": r["name"], "learner": r["id"], "last_activity": _when(r["last_activity"]),
        "time_on_task_s": r["time_on_task_s"], "solved_count": len(r["solved"]),
        "solved": "; ".join(f"{x['exercise']} ({_when(x['at'])})" for x in r["solved"]),
        "failing_blanks": "; ".join(f"{key}: blanks {', '.join(map(str, blanks))}"
                                    for key, blanks in r["failing_blanks"].items()),
        "misconceptions": "; ".join(f"{name} ({n}×)" for name, n in r["misconceptions"]),
        "wrong_choices": "; ".join(f"{w['exercise']} [{w['kind']}] {w.get('question_text') or w['question']} -> "
                                   f"{w['choice']}" for w in r["wrong_choices"]),
        "predictions": r["predictions"], "predictions_right": r["predictions_right"], "hints": r["hints"],
        "revealed": "; ".join(r["revealed"]),
        "last_submission": (f"{last['exercise']} ({_when(last['at'])}, {'passed' if last['passed'] else 'not passed'})"
                            if last else ""),
    }


def exercise_cells(r: dict) -> dict:
    """One exercise row of the report as plain spreadsheet cells (no JSON)."""
    return {
        **{k: r[k] for k in ("track", "exercise", "pack", "title", "kind", "solved", "stuck", "answered",
                             "answered_right")},
        "median_attempts": "" if r["median_attempts"] is None else r["median_attempts"],
        "median_seconds": "" if r["median_seconds"] is None else r["median_seconds"],
        "misconceptions": "; ".join(f"{m['id']} ({m['learners']} learners)" for m in r["misconceptions"]),
        "blanks_wrong": "; ".join(f"blank {b['blank']} ({b['times']}×)" for b in r["blanks_wrong"]),
        "wrong_options": "; ".join(f"{q['text']} -> {w['option']} “{w['text']}” ({w['learners']} learners)"
                                   for q in r["questions"] for w in q["wrong_options"]),
    }


@router.get("/teacher/learners.csv", include_in_schema=False)
def learners_csv(request: Request) -> Response:
    report = class_report(_teacher_context(request), lang_of(request), *_filters(request))
    return _csv([learner_cells(r) for r in report["learners"]], LEARNER_COLUMNS, "class-learners.csv")


SOLVED_COLUMNS = ["name", "learner", "track", "exercise", "pack", "title", "solved_at"]


@router.get("/teacher/solved.csv", include_in_schema=False)
def solved_csv(request: Request) -> Response:
    """Long format: one row per learner and exercise solved (when: the first passing attempt, UTC)."""
    context = _teacher_context(request)
    lang = lang_of(request)
    report = class_report(context, lang, *_filters(request))
    rows = []
    for r in report["learners"]:
        for x in r["solved"]:
            ex = context.pack.exercises.get(x["exercise"])
            rows.append({"name": r["name"], "learner": r["id"], "exercise": x["exercise"],
                         "track": report_track(context, ex), "pack": ex.pack if ex is not None else "",
                         "title": (ex.title.get(lang) or ex.title.get("en") or ex.id) if ex is not None else "",
                         "solved_at": _when(x["at"])})
    return _csv(rows, SOLVED_COLUMNS, "class-solved.csv")


def report_track(context: WebContext, ex) -> str:
    from alignlings.practice import report

    return report.track_of(context.pack, ex) if ex is not None else ""


@router.get("/teacher/exercises.csv", include_in_schema=False)
def exercises_csv(request: Request) -> Response:
    report = class_report(_teacher_context(request), lang_of(request), *_filters(request))
    return _csv([exercise_cells(r) for r in report["exercises"]], EXERCISE_COLUMNS, "class-exercises.csv")


def _duration(seconds, s: dict[str, str] | None = None) -> str:
    """Seconds as the teacher reads them, in the page's language: "21 s", "4 min 05 s", "12 min",
    "1 h 05 min" (``s``: the page's strings; English without)."""
    if seconds is None:
        return ""
    s = s or STRINGS["en"]
    seconds = max(0, int(round(float(seconds))))
    if seconds < 60:
        return s["seconds"].format(s=seconds)
    if seconds < 600:
        return s["minutes_seconds"].format(m=seconds // 60, s=f"{seconds % 60:02d}")
    if seconds < 3600:
        return s["minutes"].format(m=seconds // 60)
    return s["hours"].format(h=seconds // 3600, m=f"{seconds % 3600 // 60:02d}")


def plural(s: dict[str, str], key: str, n: int) -> str:
    """``s[key + "_one"]`` for 1, ``s[key + "_many"]`` otherwise, with ``{n}`` filled in."""
    return s[f"{key}_one" if n == 1 else f"{key}_many"].format(n=n)


@router.get("/teacher", include_in_schema=False)
def teacher_page(request: Request):
    context = _teacher_context(request)
    lang, s = lang_of(request), _s(request)
    pack_id, track = _filters(request)
    from alignlings.practice import report as rp
    from alignlings.practice.session import Practice

    computed = Practice(context.store, context.pack).class_report(lang)  # once per request
    learners = computed.learners
    progress = class_progress(context, pack_id, track, computed)
    cells = {(r["learner"], r["exercise"]): r for r in progress}
    chosen = rp.selected(context.pack, pack_id, track)
    exercises = [{"key": ex.key, "title": ex.title.get(lang, ex.id), "track": rp.track_of(context.pack, ex)}
                 for ex in chosen]
    table = [{"name": lr["name"], "id": lr["id"],
              "cells": [cells[(lr["id"], e["key"])] for e in exercises]} for lr in learners]
    from urllib.parse import urlencode

    # kept by every CSV link: the filter, and the page's language (titles, question and option texts)
    query = urlencode([(k, v) for k, v in (("pack", pack_id), ("track", track), ("lang", lang)) if v])
    return render_page(request, "teacher.html", nav="", title=s["teacher_title"], s=s, exercises=exercises,
                       table=table, misconceptions=class_misconceptions(context, lang, pack_id, track, computed),
                       class_code=current_class_code(request.app), learners=learners,
                       removed=context.store.learners(removed=True),
                       report=class_report(context, lang, pack_id, track),
                       duration=lambda seconds: _duration(seconds, s), plural=lambda key, n: plural(s, key, n),
                       packs=[p.id for p in context.pack.packs], tracks=[t.key for t in context.pack.tracks],
                       chosen_pack=pack_id or "", chosen_track=track or "", query=("?" + query) if query else "",
                       plan_tracks=track_rows(context, lang),
                       assignments=_teacher_call(classroom(context).assignment_reports),
                       class_interviews=context.store.class_interviews(),
                       all_exercises=[{"key": ex.key, "title": ex.title.get(lang) or ex.title.get("en") or ex.id}
                                      for ex in context.pack],
                       client={"lang": lang, "t": ui(lang), "s": s})


# -- the teacher manages learners ------------------------------------------------------------------
class RenameBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=200, description="The learner's new name (1 to 60 characters).")


class MergeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    into: str = Field(max_length=64, description="The learner (id) who keeps the merged history.")


class RemoveBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    history: str = Field("keep", pattern="^(keep|delete)$",
                         description="keep: the rows stay (the learner only leaves the list); "
                                     "delete: the rows are deleted, and returned as an export first.")


@router.post("/api/teacher/learners/{learner}/rename", tags=["classroom"])
def rename_learner(request: Request, learner: str, body: RenameBody) -> dict:
    """Rename a learner (teacher token only)."""
    return _teacher_call(classroom(_teacher_context(request)).rename, learner, body.name)


@router.post("/api/teacher/learners/{learner}/merge", tags=["classroom"])
def merge_learner(request: Request, learner: str, body: MergeBody) -> dict:
    """Merge ``learner`` (e.g. the empty second entry of someone who re-joined) into ``into``: their
    history moves there and their browsers sign in as ``into``. Returns the rows moved per table."""
    return {"into": body.into, "moved": _teacher_call(classroom(_teacher_context(request)).merge, learner, body.into)}


@router.post("/api/teacher/learners/{learner}/remove", tags=["classroom"])
def remove_learner(request: Request, learner: str, body: RemoveBody) -> dict:
    """Take a learner off the class list; ``history``: keep (default) or delete. The answer always
    carries the learner's ``export`` (the JSON of ``/api/progress/export``), taken before anything changed."""
    exported = _teacher_call(classroom(_teacher_context(request)).remove, learner, keep_history=body.history == "keep")
    return {"removed": learner, "history": body.history, "export": exported}


@router.post("/api/teacher/learners/{learner}/recovery", tags=["classroom"])
def new_recovery_code(request: Request, learner: str) -> dict:
    """A new recovery code for a learner who lost theirs (the old one stops working); give it to them."""
    name, code = _teacher_call(classroom(_teacher_context(request)).new_recovery_code, learner)
    return {"learner": learner, "name": name, "recovery_code": code}


@router.get("/api/teacher/learners/{learner}/export", tags=["classroom"])
def export_learner(request: Request, learner: str) -> Response:
    """One learner's whole history as a JSON download (the format of ``/api/progress/export``)."""
    import json

    data = _teacher_call(classroom(_teacher_context(request)).export_learner, learner)
    return Response(json.dumps(data, ensure_ascii=False), media_type="application/json",
                    headers={"Content-Disposition": f'attachment; filename="learner-{learner}.json"'})


# -- the teacher's plan: locked tracks and assignments ------------------------------------------------
class LockBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    track: str = Field(max_length=200, description="The track (pack/id, or its id when one pack has it).")
    locked: bool = Field(True, description="true: lock it until its requires are solved; false: open it.")


class AssignmentBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = Field(max_length=200, description="What the learners will see it called (1 to 120 characters).")
    exercises: list[str] = Field(max_length=500, description="The exercises (keys as in /api/exercises).")
    due: str = Field(max_length=64, description="When it is due: ISO 8601 (a time without offset is UTC; a date "
                                                "alone is the end of that day, UTC).")


def track_rows(context: WebContext, lang: str = "en") -> list[dict]:
    """Every track of the course with ``key``, ``title``, ``requires`` (titles) and ``locked``."""
    return classroom(context).track_rows(lang)


@router.post("/api/teacher/tracks/lock", tags=["classroom"])
def lock_track(request: Request, body: LockBody) -> dict:
    """Lock a track until each learner has solved the tracks it ``requires`` (or open it again):
    learners see it locked with the reason, and their checks, hints and solutions on its exercises
    are refused (403) until then. A track that requires nothing cannot be locked (422)."""
    key = _teacher_call(classroom(_teacher_context(request)).lock, body.track, body.locked)
    return {"track": key, "locked": body.locked}


@router.post("/api/teacher/assignments", tags=["classroom"])
def add_assignment(request: Request, body: AssignmentBody) -> dict:
    """Give an assignment: a set of exercises with a due time; ``/teacher/assignments/ID`` says who
    finished by then."""
    return _teacher_call(classroom(_teacher_context(request)).add_assignment, body.title, body.exercises, body.due,
                         lang=lang_of(request))


@router.post("/api/teacher/assignments/{assignment}/remove", tags=["classroom"])
def remove_assignment(request: Request, assignment: str) -> dict:
    """Delete an assignment (the learners' work on its exercises stays)."""
    _teacher_call(classroom(_teacher_context(request)).remove_assignment, assignment)
    return {"removed": assignment}


def assignment_report(context: WebContext, assignment: str) -> dict:
    """An assignment with ``learners`` (``practice.report.assignment_rows``) and ``finished_on_time``."""
    return _teacher_call(classroom(context).assignment_report, assignment)


@router.get("/api/teacher/assignments", tags=["classroom"])
def assignments_json(request: Request) -> dict:
    """Every assignment with its report: per learner, what they solved and when, what is missing,
    when they finished and whether that was by the due time."""
    context = _teacher_context(request)
    return {"assignments": _teacher_call(classroom(context).assignment_reports)}


ASSIGNMENT_COLUMNS = ["name", "learner", "solved", "total", "finished_at", "on_time", "missing"]


@router.get("/teacher/assignments/{assignment}/report.csv", include_in_schema=False)
def assignment_csv(request: Request, assignment: str) -> Response:
    found = assignment_report(_teacher_context(request), assignment)
    rows = [{"name": r["name"], "learner": r["id"], "solved": len(r["solved"]), "total": len(found["exercises"]),
             "finished_at": r["finished_at"] or "", "on_time": "yes" if r["on_time"] else "no",
             "missing": " ".join(r["missing"])} for r in found["learners"]]
    return _csv(rows, ASSIGNMENT_COLUMNS, f"assignment-{assignment}.csv")


@router.get("/teacher/assignments/{assignment}", include_in_schema=False)
def assignment_page(request: Request, assignment: str):
    context = _teacher_context(request)
    lang, s = lang_of(request), _s(request)
    found = assignment_report(context, assignment)
    titles = {}
    for key in found["exercises"]:
        ex = context.pack.exercises.get(key)
        titles[key] = (ex.title.get(lang) or ex.title.get("en") or ex.id) if ex is not None else key
    return render_page(request, "teacher_assignment.html", nav="", title=found["title"], s=s, a=found,
                       titles=titles, client={"lang": lang, "t": ui(lang), "s": s})
