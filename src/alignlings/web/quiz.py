"""The concept quiz: one question at a time; after an answer, every option is explained.

``GET /api/quiz`` never sends the answers; ``POST /api/quiz/{qid}`` records the choice and
returns which option is right and why each option is or is not.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from alignlings.practice.pack import Exercise, QuizQuestion
from alignlings.web import render
from alignlings.web.app import ctx, lang_of, render_page
from alignlings.web.i18n import ui

router = APIRouter()


class AnswerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    choice: int = Field(ge=0, description="0-based index of the chosen option.")


def quiz_exercises(request: Request) -> list[Exercise]:
    return [ex for ex in ctx(request).pack if ex.kind == "quiz"]


def find_question(request: Request, qid: str) -> tuple[Exercise, QuizQuestion]:
    for ex in quiz_exercises(request):
        for q in ex.quiz:
            if q.id == qid:
                return ex, q
    raise HTTPException(404, f"unknown question {qid!r}")


def public_question(ex: Exercise, q: QuizQuestion, lang: str) -> dict:
    """A question without its answer."""
    return {"id": q.id, "exercise": ex.id, "question": q.question.get(lang, ""),
            "question_html": render.markdown(q.question.get(lang, "")),
            "options": [{"text": o.text.get(lang, ""), "html": render.inline_markdown(o.text.get(lang, ""))}
                        for o in q.options]}


def _latest_answers(request: Request) -> dict[str, dict]:
    """question id -> the learner's last answer (``choice``, ``correct``, ...)."""
    try:
        return dict(ctx(request).store.quiz_answers() or {})
    except Exception:  # noqa: BLE001 - progress is a convenience here
        return {}


@router.get("/api/quiz", tags=["quiz"])
def list_questions(request: Request) -> dict:
    """Every quiz question of the pack, in order, without answers."""
    lang = lang_of(request)
    return {"questions": [public_question(ex, q, lang) for ex in quiz_exercises(request) for q in ex.quiz]}


@router.post("/api/quiz/{qid}", tags=["quiz"])
def answer(request: Request, qid: str, body: AnswerBody) -> dict:
    """Record an answer; returns whether it is right and the explanation of every option."""
    lang = lang_of(request)
    ex, q = find_question(request, qid)
    if body.choice >= len(q.options):
        raise HTTPException(422, f"choice: expected 0..{len(q.options) - 1}, got {body.choice}")
    correct = body.choice == q.answer
    store = ctx(request).store
    store.record_quiz_answer(q.id, body.choice, correct)
    out = {"id": q.id, "choice": body.choice, "answer": q.answer, "correct": correct,
           "options": [{"text": o.text.get(lang, ""), "why": o.why.get(lang, ""),
                        "why_html": render.inline_markdown(o.why.get(lang, "")), "correct": i == q.answer}
                       for i, o in enumerate(q.options)]}
    if q.id == ex.quiz[-1].id:  # the last question closes a round: record it like `alignlings quiz` does
        latest = _latest_answers(request)
        right = sum(1 for x in ex.quiz if latest.get(x.id, {}).get("correct"))
        total = len(ex.quiz)
        verdict = {"exercise": ex.id, "passed": right == total, "blanks": [], "cases": [], "error": None,
                   "isolation": "none (quiz)", "score": right, "total": total}
        store.record_attempt(ex.id, verdict, code="", source="web")
        out["score"] = {"right": right, "total": total, "passed": right == total}
    return out


@router.get("/quiz", include_in_schema=False)
def quiz_page(request: Request, only: str | None = None):
    lang = lang_of(request)
    exercises = [ex for ex in quiz_exercises(request) if only is None or ex.id == only]
    questions = [public_question(ex, q, lang) for ex in exercises for q in ex.quiz]
    title = exercises[0].title.get(lang, exercises[0].id) if len(exercises) == 1 else ui(lang)["nav_quiz"]
    return render_page(request, "quiz.html", nav="quiz", title=title, questions=questions,
                       client={"lang": lang, "t": ui(lang), "questions": questions})
