"""The concept quiz: one question at a time; after an answer, every option is explained.

``GET /api/quiz`` never sends the answers; ``POST /api/quiz/{qid}`` records the choice and
returns which option is right and why each option is or is not.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from alignlings.practice.pack import Exercise, QuizQuestion
from alignlings.practice import service
from alignlings.practice.service import STORE_ERRORS
from alignlings.web import render
from alignlings.web.context import ctx, lang_of, render_page
from alignlings.web.i18n import ui

router = APIRouter()


class AnswerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    choice: int = Field(ge=0, description="0-based index of the chosen option.")


def quiz_exercises(request: Request) -> list[Exercise]:
    return [ex for ex in ctx(request).pack if ex.is_quiz]  # the concept quiz and bug-or-not drills


def find_question(request: Request, qid: str) -> tuple[Exercise, QuizQuestion]:
    for ex in quiz_exercises(request):
        for q in ex.quiz:
            if qid in (q.id, f"{ex.pack}/{q.id}"):  # PACK/QID where two packs share a question id
                return ex, q
    raise HTTPException(404, f"unknown question {qid!r}")


def public_question(ex: Exercise, q: QuizQuestion, lang: str) -> dict:
    """A question without its answer."""
    return {"id": q.id, "exercise": ex.key, "pack": ex.pack, "question": q.question.get(lang, ""),
            "question_html": render.markdown(q.question.get(lang, "")),
            "options": [{"text": o.text.get(lang, ""), "html": render.inline_markdown(o.text.get(lang, ""))}
                        for o in q.options]}


def _latest_answers(request: Request, pack: str | None = None) -> dict[str, dict]:
    """question id -> the learner's last answer (``choice``, ``correct``, ...) in one pack (None: the first)."""
    try:
        return dict(ctx(request).store.quiz_answers(pack=pack or ctx(request).pack.packs[0].id) or {})
    except STORE_ERRORS:  # progress is a convenience here, never a reason to fail the page
        return {}


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
    if body.choice >= len(q.options):
        raise HTTPException(422, f"choice: expected 0..{len(q.options) - 1}, got {body.choice}")
    correct = body.choice == q.answer
    store = ctx(request).store
    store.record_quiz_answer(q.id, body.choice, correct, pack=ex.pack)
    out = answer_payload(q, body.choice, lang)
    latest = round_answers(request, ex)
    right = sum(1 for x in ex.quiz if latest.get(x.id, {}).get("correct"))
    total = len(ex.quiz)
    if q.id == ex.quiz[-1].id:  # the last question closes a round: record it like `alignlings quiz` does
        service.record_quiz_round(store, ex, right, total, source="web")
        out["score"] = {"right": right, "total": total, "passed": right == total}
    out["progress"] = {"answered": sum(1 for x in ex.quiz if x.id in latest), "right": right, "total": total}
    return out


def answer_payload(q: QuizQuestion, choice: int, lang: str) -> dict:
    """Whether ``choice`` is right, and why every option is or is not."""
    return {"id": q.id, "choice": choice, "answer": q.answer, "correct": choice == q.answer,
            "options": [{"text": o.text.get(lang, ""), "why": o.why.get(lang, ""),
                         "why_html": render.inline_markdown(o.why.get(lang, "")), "correct": i == q.answer}
                        for i, o in enumerate(q.options)]}


def _round_key(ex: Exercise) -> str:
    from alignlings.practice.pack import BUILTIN_PACK_ID

    return f"web.quiz_round_started:{ex.id if ex.pack == BUILTIN_PACK_ID else f'{ex.pack}/{ex.id}'}"


def round_answers(request: Request, ex: Exercise) -> dict[str, dict]:
    """The latest answer to each of the quiz's questions since the learner last chose "retake"."""
    latest = _latest_answers(request, ex.pack)
    try:
        started = ctx(request).store.get_setting(_round_key(ex))
    except STORE_ERRORS:
        started = None
    ids = {q.id for q in ex.quiz}
    return {qid: a for qid, a in latest.items()
            if qid in ids and (not started or str(a.get("answered_at", "")) > str(started))}


class RetakeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    exercise: str = Field(description="The quiz exercise to start again.")


@router.post("/api/quiz-retake", tags=["quiz"])
def retake(request: Request, body: RetakeBody) -> dict:
    """Start a new round: the page forgets the shown answers (the history stays in the progress)."""
    from alignlings.practice.progress import utcnow

    ex = next((e for e in quiz_exercises(request) if body.exercise in (e.key, f"{e.pack}/{e.id}")), None)
    if ex is None:
        raise HTTPException(404, f"exercise: expected one of {[e.key for e in quiz_exercises(request)]}, "
                                 f"got {body.exercise!r}")
    ctx(request).store.set_setting(_round_key(ex), utcnow())
    return {"exercise": ex.key, "answered": 0, "total": len(ex.quiz)}


@router.get("/quiz", include_in_schema=False)
def quiz_page(request: Request, only: str | None = None):
    lang = lang_of(request)
    # the Quiz page is the concept quiz; a bug-or-not drill opens on its own (?only=KEY, from its page)
    exercises = [ex for ex in quiz_exercises(request) if (ex.key == only if only else ex.kind == "quiz")]
    questions = [public_question(ex, q, lang) for ex in exercises for q in ex.quiz]
    title = exercises[0].title.get(lang, exercises[0].id) if len(exercises) == 1 else ui(lang)["nav_quiz"]
    answered, rounds = {}, []
    for ex in exercises:
        latest = round_answers(request, ex)
        for q in ex.quiz:
            if q.id in latest:
                answered[q.id] = answer_payload(q, int(latest[q.id]["choice"]), lang)
        right = sum(1 for q in ex.quiz if answered.get(q.id, {}).get("correct"))
        rounds.append({"exercise": ex.key, "answered": sum(1 for q in ex.quiz if q.id in answered),
                       "right": right, "total": len(ex.quiz)})
    prev = nxt = None
    if only and len(exercises) == 1:  # a bug-or-not drill: an exercise among the others (issue 22)
        from alignlings.web.bugdrill import neighbours

        prev, nxt = neighbours(request, exercises[0], lang)
    return render_page(request, "quiz.html", nav="home" if only else "quiz", title=title, questions=questions,
                       rounds=rounds, prev=prev, next=nxt, drill=bool(only),
                       client={"lang": lang, "t": ui(lang), "questions": questions, "answered": answered,
                               "rounds": rounds, "next": nxt})
