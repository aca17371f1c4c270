"""Server-side rendering of exercise text and code: Markdown with typeset formulas, highlighted
Python with form inputs in place of blanks or masked tokens.

Formulas are converted to MathML (``latex2mathml``) on the server, which Chromium and Firefox
render natively: nothing is fetched from the internet and no script typesets the page.
Code is highlighted with Pygments' lexer; the HTML is built token by token so that a "hole"
(a ``_____`` blank or a cloze mask) becomes an ``<input>`` without confusing the lexer.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from functools import lru_cache

from markdown_it import MarkdownIt
from pygments.lexers import PythonLexer
from pygments.token import STANDARD_TYPES

from alignlings.content.mathtext import math_spans

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")


# -- formulas --------------------------------------------------------------------------------
@lru_cache(maxsize=512)
def latex_to_mathml(latex: str, display: bool) -> str:
    """MathML for one formula; on a conversion error the LaTeX is shown as code (never a 500)."""
    try:
        from latex2mathml.converter import convert

        mathml = convert(latex.strip(), display="block" if display else "inline")
    except Exception:  # noqa: BLE001 - a formula the converter cannot read must not break the page
        return f'<code class="latex">{html.escape(latex)}</code>'
    # TeX sets a thin space around operator names (\log, \exp, \min); MathML Core does not
    return _OPERATOR_NAME.sub(r'<mspace width="0.1667em"></mspace>\1<mspace width="0.1667em"></mspace>', mathml)


_OPERATOR_NAME = re.compile(r"(<mi>(?:log|exp|min|max|sin|cos|tan|ln|det|sup|inf|lim|arg|Pr)</mi>)")


def _split_math(text: str) -> tuple[str, list[tuple[str, bool]]]:
    """Replace ``$...$`` / ``$$...$$`` (outside backtick code) by placeholders.

    Markdown would eat the backslashes of the LaTeX, so formulas are cut out first and put back
    as MathML after Markdown ran. Returns the text with placeholders and the formulas in order.
    """
    out: list[str] = []
    formulas: list[tuple[str, bool]] = []
    last = 0
    for span in math_spans(text):  # the scanner the CLI uses too
        out.append(text[last:span.start])
        if span.latex is None:  # an escaped dollar
            out.append("$")
        else:
            formulas.append((span.latex, span.display))
            token = f"MATHPLACEHOLDER{len(formulas) - 1}X"
            out.append(f"\n\n{token}\n\n" if span.display else token)
        last = span.end
    out.append(text[last:])
    return "".join(out), formulas


INLINE_FITS = 24  # LaTeX characters: an inline formula this short fits a 390 px phone's line


def markdown(text: str) -> str:
    """Markdown (CommonMark + tables) to HTML with ``$`` formulas typeset as MathML."""
    body, formulas = _split_math(text or "")
    rendered = _md.render(body)

    def put_back(m: re.Match) -> str:
        latex, display = formulas[int(m.group(1))]
        mathml = latex_to_mathml(latex, display)
        # a wide formula scrolls inside its box (never the page): focusable, so the keyboard can scroll it too
        if display:
            return f'<div class="math-display" tabindex="0">{mathml}</div>'
        # an inline formula cannot wrap: one wider than a phone's line scrolls in its own box; a long one is
        # focusable so that the keyboard can scroll it too (a short one always fits and stays out of the Tab order)
        focus = ' tabindex="0"' if len(latex) > INLINE_FITS else ""
        return f'<span class="math-inline"{focus}>{mathml}</span>'

    # a wide table scrolls in its own box (focusable, for the keyboard), not the page
    rendered = rendered.replace("<table>", '<div class="table-scroll" tabindex="0"><table>').replace(
        "</table>", "</table></div>")
    # so does a code block (a bug-or-not drill's code on a phone)
    rendered = rendered.replace("<pre>", '<pre tabindex="0">')
    rendered = re.sub(r"<p>MATHPLACEHOLDER(\d+)X</p>", put_back, rendered)
    return re.sub(r"MATHPLACEHOLDER(\d+)X", put_back, rendered)


def inline_markdown(text: str) -> str:
    """Markdown for one short line (an option, a hint): no surrounding paragraph."""
    rendered = markdown(text).strip()
    if rendered.startswith("<p>") and rendered.endswith("</p>") and rendered.count("<p>") == 1:
        rendered = rendered[3:-4]
    return rendered


# -- code ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Hole:
    """A character range of the source replaced by ``html`` (an input) in the highlighted view."""

    start: int  # offset in the source
    end: int  # exclusive
    html: str


def _css_class(ttype) -> str:
    while ttype not in STANDARD_TYPES:
        ttype = ttype.parent
    return STANDARD_TYPES[ttype]


def highlight(source: str, holes: list[Hole] | tuple = (), after_line: dict[int, str] | None = None) -> str:
    """Highlighted Python as HTML lines (``<span class="line">``), holes replaced by their HTML.

    ``after_line`` maps a 1-based line number to HTML placed right after that line (feedback
    rows under a blank). The classes are Pygments' short names, styled by static/highlight.css.
    """
    holes = sorted(holes, key=lambda h: h.start)
    after_line = after_line or {}
    lines: list[list[str]] = [[]]
    hole_i = 0

    def emit(text: str, cls: str) -> None:
        parts = text.split("\n")
        for k, part in enumerate(parts):
            if k:
                lines.append([])
            if part:
                esc = html.escape(part, quote=False)
                lines[-1].append(f'<span class="{cls}">{esc}</span>' if cls else esc)

    for offset, ttype, value in PythonLexer(stripnl=False, ensurenl=False).get_tokens_unprocessed(source):
        cls = _css_class(ttype)
        pos, end = offset, offset + len(value)
        while pos < end:
            while hole_i < len(holes) and holes[hole_i].end <= pos and holes[hole_i].start < pos:
                hole_i += 1
            h = holes[hole_i] if hole_i < len(holes) else None
            if h is None or h.start >= end:
                emit(source[pos:end], cls)
                break
            if h.start > pos:
                emit(source[pos:h.start], cls)
                pos = h.start
            # pos is inside (or at the start of) hole h
            if pos == h.start:
                lines[-1].append(h.html)
            pos = min(end, h.end)
            if pos >= h.end:
                hole_i += 1
    if lines and not lines[-1]:
        lines.pop()
    out = []
    for number, parts in enumerate(lines, start=1):
        out.append(f'<span class="line" data-line="{number}">{"".join(parts)}</span>')
        if number in after_line:
            out.append(after_line[number])
    # each line is a block (CSS), so no newline characters between them: they would double the spacing
    return '<pre class="code">' + "".join(out) + "</pre>"


def highlight_lines(source: str) -> list[str]:
    """Highlighted Python, one HTML fragment per line of ``source`` (no ``<pre>``, no line wrapper):
    for pages that lay the lines out themselves (the Review page puts inputs into one of them)."""
    html_ = highlight(source)
    rows = re.findall(r'<span class="line" data-line="\d+">(.*?)</span>(?=<span class="line"|</pre>)', html_, re.S)
    n = len(source.splitlines())
    return (rows + [""] * n)[:n]


def offsets(source: str) -> list[int]:
    """Offset of the start of each line (index 0 = line 1)."""
    starts, total = [], 0
    for line in source.splitlines(keepends=True):
        starts.append(total)
        total += len(line)
    return starts
