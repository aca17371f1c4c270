"""Predict item pages (``kind = "predict"``, issue 21 §5): the question, a commit, then the run.

``GET /exercises/{id}`` shows the intro and each question with its options as a plain HTML form;
``POST /exercises/{id}/predict`` (form fields ``question`` and ``choice``; it works without
JavaScript) commits the prediction through the session (``Practice.predict_answer``: recorded first,
then the variant runs or its cached run is taken) and renders the result: right or not, the result
sentence, a small server-rendered SVG line chart with a visually hidden table of the same numbers for
screen readers, every option's feedback and the explanation. ``GET /api/predict/{id}`` gives the
questions without answers, ``POST /api/predict/{id}/{qid}`` (``{"choice": N}``) the same result as JSON.
"""

from __future__ import annotations

import html
from urllib.parse import parse_qs

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from alignlings import i18n
from alignlings.content.exercise import Exercise
from alignlings.web import render
from alignlings.web.context import get_exercise, graded, lang_of, practice, render_page
from alignlings.web.helpers import neighbours, page, web_statement
from alignlings.web.i18n import ui

router = APIRouter()

STRINGS = i18n.lang_table("web.predict")  # strings: locales/{en,zh}.toml [web.predict]
LETTERS = "ABCDEFGH"
MAX_FORM_BYTES = 4096
# series styles: distinguishable without colour (a dash pattern each), dark enough on white (>= 3:1)
STYLES = (("#1f5fa8", ""), ("#b3401a", "6 4"), ("#2b7a3d", "2 3"), ("#6b3fa0", "8 3 2 3"))


def predict_exercise(request: Request, exercise_id: str) -> Exercise:
    ex = get_exercise(request, exercise_id)
    if not ex.kind_spec.asks_predictions:
        raise HTTPException(404, f"{exercise_id!r} is not a predict item")
    return ex


# -- the chart ---------------------------------------------------------------------------------------

def _tick(v: float) -> str:
    return f"{v:.3g}"


def line_chart_svg(chart: dict, label_id: str) -> str:
    """An inline SVG line chart of ``chart["series"]`` (index on x), labelled by the element
    ``label_id`` (its caption); the numbers are in the page's table too."""
    W, H, left, right, top, bottom = 560, 260, 56, 16, 14, 40
    series = chart["series"]
    n = max(len(s["points"]) for s in series)
    lo = min(min(s["points"]) for s in series)
    hi = max(max(s["points"]) for s in series)
    if hi - lo < 1e-12:
        lo, hi = lo - 1, hi + 1
    pad = (hi - lo) * 0.06
    lo, hi = (max(0.0, lo - pad) if lo >= 0 else lo - pad), hi + pad  # a non-negative quantity starts at 0

    def x(i: int) -> float:
        return left + (W - left - right) * (i / max(1, n - 1))

    def y(v: float) -> float:
        return top + (H - top - bottom) * (1 - (v - lo) / (hi - lo))

    parts = [f'<svg class="predict-svg" viewBox="0 0 {W} {H}" width="100%" role="img" '
             f'aria-labelledby="{html.escape(label_id)}" preserveAspectRatio="xMidYMid meet">']
    parts.append(f'<rect x="{left}" y="{top}" width="{W - left - right}" height="{H - top - bottom}" '
                 'fill="none" stroke="#8a8a8a" stroke-width="1"/>')
    for k in range(5):  # y grid and ticks
        v = lo + (hi - lo) * k / 4
        parts.append(f'<line x1="{left}" x2="{W - right}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e2e2e2"/>')
        parts.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end" font-size="11" '
                     f'fill="#333">{_tick(v)}</text>')
    if lo < 0 < hi:
        parts.append(f'<line x1="{left}" x2="{W - right}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#777" '
                     'stroke-width="1"/>')
    step = max(1, (n - 1) // 8 or 1)
    for i in range(0, n, step):
        parts.append(f'<text x="{x(i):.1f}" y="{H - bottom + 16}" text-anchor="middle" font-size="11" '
                     f'fill="#333">{i}</text>')
    parts.append(f'<text x="{(left + W - right) / 2:.1f}" y="{H - 6}" text-anchor="middle" font-size="12" '
                 f'fill="#333">{html.escape(chart["x"])}</text>')
    for j, s in enumerate(series):
        color, dash = STYLES[j % len(STYLES)]
        pts = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(s["points"]))
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2.5"{dash_attr}/>')
        for i, v in enumerate(s["points"]):
            if n <= 24:
                parts.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="3" fill="{color}"/>')
    parts.append("</svg>")
    return "".join(parts)


def chart_figure(chart: dict, cid: str, lang: str) -> str:
    """The chart as one HTML figure (the review page inserts it): the SVG, its caption, the legend
    and the visually hidden table of its numbers."""
    s = STRINGS.get(lang, STRINGS["en"])
    esc = html.escape
    items = []
    for item in legend(chart):
        dash = f' stroke-dasharray="{item["dash"]}"' if item["dash"] else ""
        items.append(f'<li><svg width="28" height="10" aria-hidden="true" focusable="false"><line x1="0" x2="28" '
                     f'y1="5" y2="5" stroke="{item["color"]}" stroke-width="3"{dash}/></svg> {esc(item["label"])}</li>')
    n = max(len(x["points"]) for x in chart["series"])
    head = "".join(f'<th scope="col">{esc(x["label"])}</th>' for x in chart["series"])
    rows = "".join(f'<tr><th scope="row">{i}</th>' + "".join(
        f"<td>{x['points'][i]:.4g}</td>" if i < len(x["points"]) else "<td></td>" for x in chart["series"]) + "</tr>"
        for i in range(n))
    return (f'<figure class="predict-chart" id="{esc(cid)}">{line_chart_svg(chart, cid + "-caption")}'
            f'<figcaption id="{esc(cid)}-caption">{esc(s["chart_caption"].format(y=chart["y"], x=chart["x"]))}</figcaption>'
            f'<ul class="predict-legend">{"".join(items)}</ul><table class="visually-hidden"><caption>'
            f'{esc(s["table_caption"].format(y=chart["y"], x=chart["x"]))}</caption><thead><tr><th scope="col">'
            f'{esc(chart["x"])}</th>{head}</tr></thead><tbody>{rows}</tbody></table></figure>')


