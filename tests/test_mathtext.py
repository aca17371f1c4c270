"""One ``$...$`` scanner for both interfaces (issue 30 §1): the CLI prints the formulas the web
typesets, on every text of the built-in packs and on the cases where the two scanners once differed."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import alignlings
from alignlings.cli import show
from alignlings.content.mathtext import Span, math_spans
from alignlings.web import render

PACKS = Path(alignlings.__file__).parent / "packs"
EDGES = [
    "it costs $ 5 and $ 10 today",  # a space just inside: money, not a formula (the web once typeset it)
    "a $x $ and $ y$ and $z$",
    "$$ \\sum_i x_i $$ then `$not math$` then \\$5 and $\\beta$",
    "two $a$ paragraphs $b\n\nc$ apart",
    "an unclosed `code $x$ span",
]


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def pack_texts() -> list[str]:
    """Every Markdown file and every string of every TOML file of the built-in packs that has a ``$``."""
    texts: list[str] = []
    for path in sorted(PACKS.rglob("*")):
        if path.suffix == ".md":
            texts.append(path.read_text(encoding="utf-8"))
        elif path.suffix == ".toml":
            texts += _strings(tomllib.loads(path.read_text(encoding="utf-8")))
    return [t for t in texts if "$" in t]


def _cli_formulas(text: str, monkeypatch) -> list[str]:
    seen: list[str] = []
    monkeypatch.setattr(show, "_formula", lambda latex: seen.append(latex) or "F")
    show.latex_to_text(text)
    return seen


def test_both_interfaces_find_the_same_formulas(monkeypatch):
    texts = pack_texts()
    assert len(texts) > 50  # the packs' statements, quiz questions, hints, ...
    for text in texts + EDGES:
        web = [latex for latex, _ in render._split_math(text)[1]]
        assert _cli_formulas(text, monkeypatch) == web, text[:200]


@pytest.mark.parametrize("text, spans", [
    ("costs $ 5 and $ 10", []),
    ("$x$ and $$y$$", [Span(0, 3, "x"), Span(8, 13, "y", True)]),
    ("a $x $ b $y$", [Span(9, 12, "y")]),
    ("`$x$` \\$ $z$", [Span(6, 8, None), Span(9, 12, "z")]),
    ("$a\n\nb$", []),
    ("$$a\n\nb$$", [Span(0, 8, "a\n\nb", True)]),
    ("$$  $$ and $", []),
])
def test_the_scanner_rules(text, spans):
    assert list(math_spans(text)) == spans


def test_escaped_dollar_reads_as_a_dollar_in_both():
    assert show.latex_to_text("pay \\$5 for $x$") == "pay $5 for x"
    assert "pay $5 for" in render.markdown("pay \\$5 for $x$")
