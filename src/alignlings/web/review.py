"""The Review page: today's due review items, one at a time, keyboard-first; mastery per concept.

The engine is ``alignlings.practice.review`` (FSRS scheduling, items from the pack's data); code
items are graded by the warm grader's sandbox through the grading queue, like the exercises.
``GET /api/review/queue`` never sends answers; ``POST /api/review/hint`` serves (and records) an item's hint;
``POST /api/review/answer`` grades, rates and schedules one answer (Hard after a hint served); ``POST /api/review/rate`` re-rates a right answer just given (hard or too
easy); ``GET /api/review/mastery`` feeds the progress page's chart.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from alignlings import i18n
from alignlings.web import render
from alignlings.web.context import call, ctx, graded, lang_of, practice, render_page
from alignlings.web.i18n import learner, ui

router = APIRouter()
log = logging.getLogger("alignlings.web")
MAX_ANSWER_CHARS = 500

# strings of this page only (the shared ones live in alignlings.web.i18n)
STRINGS = i18n.lang_table("web.review")  # strings: locales/{en,zh}.toml [web.review]


def strings(lang: str) -> dict[str, str]:
    return STRINGS.get(lang, STRINGS["en"])


def session(request: Request):
    """The learner's review engine (the practice session's)."""
    return practice(request).review()


def due_count(request: Request) -> int:
    """How many items are due today (0 when the store cannot say, e.g. a test's fake store)."""
    try:
        return int(practice(request).review_counts()["due"])
    except Exception:  # noqa: BLE001 - a count in the nav is never worth a failed page
        return 0


def _public(shown, lang: str) -> dict:
    """An item (``review.Prompt``) as the page needs it: quiz options as HTML, code split into lines
    with the masks, highlighted (a bug drill keeps its whole ``source`` for the editor, its statement
    as HTML)."""
    from alignlings.practice import review as rv

    out = {k: v for k, v in shown.as_dict().items() if k not in ("source", "rendered", "hint", "hints")}
    out["has_hint"] = bool(getattr(shown, "hint", "") or getattr(shown, "hints", None))  # served by /api/review/hint
    if isinstance(shown, rv.QuizPrompt):
        out["question_html"] = render.markdown(shown.question)
        out["options_html"] = [render.inline_markdown(o) for o in shown.options]
        return out
    out["lines"] = shown.source.splitlines()
    out["lines_html"] = render.highlight_lines(shown.source)  # highlighted, for the lines without inputs
    if isinstance(shown, rv.BugPrompt):
        out["source"] = shown.source
        out["statement_html"] = render.markdown(shown.statement) if shown.statement else ""
    return out


@router.get("/api/review/queue", tags=["review"])
def queue(request: Request, limit: int | None = None, concept: str | None = None) -> dict:
    """Today's due items (or a concept's items with ``concept``), without answers; ``counts``:
    ``due`` today, ``items`` in review, ``next`` (ISO 8601: the first item after today)."""
    lang = lang_of(request)
    if limit is not None and not 1 <= limit <= 500:
        raise HTTPException(422, f"limit: expected 1 to 500, got {limit}")
    due = call(practice(request).review_queue, limit=limit, concept=concept, lang=lang)
    return {"counts": due.counts,
            "items": [_public(p.shown, lang) | {"retrievability": round(p.retrievability, 4)} for p in due.items]}


class AnswerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item: str = Field(max_length=400, description="The item key, e.g. quiz/bt-probability.")
    pack: str = Field(max_length=200, description="The item's pack id.")
    answer: int | str | dict[str, str] = Field(description="Option index (quiz), fill (blank), {key: token} (cloze).")
    seconds: float | None = Field(default=None, ge=0, le=86400, description="Time to answer, before checking.")
    hinted: bool = Field(default=False, description="Ignored (kept for pages loaded before the change): the "
                         "server knows whether it served this item's hint (POST /api/review/hint).")


class HintBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item: str = Field(max_length=400, description="The item key, e.g. cloze/dpo-loss/12.")
    pack: str = Field(max_length=200, description="The item's pack id.")


@router.post("/api/review/hint", tags=["review"])
def hint(request: Request, body: HintBody) -> dict:
    """The hint of a review item the learner has met (``hints``: one per masked token of a cloze
    line, else one); recorded, so that a right answer to this review is rated Hard."""
    shown = call(practice(request).review_hint, body.pack, body.item, lang=lang_of(request))
    return {"item": shown.item, "hints": shown.hints, "recorded": shown.recorded}


@router.post("/api/review/answer", tags=["review"])
async def answer(request: Request, body: AnswerBody) -> dict:
    """Grade one answer (code in the sandbox), rate it (FSRS: again/hard/good/easy) and schedule the item."""
    from alignlings.practice import review as rv

    lang, session = lang_of(request), practice(request)
    item = call(session.review_item, body.pack, body.item)  # 404 unless the learner has met it
    value: Any = body.answer
    if item.kind_spec.answer == "file":  # a whole file (a bug drill's fix, a level's body)
        if isinstance(value, str) and len(value) > rv.MAX_FILE_CHARS:
            raise HTTPException(422, f"answer: at most {rv.MAX_FILE_CHARS} characters for a file")
    elif isinstance(value, str) and len(value) > MAX_ANSWER_CHARS or isinstance(value, dict) and (
            len(value) > 64 or any(len(v) > MAX_ANSWER_CHARS for v in value.values())):
        raise HTTPException(422, f"answer: at most {MAX_ANSWER_CHARS} characters per fill")

    def grade():
        return session.review_answer(body.pack, body.item, value, seconds=body.seconds, lang=lang)

    # code runs (the sandbox, a predict variant): through the bounded grading queue; a quiz: at once
    done = await graded(request, grade, what=item.key) if item.kind_spec.runs_code else call(grade)
    result = done.result
    for o in result.get("options") or []:  # questions answered by choosing (quiz, predict)
        o["why_html"] = render.inline_markdown(o["why"])
    if "explanation" in result:  # a predict item: the (cached) run's result, then why
        from alignlings.web.predict import chart_figure

        shown = [result["result_text"] or result.get("run_error") or "", result["explanation"]]
        result["predict_html"] = render.markdown("\n\n".join(x for x in shown if x))
        result["chart_html"] = chart_figure(result["chart"], "review-chart", lang) if result.get("chart") else None
    if result.get("feedback"):
        result["feedback_html"] = render.inline_markdown(result["feedback"])
    if result.get("story"):
        result["story_html"] = render.markdown(result["story"])
    return {"result": result, "schedule": done.schedule, "counts": done.counts, "recorded": done.recorded}


class RateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    item: str = Field(max_length=400, description="The item just answered right, e.g. quiz/bt-probability.")
    pack: str = Field(max_length=200, description="The item's pack id.")
    rating: Literal["hard", "good", "easy"] = Field(description="hard: it was hard; easy: too easy; good: as rated.")


@router.post("/api/review/rate", tags=["review"])
def rate(request: Request, body: RateBody) -> dict:
    """After a right answer, the learner says it was hard or too easy: that same review is re-rated
    and the item re-scheduled (no review is added); 422 for an item not just answered right."""
    done = call(practice(request).review_rate, body.pack, body.item, body.rating, lang=lang_of(request))
    return {"rating": done.rating, "schedule": done.schedule, "counts": done.counts, "recorded": done.recorded}


@router.get("/api/review/mastery", tags=["review"])
def mastery(request: Request) -> dict:
    """Per concept: mastery (mean retrievability of its items met, or null), items, seen, due,
    its name and a link to practise it; weakest first."""
    lang = lang_of(request)
    return {"concepts": practice(request).mastery(lang), "t": {k: v for k, v in strings(lang).items()
                                                              if k.startswith("mastery") or k in ("practise", "items")}}


@router.get("/review", include_in_schema=False)
def review_page(request: Request, concept: str | None = None, limit: int | None = None):
    from alignlings.practice import review as rv

    lang = lang_of(request)
    s = strings(lang)
    names = rv.concept_names(ctx(request).pack, lang)
    # something to do when nothing is due: the next exercise and a cloze round (the session decides which)
    learner_session = practice(request)
    nxt, snippet = learner_session.next_exercise(), learner_session.next_cloze()
    if snippet is not None and not learner_session.summary().exercises[snippet.key].solved:
        snippet = None  # a cloze round on an unsolved exercise would show its solution: not offered
    offer = [*([{"href": f"/exercises/{nxt.key}", "text": s["offer_next"].format(title=nxt.title[lang])}] if nxt else []),
             *([{"href": f"/cloze/{snippet.key}", "text": s["offer_cloze"].format(title=snippet.title[lang])}]
               if snippet else [])]
    return render_page(request, "review.html", nav="review", title=s["title"], rs=s, offer=offer,
                       concept=names.get(concept or "", concept),
                       client={"lang": lang, "t": ui(lang), "l": learner(lang),
                               "review": s, "concept": concept, "limit": limit})
