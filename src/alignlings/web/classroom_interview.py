"""The teacher's class interviews (``practice.interview``): give one (a seed, minutes, a track, a due
time: every learner draws the same items), see each learner's result and a per-item summary, and
download them as CSV. Teacher token only, like the rest of ``web.classroom``."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from alignlings.practice import interview as iv
from alignlings.web.classroom import _csv, _teacher_call, _teacher_context, classroom
from alignlings.web.context import lang_of, render_page

router = APIRouter()

RESULT_COLUMNS = ["name", "learner", "status", "right", "total", "started_at", "finished_at", "on_time", "seconds"]
ITEM_COLUMNS = ["item", "slot", "exercise", "question", "title", "answered", "right"]


class ClassInterviewBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = Field(max_length=200, description="What the learners see it called (1 to 120 characters).")
    due: str = Field(max_length=64, description="When it is due: ISO 8601 (a date alone is the end of that day, UTC).")
    minutes: int = Field(iv.DEFAULT_MINUTES, ge=1, le=iv.MAX_MINUTES, description="Time each learner has.")
    seed: int | None = Field(None, ge=0, lt=2**63, description="The draw (default: a new one).")
    track: str | None = Field(None, max_length=200, description="A track to draw from first.")
    items: int | None = Field(None, ge=1, le=iv.MAX_ITEMS, description="How many items (default 6).")
    level: int | None = Field(None, ge=4, le=5, description="The level of the exercise to write.")


def _results(request: Request, interview: str) -> dict:
    return _teacher_call(classroom(_teacher_context(request)).interview_results, interview, lang_of(request))


@router.post("/api/teacher/interviews", tags=["classroom"])
def add(request: Request, body: ClassInterviewBody) -> dict:
    """Give the class an interview: every learner who starts it draws the same items."""
    return _teacher_call(classroom(_teacher_context(request)).add_interview, title=body.title, due=body.due,
                         minutes=body.minutes, seed=body.seed, track=body.track, items=body.items, level=body.level)


@router.get("/api/teacher/interviews", tags=["classroom"])
def results_json(request: Request) -> dict:
    """Every class interview with each learner's result and the per-item summary."""
    return {"interviews": _teacher_call(classroom(_teacher_context(request)).interviews, lang_of(request))}


@router.post("/api/teacher/interviews/{interview}/remove", tags=["classroom"])
def remove(request: Request, interview: str) -> dict:
    """Forget a class interview (what learners did stays in their history)."""
    _teacher_call(classroom(_teacher_context(request)).remove_interview, interview)
    return {"removed": interview}


@router.get("/teacher/interviews/{interview}/results.csv", include_in_schema=False)
def results_csv(request: Request, interview: str) -> Response:
    found = _results(request, interview)
    return _csv(found["learners"], RESULT_COLUMNS, f"interview-{interview}.csv")


@router.get("/teacher/interviews/{interview}/items.csv", include_in_schema=False)
def items_csv(request: Request, interview: str) -> Response:
    found = _results(request, interview)
    rows = [{**r, "item": r["index"] + 1} for r in found["per_item"]]
    return _csv(rows, ITEM_COLUMNS, f"interview-{interview}-items.csv")


@router.get("/teacher/interviews/{interview}", include_in_schema=False)
def page(request: Request, interview: str):
    found = _results(request, interview)
    lang = lang_of(request)
    from alignlings.web.interview import STRINGS

    return render_page(request, "teacher_interview.html", nav="", title=found["title"], s=STRINGS[lang],
                       st=TEACHER[lang], a=found)


TEACHER = {
    "en": {"learner": "Learner", "status": "Status", "score": "Score", "on_time": "On time", "time": "Time",
           "per_item": "Per item", "answered": "Answered", "right": "Right", "csv_results": "Results (CSV)",
           "csv_items": "Items (CSV)", "not_started": "not started", "running": "running", "finished": "finished",
           "yes": "yes", "no": "no", "due": "Due", "seed": "seed", "minutes": "{n} min"},
    "zh": {"learner": "学员", "status": "状态", "score": "得分", "on_time": "按时完成", "time": "用时",
           "per_item": "逐题统计", "answered": "作答人数", "right": "答对人数", "csv_results": "结果（CSV）",
           "csv_items": "逐题（CSV）", "not_started": "未开始", "running": "进行中", "finished": "已完成",
           "yes": "是", "no": "否", "due": "截止", "seed": "种子", "minutes": "{n} 分钟"},
}
