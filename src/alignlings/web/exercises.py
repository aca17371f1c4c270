"""Exercise pages and routes: statement, template with inline blanks, check, hints, reveal.

``POST /api/exercises/{id}/check`` returns the engine's verdict object unchanged (the JSON of
``alignlings check --json``); it is graded through the bounded queue (429 when full).
"""

from __future__ import annotations

import html
import logging

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from alignlings.practice import blanks as bl
from alignlings.practice.pack import Exercise, PackError
from alignlings.web import render
from alignlings.web.i18n import ui
from alignlings.web.app import ctx, lang_of, render_page
from alignlings.web.guard import QueueFull

router = APIRouter()
log = logging.getLogger("alignlings.web")

MAX_FILL_CHARS = 2000


class CheckBody(BaseModel):
    """Either the whole file (``code``) or one string per blank, in blank order (``fills``)."""

    model_config = ConfigDict(extra="forbid")
    code: str | None = Field(default=None, max_length=200_000, description="The learner's whole file.")
    fills: list[str] | None = Field(default=None, max_length=64, description="One fill per blank, in order.")


def get_exercise(request: Request, exercise_id: str) -> Exercise:
    try:
        return ctx(request).pack.get(exercise_id)
    except PackError:
        raise HTTPException(404, f"unknown exercise {exercise_id!r}") from None


def code_exercise(request: Request, exercise_id: str) -> Exercise:
    ex = get_exercise(request, exercise_id)
    if not ex.is_code:
        raise HTTPException(404, f"{exercise_id!r} is a quiz: use /api/quiz")
    return ex


def _comments(ex: Exercise, lang: str) -> dict[str, str] | None:
    return ex.texts(lang).comments if lang != "en" else None


def _blanks(ex: Exercise) -> list[bl.Blank]:
    return bl.find_blanks(ex.solution_source)


def last_fills(request: Request, ex: Exercise) -> dict[int, str]:
    """The fills of the learner's latest attempt, to put back into the inputs (empty if none)."""
    try:
        attempts = ctx(request).store.attempts(ex.id)
    except Exception:  # noqa: BLE001 - progress is a convenience here, never a reason to fail the page
        return {}
    for attempt in reversed(list(attempts or [])):
        code = attempt.get("code") if isinstance(attempt, dict) else getattr(attempt, "code", None)
        if code:
            fills = bl.extract_fills(code, ex.solution_source, _blanks(ex))
            return {i: f for i, f in fills.items() if f and f != bl.PLACEHOLDER}
    return {}


def template_html(ex: Exercise, lang: str, fills: dict[int, str] | None = None) -> str:
    """The template in ``lang``, highlighted, with an input per blank and a feedback row under it."""
    texts, blanks = ex.texts(lang), _blanks(ex)
    marks = {b.index: f"@@ALIGNLINGS_BLANK_{b.index}@@" for b in blanks}
    marked = bl.render(ex.solution_source, blanks, marks, todos=list(texts.blanks), comments=_comments(ex, lang))
    holes, after_line, source = [], {}, marked
    for b in blanks:  # swap each marker for _____ so the lexer sees the template, and note where
        start = source.index(marks[b.index])
        source = source[:start] + bl.PLACEHOLDER + source[start + len(marks[b.index]):]
        todo = texts.blanks[b.index - 1] if b.index - 1 < len(texts.blanks) else ""
        value = html.escape((fills or {}).get(b.index, ""), quote=True)
        holes.append(render.Hole(start, start + len(bl.PLACEHOLDER), (
            f'<input class="blank" data-index="{b.index}" id="blank-{b.index}" value="{value}" '
            f'placeholder="TODO {b.index}" aria-label="TODO {b.index}: {html.escape(todo, quote=True)}" '
            f'spellcheck="false" autocomplete="off" autocapitalize="off">'
            f'<span class="mark" data-index="{b.index}"></span>')))
        line = source.count("\n", 0, start) + 1
        after_line[line] = f'<span class="blank-fb" data-index="{b.index}" hidden></span>'
    return render.highlight(source, holes, after_line)


def hints_taken(request: Request, ex: Exercise) -> int:
    try:
        return int(ctx(request).store.hints_taken(ex.id) or 0)
    except Exception:  # noqa: BLE001
        return 0


# -- JSON API --------------------------------------------------------------------------------
@router.get("/api/exercises", tags=["exercises"])
def list_exercises(request: Request) -> list[dict]:
    """The pack's exercises in order, with the learner's progress on each."""
    lang = lang_of(request)
    summary = ctx(request).store.summary()
    out = []
    for ex in ctx(request).pack:
        row = summary.get(ex.id, {})
        out.append({"id": ex.id, "kind": ex.kind, "level": ex.level, "title": ex.title.get(lang, ex.id),
                    "cloze": ex.cloze, "solved": bool(row.get("solved")), "attempts": int(row.get("attempts", 0)),
                    "hints": int(row.get("hints", 0)), "revealed": bool(row.get("revealed")),
                    "url": f"/exercises/{ex.id}"})
    return out