def legend(chart: dict) -> list[dict]:
    return [{"label": s["label"], "color": STYLES[j % len(STYLES)][0], "dash": STYLES[j % len(STYLES)][1]}
            for j, s in enumerate(chart["series"])]


# -- the page ------------------------------------------------------------------------------------------

def _questions(request: Request, ex: Exercise, lang: str) -> list[dict]:
    asks = practice(request).predict_questions(ex, lang=lang)
    return [{"id": a.question_id, "question_html": render.markdown(a.question), "answered": a.answered,
             "options": [render.inline_markdown(o) for o in a.options]} for a in asks]


def _result_view(result, lang: str) -> dict:
    """What the template shows of a committed prediction (HTML pieces rendered here)."""
    view = {"correct": result.correct, "choice": result.choice, "answer": result.answer,
            "letter": LETTERS[result.choice], "right_letter": LETTERS[result.answer],
            "why_html": render.inline_markdown(result.why), "result_text": result.result_text,
            "run_error": result.run_error, "explanation_html": render.markdown(result.explanation),
            "recorded": result.recorded, "score": result.score,
            "options": [{"letter": LETTERS[i], "html": render.inline_markdown(o.text),
                         "why_html": render.inline_markdown(o.why), "correct": o.correct, "chosen": i == result.choice}
                        for i, o in enumerate(result.options)],
            "chart_html": chart_figure(result.chart, f"chart-{result.question}", lang) if result.chart else None}
    return view


def _render(request: Request, ex: Exercise, results: dict[str, dict] | None = None, status_code: int = 200):
    lang = lang_of(request)
    prev, nxt = neighbours(request, ex, lang)
    solved = practice(request).summary().exercises[ex.key].solved
    return render_page(request, "predict.html", status_code=status_code, nav="home", ex=ex,
                       title=ex.title.get(lang, ex.id), s=STRINGS.get(lang, STRINGS["en"]),
                       statement_html=render.markdown(web_statement(ex.texts(lang).statement)),
                       questions=_questions(request, ex, lang), results=results or {}, solved=solved,
                       prev=prev, next=nxt, client={"lang": lang, "t": ui(lang)})


@page("predict")  # the page of the predict kind (web.kinds)
def predict_page(request: Request, ex: Exercise):
    """A predict item's page (``GET /exercises/{id}``): the questions, nothing of the answers."""
    return _render(request, ex)


@router.post("/exercises/{exercise_id:path}/predict", include_in_schema=False)
async def commit_form(request: Request, exercise_id: str):
    """The form's commit: record the prediction, run the variant, render the page with the result."""
    ex = predict_exercise(request, exercise_id)
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise HTTPException(413, "form too large")
    fields = parse_qs(body.decode("utf-8", errors="replace"))
    qid = (fields.get("question") or [""])[0]
    choice_text = (fields.get("choice") or [""])[0]
    if not choice_text.isdigit():
        raise HTTPException(422, "choice: choose one of the options")
    lang, session = lang_of(request), practice(request)
    # a variant run: through the grading queue, one predict run at a time per learner
    result = await graded(request, lambda: session.predict_answer(ex, qid, int(choice_text), lang=lang),
                          what=ex.key, alone="predict")
    return _render(request, ex, {result.question: _result_view(result, lang)})


# -- JSON --------------------------------------------------------------------------------------------

class AnswerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    choice: int = Field(ge=0, description="0-based index of the predicted option.")


@router.get("/api/predict/{exercise_id:path}", tags=["predict"])
def questions(request: Request, exercise_id: str) -> dict:
    """The item's intro and questions, without answers, feedback or results."""
    lang = lang_of(request)
    ex = predict_exercise(request, exercise_id)
    asks = practice(request).predict_questions(ex, lang=lang)
    return {"exercise": ex.key, "intro": ex.texts(lang).statement,
            "questions": [{"id": a.question_id, "question": a.question, "options": a.options, "answered": a.answered}
                          for a in asks]}


@router.post("/api/predict/{exercise_id:path}/{qid}", tags=["predict"])
async def answer(request: Request, exercise_id: str, qid: str, body: AnswerBody) -> dict:
    """Commit a prediction; returns whether it was right, the run's result sentence, values, series
    and chart (with ``chart_svg``), every option's feedback and the explanation. The variant runs
    through the grading queue (its per-learner and per-address limits), one predict run at a time
    per learner (429 for a second)."""
    lang, session = lang_of(request), practice(request)
    ex = predict_exercise(request, exercise_id)
    result = await graded(request, lambda: session.predict_answer(ex, qid, body.choice, lang=lang),
                          what=ex.key, alone="predict")
    out = result.as_dict()
    out["chart_svg"] = line_chart_svg(result.chart, f"chart-{qid}-caption") if result.chart else None
    return out
