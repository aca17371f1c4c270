"""The progress page and routes: what was solved, attempts and hints; export and import as JSON.

Progress lives in the engine's SQLite store (``alignlings.practice.store``), shared with the
CLI, so it survives a server restart and shows up in ``alignlings progress`` too.
"""

from __future__ import annotations

import json

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response

from alignlings.web import render
from alignlings.web.context import call, ctx, lang_of, practice, render_page
from alignlings.web.i18n import ui

router = APIRouter()


def rows(request: Request) -> list[dict]:
    lang = lang_of(request)
    return _rows(practice(request).summary(), lang)


def _rows(summary, lang: str) -> list[dict]:
    return [{"id": r.id, "key": r.key, "pack": r.pack, "title": r.title.get(lang, r.id), "kind": r.kind, "level": r.level,
             "solved": r.solved, "attempts": r.attempts, "hints": r.hints, "revealed": r.revealed}
            for r in summary.exercises.values()]


@router.get("/api/progress", tags=["progress"])
def get_progress(request: Request) -> dict:
    """Per exercise: solved, attempts, hints taken, whether the solution was revealed."""
    summary = practice(request).summary()
    first = ctx(request).pack.packs[0].id
    return {"exercises": _rows(summary, lang_of(request)), "summary": summary.by_pack.get(first, {}),
            "summaries": summary.by_pack}


@router.get("/api/progress/export", tags=["progress"])
def export_progress(request: Request) -> Response:
    """All progress as a JSON document (a download); import it on another machine."""
    data = practice(request).export()
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
    counts = call(practice(request).import_, data, only_loaded=True)  # the review schedule is rebuilt at once
    return {"imported": counts}


def _quiz_rows(request: Request, lang: str) -> list[dict]:
    out = []
    for ex in ctx(request).pack:
        if not ex.kind_spec.on_quiz_page:  # the concept quiz (drills count as exercises)
            continue
        latest = practice(request).quiz_answers(ex.pack, ex.id)
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
        stats = practice(request).cloze_stats(ex)
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
    store = practice(request).store
    return render_page(request, "progress.html", nav="progress", title=ui(lang)["nav_progress"],
                       rows=rows(request), quiz=_quiz_rows(request, lang), cloze=_cloze_rows(request, lang),
                       store_path=str(getattr(store, "path", "")))
