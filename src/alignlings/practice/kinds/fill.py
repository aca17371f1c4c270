"""The fill-in exercise (``kind = "code"``): a template with blanks, graded as a file by the grader;
``dev check`` runs its solution and each misconception (``practice.devcheck``)."""

from __future__ import annotations

from alignlings.practice.kinds import Kind, register


class Fill(Kind):
    name = "code"
    label = {"en": "fill-in", "zh": "填空"}
    graded_as_file = True
    has_blanks = True
    web_page = None  # web/exercises.py: the template with an input per blank
    template = "exercise.html"


FILL = register(Fill())
