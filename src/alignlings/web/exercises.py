"""Exercise pages and routes: statement, template with inline blanks, check, hints, reveal.

``POST /api/exercises/{id}/check`` returns the engine's verdict object unchanged (the JSON of
``alignlings check --json``); it is graded through the bounded queue (429 when full).
"""

from __future__ import annotations

import html
import logging
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from alignlings.content import blanks as bl
from alignlings.content.exercise import Exercise
from alignlings.practice.session import blank_hints
from alignlings.web import render
from alignlings.web import verdict as web_verdict
from alignlings.web.i18n import ui
from alignlings.web.context import call, ctx, get_exercise, graded, lang_of, practice, render_page
from alignlings.web.checkqueue import client_key
from alignlings.web.helpers import PAGES, hints_taken, public_question, web_statement  # noqa: F401 - re-exported
from alignlings.web.kinds import view_of

router = APIRouter()
log = logging.getLogger("alignlings.web")

MAX_FILL_CHARS = 2000


class CheckBody(BaseModel):
    """Either the whole file (``code``) or one string per blank, in blank order (``fills``)."""

    model_config = ConfigDict(extra="forbid")
    code: str | None = Field(default=None, max_length=200_000, description="The learner's whole file.")
    fills: list[str] | None = Field(default=None, max_length=64, description="One fill per blank, in order.")
    level: int | None = Field(default=None, ge=4, le=5, description="Grade the whole file at level 4 or 5.")


def code_exercise(request: Request, exercise_id: str) -> Exercise:
    ex = get_exercise(request, exercise_id)
    if not ex.kind_spec.graded_as_file:
        raise HTTPException(404, f"{exercise_id!r} is a quiz: use /api/quiz")
    return ex


def _comments(ex: Exercise, lang: str) -> dict[str, str] | None:
    return ex.texts(lang).comments if lang != "en" else None


def _blanks(ex: Exercise) -> list[bl.Blank]:
    return ex.kind_spec.blanks(ex)


def last_attempt(request: Request, ex: Exercise) -> tuple[dict[int, str], list[dict[str, Any]]]:
    """The latest attempt since the last reset: its fills (to put back into the inputs) and the
    ✓/✗ mark of each blank (``index``, ``fill``, ``passed``, ``message``). Empty if none."""
    latest = practice(request).latest_attempt(ex, level=0)  # the session's rule; None when the store cannot be read
    if latest is None:
        return {}, []
    found = bl.extract_fills(latest["code"], ex.solution_source, _blanks(ex))
    fills: dict[int, str] = {i: f for i, f in found.items() if f and f != bl.PLACEHOLDER}
    marks = [{"index": b.get("index"), "fill": fills.get(int(b.get("index") or 0), ""), "passed": b.get("passed"),
              "message": b.get("message") or ""}
             for b in (latest["verdict"].get("blanks") or []) if isinstance(b, dict)]
    return fills, marks


def last_fills(request: Request, ex: Exercise) -> dict[int, str]:
    """The fills of the learner's latest attempt, to put back into the inputs (empty if none)."""
    return last_attempt(request, ex)[0]


def template_html(ex: Exercise, lang: str, fills: dict[int, str] | None = None) -> str:
    """The template in ``lang``, highlighted, with an input per blank and a feedback row under it
    (and a hint button after the blank where the pack has hints for it)."""
    texts, blanks = ex.texts(lang), _blanks(ex)
    per_blank = blank_hints(ex, lang)
    strings = ui(lang)
    marks = {b.index: f"@@ALIGNLINGS_BLANK_{b.index}@@" for b in blanks}
    marked = bl.render(ex.solution_source, blanks, marks, todos=list(texts.blanks), comments=_comments(ex, lang))
    holes: list[render.Hole] = []
    after_line: dict[int, str] = {}
    source = marked
    for b in blanks:  # swap each marker for _____ so the lexer sees the template, and note where
        start = source.index(marks[b.index])
        source = source[:start] + bl.PLACEHOLDER + source[start + len(marks[b.index]):]
        todo = texts.blanks[b.index - 1] if b.index - 1 < len(texts.blanks) else ""
        value = html.escape((fills or {}).get(b.index, ""), quote=True)
        holes.append(render.Hole(start, start + len(bl.PLACEHOLDER), (
            f'<input class="blank" data-index="{b.index}" id="blank-{b.index}" value="{value}" '
            f'placeholder="TODO {b.index}" aria-label="TODO {b.index}: {html.escape(todo, quote=True)}" '
            f'spellcheck="false" autocomplete="off" autocapitalize="off">'
            f'<span class="mark" data-index="{b.index}"></span>'
            + (f'<button type="button" class="blank-hint" data-index="{b.index}" '
               f'aria-label="{html.escape(strings["blank_hint_label"].format(n=b.index), quote=True)}" '
               f'title="{html.escape(strings["blank_hint_label"].format(n=b.index), quote=True)}">?</button>'
               if b.index - 1 < len(per_blank) and per_blank[b.index - 1] else ""))))
        line = source.count("\n", 0, start) + 1
        after_line[line] = after_line.get(line, "") + (
            f'<span class="blank-fb" data-index="{b.index}" hidden></span>'
            f'<span class="blank-hints" data-index="{b.index}" hidden></span>')
    return render.highlight(source, holes, after_line)