@router.get("/api/exercises/{exercise_id}", tags=["exercises"])
def exercise_detail(request: Request, exercise_id: str) -> dict:
    """Statement (Markdown and HTML), the template, the blanks with their TODO text, hint counts."""
    from alignlings.practice.grader import template_for

    lang = lang_of(request)
    ex = get_exercise(request, exercise_id)
    texts = ex.texts(lang)
    out = {"id": ex.id, "kind": ex.kind, "level": ex.level, "title": ex.title.get(lang, ex.id),
           "statement": texts.statement, "statement_html": render.markdown(texts.statement),
           "hints_total": len(texts.hints), "hints_taken": hints_taken(request, ex), "cloze": ex.cloze}
    if ex.is_code:
        out["template"] = template_for(ex, lang)
        out["blanks"] = [{"index": b.index, "name": b.name,
                          "todo": texts.blanks[b.index - 1] if b.index - 1 < len(texts.blanks) else ""}
                         for b in _blanks(ex)]
    else:
        from alignlings.web.quiz import public_question

        out["questions"] = [public_question(ex, q, lang) for q in ex.quiz]
    return out


@router.post("/api/exercises/{exercise_id}/check", tags=["exercises"])
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
    lang, c = lang_of(request), ctx(request)

    def grade() -> dict:
        grader = c.grader()
        verdict = grader.check(ex.id, body.code, fills=body.fills, lang=lang)
        code = body.code if body.code is not None else grader.submission(ex, fills=body.fills).code
        try:
            c.store.record_attempt(ex.id, verdict, code=code, source="web")
        except Exception:  # noqa: BLE001 - a full disk must not hide the verdict
            log.exception("could not record the attempt on %s", ex.id)
        return verdict

    try:
        return await c.check_queue.run(grade)
    except (HTTPException, QueueFull):
        raise
    except ValueError as exc:  # the engine's "bad submission" errors
        raise HTTPException(422, str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - the grader itself failed: report it, keep serving
        log.exception("grader failed on %s", ex.id)
        raise HTTPException(500, f"the grader failed: {type(exc).__name__}: {exc}") from None


@router.post("/api/exercises/{exercise_id}/hint", tags=["exercises"])
def next_hint(request: Request, exercise_id: str) -> dict:
    """Record and return the next hint (progressive: a nudge first, the formula last)."""
    lang = lang_of(request)
    ex = get_exercise(request, exercise_id)
    hints = ex.texts(lang).hints
    if not hints:
        raise HTTPException(404, f"{exercise_id!r} has no hints")
    taken = int(ctx(request).store.record_hint(ex.id))
    n = max(1, min(taken, len(hints)))
    return {"index": n, "total": len(hints), "hint": hints[n - 1], "html": render.inline_markdown(hints[n - 1]),
            "last": n >= len(hints)}


@router.post("/api/exercises/{exercise_id}/solution", tags=["exercises"])
def reveal_solution(request: Request, exercise_id: str) -> dict:
    """Reveal the reference answer and its explanation (recorded as revealed)."""
    from alignlings.practice.grader import solution_for

    lang = lang_of(request)
    ex = code_exercise(request, exercise_id)
    ctx(request).store.record_solution_revealed(ex.id)
    code = solution_for(ex, lang)
    texts = ex.texts(lang)
    blanks = _blanks(ex)
    return {"solution": code, "html": render.highlight(code),
            "answers": [{"index": b.index, "name": b.name, "answer": b.answer} for b in blanks],
            "explanation": texts.explanation, "explanation_html": render.markdown(texts.explanation)}


# -- page ------------------------------------------------------------------------------------
@router.get("/exercises/{exercise_id}", include_in_schema=False)
def exercise_page(request: Request, exercise_id: str):
    lang = lang_of(request)
    ex = get_exercise(request, exercise_id)
    if not ex.is_code:
        from alignlings.web.quiz import quiz_page

        return quiz_page(request, only=ex.id)
    texts = ex.texts(lang)
    taken = hints_taken(request, ex)
    hints = [render.inline_markdown(h) for h in texts.hints[:taken]]
    row = ctx(request).store.summary().get(ex.id, {})
    order = list(ctx(request).pack.exercises)
    i = order.index(ex.id)
    return render_page(request, "exercise.html", nav="home", ex=ex, title=ex.title.get(lang, ex.id),
                       statement_html=render.markdown(texts.statement),
                       code_html=template_html(ex, lang, last_fills(request, ex)),
                       hints=hints, hints_total=len(texts.hints), solved=bool(row.get("solved")),
                       prev_id=order[i - 1] if i > 0 else None,
                       next_id=order[i + 1] if i + 1 < len(order) else None,
                       client={"lang": lang, "t": ui(lang), "exercise": ex.id, "blanks": len(_blanks(ex))})
