"""Spot-the-bug drill pages (``kind = "bug"``): an editor for the whole file with line numbers, a
diff view of the learner's change against buggy.py, and the story of the real bug once solved.

Grading goes through ``POST /api/exercises/{id}/check`` with ``{"code": ...}`` (the engine's verdict,
whose ``bug`` entry says which lines changed, what still fails, the wrong fix it matches and a hint
toward the region). ``POST /api/bug/{id}/diff`` only diffs (no grading, nothing recorded).
``bug-or-not`` drills are quiz exercises and use the quiz page.
"""

from __future__ import annotations

import html

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from alignlings import i18n
from alignlings.content import bugdrill
from alignlings.content.exercise import Exercise
from alignlings.web import render
from alignlings.web.context import call, get_exercise, lang_of, practice, render_page
from alignlings.web.helpers import hints_taken, neighbours, page, web_statement
from alignlings.web.i18n import learner, ui
from alignlings.web.kinds import view_of

router = APIRouter()

STRINGS = i18n.lang_table("web.bugdrill")  # strings: locales/{en,zh}.toml [web.bugdrill]


class DiffBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    code: str = Field(max_length=200_000, description="The learner's whole file.")


def bug_exercise(request: Request, exercise_id: str) -> Exercise:
    ex = get_exercise(request, exercise_id)
    if view_of(ex).page != "bug":  # the diff of buggy.py is this page's
        raise HTTPException(404, f"{exercise_id!r} is not a spot-the-bug drill")
    return ex


def diff_html(buggy: str, code: str) -> str:
    """A unified diff of ``code`` against buggy.py, one ``<span>`` per line (added, removed, hunk)."""
    text = bugdrill.unified_diff(buggy, code)
    rows = []
    for line in text.splitlines():
        kind = ("hunk" if line.startswith("@@") else "meta" if line.startswith(("---", "+++"))
                else "add" if line.startswith("+") else "del" if line.startswith("-") else "ctx")
        rows.append(f'<span class="diff-{kind}">{html.escape(line)}</span>')
    return "\n".join(rows)


@router.post("/api/bug/{exercise_id:path}/diff", tags=["exercises"])
def diff(request: Request, exercise_id: str, body: DiffBody) -> dict:
    """The learner's change against buggy.py: ``changes`` (one sentence), ``changed_lines``,
    ``hunks``, ``diff`` (unified text) and ``html``. Nothing is graded or recorded."""
    lang = lang_of(request)
    ex = bug_exercise(request, exercise_id)
    done = call(practice(request).bug_diff, ex, body.code, lang=lang)  # the session's gate: a locked track refuses
    return {"changes": done.changes, "hunks": done.hunks, "changed_lines": done.changed_lines, "diff": done.diff,
            "html": diff_html(ex.buggy_source, body.code)}


@router.get("/api/bug/{exercise_id:path}/story", tags=["exercises"])
def story(request: Request, exercise_id: str) -> dict:
    """The story of the real bug (Markdown and HTML), once the drill is solved; 403 before."""
    lang = lang_of(request)
    ex = bug_exercise(request, exercise_id)
    text = practice(request).bug_story(ex, lang=lang)  # the session's rule: once solved
    if text is None:
        raise HTTPException(403, "the story is shown once the drill is solved")
    return {"story": text, "html": render.markdown(text)}


def last_code(request: Request, ex: Exercise) -> str | None:
    """The learner's latest file since the last reset, if any (the session's rule)."""
    latest = practice(request).latest_attempt(ex)
    return latest["code"] if latest else None


@page("bug")
def bug_page(request: Request, ex: Exercise):
    """The drill's page (``GET /exercises/{id}`` for a bug drill)."""
    lang = lang_of(request)
    texts = ex.texts(lang)
    taken = hints_taken(request, ex)  # as the hint route records them
    story = practice(request).bug_story(ex, lang=lang)
    solved = story is not None
    prev, nxt = neighbours(request, ex, lang)
    code = last_code(request, ex) or ex.buggy_source
    strings = STRINGS.get(lang, STRINGS["en"])
    return render_page(
        request, view_of(ex).template, nav="home", ex=ex, title=ex.title.get(lang, ex.id), s=strings,
        statement_html=render.markdown(web_statement(texts.statement)), code=code,
        hints=[render.inline_markdown(h) for h in texts.hints[:taken]], hints_total=len(texts.hints),
        solved=solved, story_html=render.markdown(story) if story is not None else "",
        diff_html=diff_html(ex.buggy_source, code), prev=prev, next=nxt,
        client={"lang": lang, "t": ui(lang), "s": strings, "exercise": ex.key, "buggy": ex.buggy_source,
                "next": nxt, "l": learner(lang)})
