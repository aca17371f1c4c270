"""Levels 4 and 5 of a fill-in exercise on the web (``practice.levels``): ``/exercises/ID?level=4``
shows the level's statement and file in an editor (the learner's latest attempt at that level, so
the work of each level is kept apart), checked as a whole file at that level through the session
(``POST /api/exercises/ID/check`` with ``{"code": ..., "level": 4}``). The fill-in page and the level
pages carry a switch between the three (``switch``)."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException, Request

from alignlings import i18n
from alignlings.grading import levels
from alignlings.content.exercise import Exercise
from alignlings.web import render
from alignlings.web.context import practice, render_page
from alignlings.web.helpers import web_statement
from alignlings.web.i18n import ui


def strings(lang: str) -> dict[str, str]:
    return i18n.lang_table("web.levels")[lang]


def switch(ex: Exercise, lang: str, current: int | None, progress: dict[int, dict] | None = None) -> list[dict]:
    """The level switch: the fill-in page, then levels 4 and 5, each with its link and whether it
    is solved ([] for an exercise without levels)."""
    if not levels.has_levels(ex):
        return []
    s = strings(lang)
    progress = progress or {}
    out = [{"level": None, "label": s["fill_in"].format(n=ex.level), "url": f"/exercises/{ex.key}",
            "current": current is None, "solved": None}]
    for n in levels.LEVELS:
        out.append({"level": n, "label": s[f"level{n}"], "url": f"/exercises/{ex.key}?level={n}",
                    "current": current == n, "solved": bool((progress.get(n) or {}).get("solved"))})
    return out


def last_code(attempts: list[dict], level: int) -> str | None:
    """The learner's latest file at ``level`` since the last reset, or None."""
    for a in reversed(attempts):
        if a.get("level") == level and not a.get("before_reset"):
            return str(a.get("code") or "") or None
    return None


def level_page(request: Request, ex: Exercise, level_arg: str):
    from alignlings.practice.session import UsageError
    from alignlings.web.context import lang_of

    lang = lang_of(request)
    session = practice(request)
    try:
        started = session.start(ex, level_arg, lang=lang)
    except UsageError as exc:
        raise HTTPException(404 if exc.missing else 422, f"{exc.argument}: {exc.message}") from None
    level = started.level
    assert level is not None
    progress = session.level_progress(ex)
    code = last_code(session.attempts(ex), level) or started.text
    s = strings(lang)
    client: dict[str, Any] = {"lang": lang, "t": ui(lang), "lv": s, "exercise": ex.key, "level": level,
                              "start": started.text}
    return render_page(request, "level.html", nav="home", ex=ex, title=ex.title.get(lang, ex.id), level=level,
                       lv=s, levels=switch(ex, lang, level, progress),
                       solved_here=bool((progress.get(level) or {}).get("solved")),
                       statement_html=render.markdown(web_statement(started.statement)), code=code, client=client)
