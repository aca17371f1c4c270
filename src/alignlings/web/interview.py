"""The mock interview's page (``practice.interview``): start one, answer under a visible clock, read
the report. Every action is a ``Practice`` method; this module only renders.

``GET /api/interview`` is the running interview as the learner sees it (no correctness of a choice
before the end); ``POST /api/interview/start``, ``/answer`` (a file goes through the grading queue)
and ``/finish``; ``GET /api/interview/report[?id=]`` a finished one's report. The teacher's side
(class interviews, results, CSV) is in ``web.classroom_interview``.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from alignlings.practice import interview as iv
from alignlings.web import render
from alignlings.web.context import call, graded, lang_of, practice, render_page
from alignlings.web.i18n import ui

router = APIRouter()

STRINGS = {
    "en": {"title": "Mock interview", "intro": "A few items under a clock, as in an interview: concept questions, "
           "an exercise to write from its signature (level 4) or its statement (level 5), a bug to find and a run "
           "to predict. No hints or solutions until it ends; then a report says what to review.",
           "start": "Start the interview", "minutes": "Minutes", "track": "Track", "any_track": "All my tracks",
           "seed": "Seed (optional: the same seed draws the same items)", "items": "Items",
           "left": "Time left", "finish": "Finish and see the report", "submit": "Submit", "submit_file": "Check my code",
           "answered": "Answered", "not_answered": "Not answered yet", "report": "Report", "right": "{right} of {total} right",
           "col_item": "Item", "col_result": "Result", "col_time": "Time", "misconceptions": "Misconceptions shown",
           "review_next": "Added to spaced review", "practise_next": "Practise again", "review_link": "Review now", "past": "Earlier interviews",
           "assigned": "Interviews from your teacher", "due": "due", "start_assigned": "Start",
           "level": "level {n}", "slot_concept": "Concept", "slot_write": "Write it", "slot_bug": "Find the bug",
           "slot_predict": "Predict", "right_mark": "right", "wrong_mark": "wrong", "skipped": "not answered",
           "time_up": "Time is up: the report follows.", "item_n": "Item {n} of {total}", "chosen": "Your choice is recorded.",
           "new": "Start another interview"},
    "zh": {"title": "模拟面试", "intro": "像真实面试一样限时作答几道题：概念题、只给函数签名（第 4 级）或只给题目描述（第 5 级）"
           "的手写实现、找 bug，以及预测一次运行的结果。结束前没有提示和参考答案；结束后的报告会告诉你该复习什么。",
           "start": "开始面试", "minutes": "时长（分钟）", "track": "学习路线", "any_track": "我的全部路线",
           "seed": "种子（可选：相同的种子抽到相同的题目）", "items": "题数",
           "left": "剩余时间", "finish": "结束并查看报告", "submit": "提交", "submit_file": "检查我的代码",
           "answered": "已作答", "not_answered": "尚未作答", "report": "报告", "right": "答对 {right}/{total}",
           "col_item": "题目", "col_result": "结果", "col_time": "用时", "misconceptions": "暴露的误区",
           "review_next": "已加入间隔复习", "practise_next": "再练一遍", "review_link": "去复习", "past": "以往的面试",
           "assigned": "老师布置的面试", "due": "截止", "start_assigned": "开始",
           "level": "第 {n} 级", "slot_concept": "概念题", "slot_write": "手写实现", "slot_bug": "找 bug",
           "slot_predict": "预测", "right_mark": "正确", "wrong_mark": "错误", "skipped": "未作答",
           "time_up": "时间到，下面是报告。", "item_n": "第 {n} 题，共 {total} 题", "chosen": "你的选择已记录。",
           "new": "再来一场"},
}


class StartBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    minutes: int = Field(iv.DEFAULT_MINUTES, ge=1, le=iv.MAX_MINUTES, description="Time for the whole interview.")
    track: str | None = Field(None, max_length=200, description="A track to draw from first (pack/id or id).")
    seed: int | None = Field(None, ge=0, lt=2**63, description="The same seed draws the same items.")
    items: int | None = Field(None, ge=1, le=iv.MAX_ITEMS, description="How many items (default 6).")
    level: int | None = Field(None, ge=4, le=5, description="The level of the exercise to write (default: drawn).")
    assignment: str | None = Field(None, max_length=64, description="A class interview's id.")


class AnswerBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    index: int = Field(ge=0, description="The item's index (0-based).")
    choice: int | None = Field(None, ge=0, description="An option's index, for a question.")
    code: str | None = Field(None, max_length=200_000, description="The file, for an exercise or a bug.")


def _html(view_item: dict) -> dict:
    """An item as the page shows it: its texts as HTML."""
    out = dict(view_item)
    out["statement_html"] = render.markdown(view_item.get("statement") or "")
    if view_item["kind"] == "choice":
        out["prompt_html"] = render.markdown(view_item["prompt"])
        out["options_html"] = [render.inline_markdown(o) for o in view_item["options"]]
    return out


def _report_html(rep: dict) -> dict:
    rep = dict(rep)
    rep["items"] = [{**r, "feedback_html": "" if r["file"] else render.markdown(r["feedback"] or ""),
                     "feedback_lines": (r["feedback"] or "").splitlines() if r["file"] else [],
                     "title_html": render.inline_markdown(r["title"])} for r in rep["items"]]
    return rep


@router.get("/api/interview", tags=["interview"])
def current(request: Request) -> dict:
    """The running interview as the learner sees it (404 when none runs)."""
    lang = lang_of(request)
    p = practice(request)
    if call(p.interview_current) is None:
        raise HTTPException(404, iv.text(lang, "no_interview"))
    return call(p.interview_view, lang)


@router.post("/api/interview/start", tags=["interview"])
def start(request: Request, body: StartBody) -> dict:
    """Draw and start an interview (a running one is returned as it is)."""
    lang = lang_of(request)
    return call(practice(request).interview_start, seed=body.seed, minutes=body.minutes, track=body.track,
                items=body.items, level=body.level, assignment=body.assignment, lang=lang)


@router.post("/api/interview/answer", tags=["interview"])
async def answer(request: Request, body: AnswerBody) -> dict:
    """Answer one item: a choice is final and judged only in the report; a file is graded (through the
    grading queue) and says whether it passes."""
    lang = lang_of(request)
    p = practice(request)
    if body.code is not None:
        return await graded(request, lambda: p.interview_answer(body.index, code=body.code, lang=lang),
                            what="an interview file")
    return call(p.interview_answer, body.index, choice=body.choice, lang=lang)


@router.post("/api/interview/finish", tags=["interview"])
def finish(request: Request) -> dict:
    """End the running interview now; returns its report."""
    return call(practice(request).interview_finish, lang_of(request))


@router.get("/api/interview/report", tags=["interview"])
def report_json(request: Request, id: str | None = None) -> dict:
    """A finished interview's report (default: the latest)."""
    return call(practice(request).interview_report, id, lang_of(request))


@router.get("/interview", include_in_schema=False)
def page(request: Request, report: str | None = None):
    lang = lang_of(request)
    s = STRINGS[lang]
    p = practice(request)
    state = call(p.interview_current)
    context: dict[str, Any] = {"s": s, "tracks": [{"key": t.key, "title": t.title.get(lang) or t.title.get("en", t.id)}
                                                  for t in p.course.tracks]}
    if state is not None:
        view = call(p.interview_view, lang)
        context.update(view={**view, "items": [_html(i) for i in view["items"]]})
    else:
        history = call(p.interview_history, lang)
        chosen = next((r for r in history if r["id"] == report), history[0] if history else None) if history else None
        if report and (chosen is None or chosen["id"] != report):
            raise HTTPException(404, f"interview: no finished interview {report!r}")
        context.update(report=_report_html(chosen) if chosen else None, history=history,
                       assigned=call(p.class_interviews), default_minutes=iv.DEFAULT_MINUTES)
    client = {"lang": lang, "t": ui(lang), "s": s, "deadline": context.get("view", {}).get("deadline"),
              "seconds_left": context.get("view", {}).get("seconds_left")}
    return render_page(request, "interview.html", nav="interview", title=s["title"], client=client, **context)