# -- JSON API --------------------------------------------------------------------------------
@router.get("/api/exercises", tags=["exercises"])
def list_exercises(request: Request) -> list[dict]:
    """The pack's exercises in order, with the learner's progress on each."""
    lang = lang_of(request)
    rows = practice(request).summary().exercises
    out = []
    for ex in ctx(request).pack:
        row = rows[ex.key]
        out.append({"id": ex.id, "key": ex.key, "pack": ex.pack, "kind": ex.kind, "level": ex.level, "title": ex.title.get(lang, ex.id),
                    "cloze": ex.cloze, "solved": row.solved, "attempts": row.attempts, "hints": row.hints,
                    "revealed": row.revealed, "levels": row.levels, "highest_level": row.highest_level,
                    "url": f"/exercises/{ex.key}"})
    return out


@router.get("/api/exercises/{exercise_id:path}", tags=["exercises"])
def exercise_detail(request: Request, exercise_id: str) -> dict:
    """Statement (Markdown and HTML), the template, the blanks with their TODO text, hint counts."""
    from alignlings.grading.grader import template_for

    lang = lang_of(request)
    ex = get_exercise(request, exercise_id)
    texts = ex.texts(lang)
    out = {"id": ex.id, "key": ex.key, "pack": ex.pack, "kind": ex.kind, "level": ex.level, "title": ex.title.get(lang, ex.id),
           "statement": texts.statement, "statement_html": render.markdown(texts.statement),
           "hints_total": len(texts.hints), "hints_taken": hints_taken(request, ex), "cloze": ex.cloze}
    if ex.kind_spec.graded_as_file:
        out["template"] = template_for(ex, lang)
        out["blanks"] = [{"index": b.index, "name": b.name,
                          "todo": texts.blanks[b.index - 1] if b.index - 1 < len(texts.blanks) else ""}
                         for b in _blanks(ex)]
    else:
        out["questions"] = [public_question(ex, q, lang) for q in ex.quiz]
    return out


@router.post("/api/exercises/{exercise_id:path}/check", tags=["exercises"])
async def check(request: Request, exercise_id: str, body: CheckBody) -> dict:
    """Grade ``{"code": ...}`` or ``{"fills": [...]}``; the verdict is the engine's, unchanged."""
    ex = code_exercise(request, exercise_id)
    if (body.code is None) == (body.fills is None):
        raise HTTPException(422, "give exactly one of 'code' and 'fills'")
    if body.fills is not None:
        n = len(_blanks(ex))
        if len(body.fills) != n:
            raise HTTPException(422, f"fills: expected {n} fills for {ex.id}, got {len(body.fills)}")
        if any(len(f) > MAX_FILL_CHARS for f in body.fills):
            raise HTTPException(422, f"fills: each fill is at most {MAX_FILL_CHARS} characters")
    lang, session = lang_of(request), practice(request)
    stops = ctx(request).check_queue.stops

    def grade() -> dict:
        from alignlings.grading.grader import template_for
        from alignlings.grading.sandbox import STOP

        STOP.set(stop)  # this worker's context: the page's "Stop" ends the jobs of this check
        checked = call(lambda: session.check(ex, code=body.code, fills=body.fills, lang=lang, level=body.level))
        verdict: Any = checked.verdict
        if verdict.get("level"):  # graded at level 4 or 5 (web/levels.py): the verdict as it is
            return verdict
        if body.fills is None:  # a whole file: its own line numbers are the ones the learner sees
            return web_verdict.file_for_web(verdict, lang=lang) if view_of(ex).whole_file else verdict
        return web_verdict.for_web(verdict, template=template_for(ex, lang), fills=body.fills,
                                   graded_code=checked.code, lang=lang)

    with stops.running(client_key(request), ex.key) as stop:
        return await graded(request, grade, what=ex.key)


@router.post("/api/exercises/{exercise_id:path}/stop", tags=["exercises"])
def stop_check(request: Request, exercise_id: str) -> dict:
    """Stop this learner's checks of the exercise, running or waiting: each answers at once with a
    verdict whose error is ``stopped`` (nothing is recorded). ``stopped``: how many there were."""
    ex = code_exercise(request, exercise_id)
    return {"exercise": ex.key, "stopped": ctx(request).check_queue.stops.stop(client_key(request), ex.key)}


class HintBody(BaseModel):
    """Empty for the exercise's next hint; ``blank`` for the next hint about one TODO."""

    model_config = ConfigDict(extra="forbid")
    blank: int | None = Field(default=None, ge=1, description="The TODO number (1-based).")


def blank_hints_taken(request: Request, ex: Exercise) -> dict[int, int]:
    """Blank -> how many of its hints were taken since the last reset."""
    return practice(request).hint_state(ex).blanks


