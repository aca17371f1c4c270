"""The MLM drill ("random blanks"): a reference snippet with random tokens masked as inputs.

``POST /api/cloze/{snippet}`` with ``{"action": "draw", "ratio": 0.15, "seed": 7}`` draws masks
(the engine's ``alignlings.practice.cloze``: positions, weighting by past mistakes, the counter)
and returns the highlighted snippet with inputs; ``{"action": "check", "masked": [keys],
"answers": {key: text}}`` grades the answers (an answer that is not the token but behaves the same
is accepted by running it, through the grading queue) and records them.
"""

from __future__ import annotations

import html
import logging
from typing import Literal

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from alignlings.content.exercise import Exercise
from alignlings.practice.session import DEFAULT_CLOZE_RATIO
from alignlings.web import render
from alignlings.web.context import call, ctx, get_exercise, graded, lang_of, practice, render_page
from alignlings.web.i18n import ui

router = APIRouter()
log = logging.getLogger("alignlings.web")

DEFAULT_RATIO = DEFAULT_CLOZE_RATIO


class ClozeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: Literal["draw", "check"]
    ratio: float = Field(default=DEFAULT_RATIO, gt=0, le=1, description="Fraction of maskable positions to mask.")
    seed: int | None = Field(default=None, ge=0, lt=2**63, description="Replay a draw; omitted: a new random draw.")
    masked: list[str] = Field(default_factory=list, max_length=1000, description="Keys of the masked positions.")
    answers: dict[str, str] = Field(default_factory=dict, description="Key -> the learner's answer.")


def snippet(request: Request, snippet_id: str) -> Exercise:
    ex = get_exercise(request, snippet_id)
    if not ex.cloze:
        raise HTTPException(404, f"{snippet_id!r} has no cloze snippet")
    return ex


def snippets(request: Request) -> list[Exercise]:
    return [ex for ex in ctx(request).pack if ex.cloze]


def _line_starts(source: str) -> list[int]:
    return render.offsets(source)


MASK_WIDTH_CH = 6  # every box starts this wide, whatever the hidden token's length; it grows as you type


def _context(source: str, p, others) -> str:
    """The masked token's line, trimmed, with every masked token on it shown as ___ (for the label)."""
    line = source.splitlines()[p.line - 1]
    for q in sorted((q for q in others if q.line == p.line), key=lambda q: q.col, reverse=True):
        line = line[:q.col] + "___" + line[q.end_col:]
    line = line.split("  #")[0].strip()
    return line if len(line) <= 80 else line[:77] + "…"


def snippet_html(source: str, masked, values: dict[str, str] | None = None, lang: str = "en") -> str:
    """The snippet highlighted, each masked position an input of the same width (numbered in
    reading order like the results, labelled with its line for screen readers)."""
    starts = _line_starts(source)
    holes = []
    ordered = sorted(masked, key=lambda p: (p.line, p.col))
    label = ui(lang)["mask_label"]
    for n, p in enumerate(ordered, start=1):
        start = starts[p.line - 1] + p.col
        key = html.escape(p.key, quote=True)
        value = html.escape((values or {}).get(p.key, ""), quote=True)
        aria = html.escape(label.format(n=n, total=len(ordered), line=p.line, context=_context(source, p, ordered)),
                           quote=True)
        holes.append(render.Hole(start, starts[p.line - 1] + p.end_col, (
            f'<span class="mask-n" aria-hidden="true">{n}</span>'
            f'<input class="mask" data-key="{key}" data-n="{n}" style="width:{MASK_WIDTH_CH}ch" '
            f'value="{value}" aria-label="{aria}" spellcheck="false" autocomplete="off" autocapitalize="off">'
            f'<span class="mark" data-key="{key}"></span>'
            f'<span class="right-token" data-key="{key}" hidden></span>')))
    return render.highlight(source, holes)


def shows_unseen_solution(request: Request, ex: Exercise) -> bool:
    """Whether the drill would show the solution of an exercise not solved and not yet revealed."""
    return practice(request).cloze_reveals(ex)


