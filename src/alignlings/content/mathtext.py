"""The ``$...$`` formulas of a pack's Markdown text, found once for every interface.

The CLI prints a formula as Unicode text (``cli/show``) and the web app typesets it as MathML
(``web/render``); both ask :func:`math_spans` where the formulas are, so that a text has the same
formulas in both. The rules (pandoc's ``tex_math_dollars``): ``$$...$$`` is a display formula;
``$...$`` is inline when the character just inside each ``$`` is not a space and the formula does
not cross a blank line (so "costs $5 and $10" has none); nothing inside a backtick code span is a
formula; ``\\$`` is a literal dollar sign (yielded so that an interface can drop the backslash).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """``text[start:end]`` is a formula (``latex`` its LaTeX, ``display`` for ``$$``), or, with
    ``latex`` None, an escaped dollar ``\\$`` that stands for ``$``."""

    start: int
    end: int
    latex: str | None
    display: bool = False


def math_spans(text: str) -> Iterator[Span]:
    """The formulas and escaped dollars of ``text``, in order, outside backtick code spans."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "`":
            run = len(text[i:]) - len(text[i:].lstrip("`"))
            end = text.find("`" * run, i + run)
            if end == -1:  # an unclosed code span runs to the end
                return
            i = end + run
        elif c == "\\" and text.startswith("$", i + 1):
            yield Span(i, i + 2, None)
            i += 2
        elif c == "$":
            display = text.startswith("$$", i)
            delim = "$$" if display else "$"
            end = text.find(delim, i + len(delim))
            body = text[i + len(delim):end] if end != -1 else ""
            if end == -1 or not body.strip() or (not display and (
                    "\n\n" in body or body[:1].isspace() or body[-1:].isspace())):
                i += 1
                continue
            yield Span(i, end + len(delim), body, display)
            i = end + len(delim)
        else:
            i += 1