@router.post("/api/exercises/{exercise_id:path}/hint", tags=["exercises"])
def next_hint(request: Request, exercise_id: str, body: HintBody | None = None) -> dict:
    """Record and return the next hint (progressive: a nudge first, the formula last).

    With ``{"blank": n}``: the next hint about TODO n (the pack's ``blank_hints``), remembered per
    blank; 404 when the pack has none for that TODO.
    """
    lang = lang_of(request)
    ex = get_exercise(request, exercise_id)
    blank = body.blank if body is not None else None
    h = call(practice(request).hint, ex, blank, lang=lang)
    out = {"index": h.index, "total": h.total, "hint": h.text, "html": render.inline_markdown(h.text),
           "last": h.last, "recorded": h.recorded}
    return out if blank is None else {"blank": blank, **out}


@router.post("/api/exercises/{exercise_id:path}/solution", tags=["exercises"])
def reveal_solution(request: Request, exercise_id: str) -> dict:
    """Reveal the reference answer and its explanation (recorded as revealed)."""
    lang = lang_of(request)
    ex = code_exercise(request, exercise_id)
    shown = call(practice(request).reveal, ex, lang=lang)
    blanks = _blanks(ex)
    todos = list(ex.texts(lang).blanks)
    return {"solution": shown.solution, "html": answers_html(blanks, todos, lang),
            "answers": [a.as_dict() for a in shown.answers],
            "explanation": shown.explanation, "explanation_html": render.markdown(shown.explanation),
            "recorded": shown.recorded}


@router.post("/api/exercises/{exercise_id:path}/reset", tags=["exercises"])
def reset_exercise(request: Request, exercise_id: str) -> dict:
    """Start the exercise over, as ``alignlings reset`` does: attempts, hints and the solution seen
    count from zero again (the history is kept)."""
    ex = get_exercise(request, exercise_id)
    done = practice(request).reset(ex)
    return {"exercise": done.exercise, "recorded": done.recorded}


def row_levels(row: Any) -> dict[int, dict]:
    """An exercise's progress row's solved levels as ``switch`` reads them."""
    return {n: {"solved": True} for n in getattr(row, "levels", [])}


def answers_html(blanks: list[bl.Blank], todos: list[str], lang: str = "en") -> str:
    """The reference fills, one per TODO (what goes in each box, not the whole file)."""
    items = []
    for b in blanks:
        todo = todos[b.index - 1] if b.index - 1 < len(todos) else ""
        items.append(f'<li data-index="{b.index}"><span class="answer-todo">TODO {b.index}'
                     f'{ui(lang)["colon"] + html.escape(todo) if todo else ""}</span>{render.highlight(b.answer)}</li>')
    return f'<ol class="answers">{"".join(items)}</ol>'


# -- page ------------------------------------------------------------------------------------
@router.get("/exercises/{exercise_id:path}", include_in_schema=False)
def exercise_page(request: Request, exercise_id: str):
    lang = lang_of(request)
    ex = get_exercise(request, exercise_id)
    own_page = PAGES.get(view_of(ex).page or "")  # a drill or quiz opens on its kind's own page
    if own_page is not None:
        return own_page(request, ex)
    from alignlings.web import levels as web_levels

    if request.query_params.get("level"):  # levels 4 and 5: write the body, or from the statement
        return web_levels.level_page(request, ex, request.query_params["level"])
    texts = ex.texts(lang)
    taken = hints_taken(request, ex)
    hints = [render.inline_markdown(h) for h in texts.hints[:taken]]
    row = practice(request).summary().exercises[ex.key]
    pack = ctx(request).pack
    order = list(pack.exercises)
    i = order.index(ex.key)

    def link(j: int) -> dict | None:
        if not 0 <= j < len(order):
            return None
        other = pack.get(order[j])
        return {"id": other.key, "title": other.title.get(lang, other.id), "url": f"/exercises/{other.key}"}

    fills, marks = last_attempt(request, ex)
    per_blank = blank_hints(ex, lang)
    taken_per_blank = blank_hints_taken(request, ex)
    shown_blank_hints = {n: [render.inline_markdown(h) for h in per_blank[n - 1][:k]]
                         for n, k in taken_per_blank.items() if 0 < n <= len(per_blank) and k > 0}
    for m in marks:
        m["message_html"] = render.inline_markdown(m["message"]) if "$" in m["message"] else html.escape(m["message"])
    return render_page(request, view_of(ex).template, nav="home", ex=ex, title=ex.title.get(lang, ex.id),
                       lv=web_levels.strings(lang), levels=web_levels.switch(ex, lang, None, row_levels(row)),
                       statement_html=render.markdown(web_statement(texts.statement)),
                       code_html=template_html(ex, lang, fills),
                       hints=hints, hints_total=len(texts.hints), solved=row.solved,
                       revealed=row.revealed, prev=link(i - 1), next=link(i + 1),
                       client={"lang": lang, "t": ui(lang), "exercise": ex.key, "blanks": len(_blanks(ex)),
                               "marks": marks, "blank_hints": {str(k): v for k, v in shown_blank_hints.items()},
                               "next": link(i + 1)})
