"""The concept quiz: one question at a time; after an answer, every option is explained.

``GET /api/quiz`` never sends the answers; ``POST /api/quiz/{qid}`` records the choice and
returns which option is right and why each option is or is not.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from alignlings.content.exercise import Exercise
from alignlings.content.pack import QuizQuestion
from alignlings.web import render
from alignlings.web.context import call, lang_of, practice, render_page
from alignlings.web.helpers import neighbours, page, public_question
from alignlings.web.i18n import ui
from alignlings.web.kinds import view_of

router = APIRouter()


class AnswerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    choice: int = Field(ge=0, description="0-based index of the chosen option.")


def quiz_exercises(request: Request) -> list[Exercise]:
    return practice(request).quiz_exercises()  # the concept quiz and bug-or-not drills


def find_question(request: Request, qid: str) -> tuple[Exercise, QuizQuestion]:
    return call(practice(request).quiz_question, qid)  # PACK/QID where two packs share a question id


@router.get("/api/quiz", tags=["quiz"])
def list_questions(request: Request) -> dict:
    """Every quiz question of the pack, in order, without answers."""
    lang = lang_of(request)
    return {"questions": [public_question(ex, q, lang) for ex in quiz_exercises(request) for q in ex.quiz]}


@router.post("/api/quiz/{qid:path}", tags=["quiz"])
def answer(request: Request, qid: str, body: AnswerBody) -> dict:
    """Record an answer; returns whether it is right and the explanation of every option."""
    lang = lang_of(request)
    ex, q = find_question(request, qid)
    result = call(practice(request).quiz_answer, ex, q, body.choice, lang=lang)
    out = answer_payload(q, body.choice, lang, correct=result.correct)  # the session's verdict
    out["progress"] = result.progress
    out["recorded"] = result.recorded
    if result.score is not None:  # the last question closes a round (recorded like `alignlings quiz` does)
        out["score"] = result.score
    return out


def answer_payload(q: QuizQuestion, choice: int, lang: str, *, correct: bool) -> dict:
    """Whether ``choice`` is right (``correct``: as the session judged it), and why every option is or is not."""
    return {"id": q.id, "choice": choice, "answer": q.answer, "correct": correct,
            "options": [{"text": o.text.get(lang, ""), "why": o.why.get(lang, ""),
                         "why_html": render.inline_markdown(o.why.get(lang, "")), "correct": i == q.answer}
                        for i, o in enumerate(q.options)]}


class RetakeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    exercise: str = Field(description="The quiz exercise to start again.")


@router.post("/api/quiz-retake", tags=["quiz"])
def retake(request: Request, body: RetakeBody) -> dict:
    """Start a new round: the page forgets the shown answers (the history stays in the progress)."""
    ex = next((e for e in quiz_exercises(request) if body.exercise in (e.key, f"{e.pack}/{e.id}")), None)
    if ex is None:
        raise HTTPException(404, f"exercise: expected one of {[e.key for e in quiz_exercises(request)]}, "
                                 f"got {body.exercise!r}")
    started = practice(request).quiz_start(ex)
    return {"exercise": ex.key, "answered": 0, "total": started.total}


@router.get("/quiz", include_in_schema=False)
def quiz_page(request: Request, only: str | None = None):
    lang = lang_of(request)
    # the Quiz page is the concept quiz; a bug-or-not drill opens on its own (?only=KEY, from its page)
    exercises = [ex for ex in quiz_exercises(request) if (ex.key == only if only else ex.kind_spec.on_quiz_page)]
    questions = [public_question(ex, q, lang) for ex in exercises for q in ex.quiz]
    title = exercises[0].title.get(lang, exercises[0].id) if len(exercises) == 1 else ui(lang)["nav_quiz"]
    answered, rounds = {}, []
    for ex in exercises:
        current = practice(request).quiz_round(ex)  # the round's answers and score, as the session keeps them
        for q in ex.quiz:
            if q.id in current.answered:
                answered[q.id] = answer_payload(q, current.answered[q.id], lang, correct=current.correct[q.id])
        rounds.append({"exercise": ex.key, "answered": len(current.answered), "right": current.right,
                       "total": current.total})
    prev = nxt = None
    if only and len(exercises) == 1:  # a bug-or-not drill: an exercise among the others (issue 22)
        prev, nxt = neighbours(request, exercises[0], lang)
    # a drill opens on its kind's template; the Quiz page on the concept quiz's
    template = view_of(exercises[0] if only and len(exercises) == 1 else "quiz").template
    return render_page(request, template, nav="home" if only else "quiz", title=title, questions=questions,
                       rounds=rounds, prev=prev, next=nxt, drill=bool(only),
                       client={"lang": lang, "t": ui(lang), "questions": questions, "answered": answered,
                               "rounds": rounds, "next": nxt})


@page("quiz")  # the page of the quiz and bug-or-not kinds (web.kinds)
@page("bug-or-not")
def drill_page(request: Request, ex: Exercise):
    """A quiz or bug-or-not exercise's own page (``GET /exercises/{id}``): the quiz page with only it."""
    return quiz_page(request, only=ex.key)
