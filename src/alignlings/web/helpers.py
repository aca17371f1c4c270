"""What several web pages share, so that no page imports another page (issue 20 §2).

``get_exercise``, the request's language and the mapping of grading errors to HTTP statuses live in
``web/context.py``; here are the page-level pieces: the statement as the web shows it, hints taken,
an exercise's neighbours, a quiz question without its answer, and ``PAGES``, the page each exercise
kind opens on (``GET /exercises/{id}``), filled by the page modules that render them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from fastapi import Request

from alignlings.content.exercise import Exercise
from alignlings.content.pack import QuizQuestion
from alignlings.web import render
from alignlings.web.context import ctx, practice

PAGES: dict[str, Callable[[Request, Exercise], Any]] = {}  # a kind's web page name -> its renderer


def page(name: str) -> Callable[[Callable[[Request, Exercise], Any]], Callable[[Request, Exercise], Any]]:
    """Register the function that renders the page of exercises whose kind names ``name`` as its page."""
    def register(fn: Callable[[Request, Exercise], Any]) -> Callable[[Request, Exercise], Any]:
        PAGES[name] = fn
        return fn
    return register


_RUN_THE_FILE = re.compile(r"`python [\w./-]+\.py`")


def web_statement(text: str) -> str:
    """The statement without the sentences that tell a terminal learner to run the file
    (``python dpo_loss.py``): in the web app, Check runs it and shows its output."""
    paragraphs = re.split(r"(\n\s*\n)", text)
    out = []
    for para in paragraphs:
        if _RUN_THE_FILE.search(para):
            sentences = re.split(r"(?<=[.。!?！？])\s+|(?<=[。！？])", para)
            kept = [x for x in sentences if x and not _RUN_THE_FILE.search(x)]
            para = "".join(x if not i or kept[i - 1].endswith(("。", "！", "？")) else " " + x
                           for i, x in enumerate(kept))
            if not para.strip():
                continue
        out.append(para)
    return "".join(out).strip() + "\n"


def hints_taken(request: Request, ex: Exercise) -> int:
    """How many of the exercise's own hints were taken since the last reset (per-blank ones apart)."""
    return practice(request).hint_state(ex).exercise


def public_question(ex: Exercise, q: QuizQuestion, lang: str) -> dict:
    """A question without its answer."""
    return {"id": q.id, "exercise": ex.key, "pack": ex.pack, "question": q.question.get(lang, ""),
            "question_html": render.markdown(q.question.get(lang, "")),
            "options": [{"text": o.text.get(lang, ""), "html": render.inline_markdown(o.text.get(lang, ""))}
                        for o in q.options]}


def neighbours(request: Request, ex: Exercise, lang: str) -> tuple[dict | None, dict | None]:
    """The exercises before and after ``ex`` in the course (``{id, title, url}``, None at an end)."""
    pack = ctx(request).pack
    order = list(pack.exercises)
    i = order.index(ex.key) if ex.key in order else order.index(ex.id)

    def link(j: int) -> dict | None:
        if not 0 <= j < len(order):
            return None
        other = pack.get(order[j])
        return {"id": other.key, "title": other.title.get(lang, other.id), "url": f"/exercises/{other.key}"}

    return link(i - 1), link(i + 1)
