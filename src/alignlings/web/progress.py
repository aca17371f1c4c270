"""The progress page and routes: what was solved, attempts and hints; export and import as JSON.

Progress lives in the engine's SQLite store (``alignlings.practice.progress``), shared with the
CLI, so it survives a server restart and shows up in ``alignlings progress`` too.
"""

from __future__ import annotations

import json

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response

from alignlings.practice.service import STORE_ERRORS
from alignlings.web import render
from alignlings.web.context import ctx, lang_of, render_page
from alignlings.web.i18n import ui

router = APIRouter()


def rows(request: Request) -> list[dict]:
    lang = lang_of(request)
    summaries = {p.id: ctx(request).store.summary(p.id) for p in ctx(request).pack.packs}
    out = []
    for ex in ctx(request).pack:
        row = summaries.get(ex.pack, {}).get(ex.id, {})
        out.append({"id": ex.id, "key": ex.key, "pack": ex.pack, "title": ex.title.get(lang, ex.id), "kind": ex.kind, "level": ex.level,
                    "solved": bool(row.get("solved")), "attempts": int(row.get("attempts", 0)),
                    "hints": int(row.get("hints", 0)), "revealed": bool(row.get("revealed"))})
    return out


@router.get("/api/progress", tags=["progress"])
def get_progress(request: Request) -> dict:
    """Per exercise: solved, attempts, hints taken, whether the solution was revealed."""
    store = ctx(request).store
    return {"exercises": rows(request), "summary": store.summary(ctx(request).pack.packs[0].id),
            "summaries": {p.id: store.summary(p.id) for p in ctx(request).pack.packs}}


@router.get("/api/progress/export", tags=["progress"])
def export_progress(request: Request) -> Response:
    """All progress as a JSON document (a download); import it on another machine."""
    data = ctx(request).store.export()
    return Response(json.dumps(data, ensure_ascii=False, indent=1), media_type="application/json",
                    headers={"Content-Disposition": 'attachment; filename="alignlings-progress.json"'})


@router.post("/api/progress/import", tags=["progress"])
async def import_progress(request: Request) -> dict:
    """Merge a JSON export (the body, ``Content-Type: application/json``) into this store.

    Off (403) on a shared server, one started with a token, unless it was started with
    ``--allow-import``: the store is shared, so one learner could mark exercises solved for all.
    Pack, exercise and quiz question ids must be those of the loaded pack. Bad data: 422, never 500.
    """
    if not request.app.state.allow_import:
        raise HTTPException(403, "progress import is off on a shared server (one started with a token); "
                                 "start it with --allow-import to allow it")
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":  # also keeps plain cross-site form posts out
        raise HTTPException(415, "expected Content-Type: application/json")
    try:
        data = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise HTTPException(400, f"not JSON: {exc}") from None
    except RecursionError:
        raise HTTPException(422, "not an alignlings progress export: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer over Python's 4300-digit conversion limit
        raise HTTPException(422, f"not an alignlings progress export: {exc}") from None
    if not isinstance(data, dict):
        raise HTTPException(422, "expected a JSON object (the output of /api/progress/export)")
    pack = ctx(request).pack
    exercises = {ex.id for ex in pack}
    questions = {q.id for ex in pack if ex.is_quiz for q in ex.quiz}  # bug-or-not drills answer as quiz questions
    try:
        counts = ctx(request).store.import_(data, exercises=exercises, questions=questions,
                                            packs={p.id for p in pack.packs})
    except (ValueError, KeyError, TypeError, OverflowError, RecursionError) as exc:
        raise HTTPException(422, f"not an alignlings progress export: {exc}") from None
    from alignlings.practice.review import rebuild_after_import

    counts.update(rebuild_after_import(ctx(request).store, pack, data))  # the review schedule, rebuilt now
    return {"imported": counts}


def _quiz_rows(request: Request, lang: str) -> list[dict]:
    out = []
    for ex in ctx(request).pack:
        if ex.kind != "quiz":
            continue
        try:
            latest = ctx(request).store.quiz_answers(pack=ex.pack) or {}
        except STORE_ERRORS:
            latest = {}
        for q in ex.quiz:
            a = latest.get(q.id)
            out.append({"id": q.id, "question_html": render.inline_markdown(q.question.get(lang, q.id)),
                        "answered": a is not None, "correct": bool(a and a.get("correct"))})
    return out


def _cloze_rows(request: Request, lang: str) -> list[dict]:
    out = []
    for ex in ctx(request).pack:
        if not ex.cloze:
            continue
        try:
            stats = ctx(request).store.cloze_stats(ex.id, pack=ex.pack) or {}
        except STORE_ERRORS:
            stats = {}
        seen = right = 0
        for value in (stats.values() if isinstance(stats, dict) else []):
            if isinstance(value, dict):
                seen += int(value.get("seen", value.get("attempts", 0)) or 0)
                right += int(value.get("right", value.get("correct", 0)) or 0)
        out.append({"id": ex.key, "title": ex.title.get(lang, ex.id), "seen": seen, "right": right})
    return out


@router.get("/progress", include_in_schema=False)
def progress_page(request: Request):
    lang = lang_of(request)
    store = ctx(request).store
    return render_page(request, "progress.html", nav="progress", title=ui(lang)["nav_progress"],
                       rows=rows(request), quiz=_quiz_rows(request, lang), cloze=_cloze_rows(request, lang),
                       store_path=str(getattr(store, "path", "")))