def _draw(request: Request, ex: Exercise, lang: str, ratio: float, seed: int | None) -> dict:
    drawn = call(practice(request).cloze_draw, ex, lang=lang, ratio=ratio, seed=seed)
    return {"snippet": ex.key, "seed": drawn.seed, "ratio": drawn.ratio, "maskable": drawn.maskable,
            "masked": [p.key for p in drawn.masked], "counter": drawn.counter,
            "html": snippet_html(drawn.source, drawn.masked, lang=lang)}


@router.get("/api/cloze", tags=["cloze"])
def list_snippets(request: Request) -> list[dict]:
    """The snippets of the MLM drill (one per exercise with ``cloze = true``)."""
    lang = lang_of(request)
    return [{"id": ex.key, "title": ex.title.get(lang, ex.id), "url": f"/cloze/{ex.key}"} for ex in snippets(request)]


# registered before the route below, whose PACK/ID path would take ".../open" too
@router.post("/api/cloze/{snippet_id:path}/open", tags=["cloze"])
def open_snippet(request: Request, snippet_id: str) -> dict:
    """Open the drill of an exercise not solved yet: recorded as "solution seen" (it shows the solution)."""
    ex = snippet(request, snippet_id)
    call(practice(request).cloze_open, ex, lang=lang_of(request))
    return {"snippet": ex.key, "revealed": True}


@router.post("/api/cloze/{snippet_id:path}", tags=["cloze"])
async def cloze_action(request: Request, snippet_id: str, body: ClozeBody) -> dict:
    """Draw a new mask (it shows the rest of the solution: see ``open``), or check answers for the
    masked keys."""
    lang = lang_of(request)
    ex = snippet(request, snippet_id)
    if body.action == "draw":
        return _draw(request, ex, lang, body.ratio, body.seed)
    answers = {k: str(v)[:500] for k, v in body.answers.items()}
    session = practice(request)
    checked = await graded(request, lambda: session.cloze_check(ex, body.masked, answers, lang=lang), what=ex.key)
    return {"snippet": ex.key, "results": checked.results, "right": checked.right, "total": checked.total,
            "score": ui(lang)["cloze_score"].format(right=checked.right, total=checked.total),
            "recorded": checked.recorded}


@router.get("/cloze", include_in_schema=False)
def cloze_index(request: Request):
    items = snippets(request)
    if not items:
        raise HTTPException(404, "this pack has no cloze snippets")
    return cloze_page(request, items[0].key)


@router.get("/cloze/{snippet_id:path}", include_in_schema=False)
def cloze_page(request: Request, snippet_id: str):
    lang = lang_of(request)
    ex = snippet(request, snippet_id)
    title = ex.title.get(lang, ex.id)
    lock = practice(request).lock_reason(ex, lang)
    if lock:  # its track is locked for this learner: the reason, no drill (it would show the solution)
        return render_page(request, "cloze.html", nav="cloze", ex=ex, title=title, snippets=snippets(request),
                           draw=None, gate=None, lock=lock, client={"lang": lang, "t": ui(lang), "snippet": ex.key,
                                                                     "draw": None})
    if shows_unseen_solution(request, ex):  # ask first: the drill shows the solution
        return render_page(request, "cloze.html", nav="cloze", ex=ex, title=title, snippets=snippets(request),
                           draw=None, gate=ui(lang)["cloze_gate"].format(title=title),
                           client={"lang": lang, "t": ui(lang), "snippet": ex.key, "draw": None})
    first = _draw(request, ex, lang, DEFAULT_RATIO, None)
    return render_page(request, "cloze.html", nav="cloze", ex=ex, title=title,
                       snippets=snippets(request), draw=first, gate=None,
                       client={"lang": lang, "t": ui(lang), "snippet": ex.key, "draw": {k: v for k, v in first.items()
                                                                                      if k != "html"}})
