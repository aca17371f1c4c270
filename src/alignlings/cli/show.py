"""`alignlings show ID`: an exercise's statement, or with --code the exact template a learner gets."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Annotated

import typer

from alignlings import i18n
from alignlings.content.mathtext import math_spans
from alignlings.cli.common import (ExerciseId, LangOption, PackOption, UsageError, console, get_exercise, load,
                                   resolve_lang)


def _group(node, l2tobj) -> str:
    """A fraction's numerator or denominator as text, parenthesised unless it is one symbol."""
    text = l2tobj.nodelist_to_text([node]).strip() if node is not None else ""
    simple = not any(c in text for c in " +-*/=,<>")
    return text if simple else f"({text})"


def _frac(node, l2tobj) -> str:
    num, den = node.nodeargd.argnlist[-2:]
    return f"{_group(num, l2tobj)}/{_group(den, l2tobj)}"


@lru_cache(maxsize=1)
def _latex_converter():
    """pylatexenc's LaTeX-to-Unicode converter, with fractions as a/(b + c) and spaced operator names."""
    from pylatexenc.latex2text import LatexNodes2Text, MacroTextSpec, get_default_latex_context_db

    db = get_default_latex_context_db().filter_context()
    macros = [MacroTextSpec(name, simplify_repl=_frac) for name in ("frac", "dfrac", "tfrac")]
    macros += [MacroTextSpec(name, simplify_repl=f"{name} ") for name in
               ("log", "exp", "min", "max", "ln", "sin", "cos", "tan", "arg", "det", "sup", "inf", "lim", "Pr")]
    macros += [MacroTextSpec("|", simplify_repl="‖"), MacroTextSpec("Vert", simplify_repl="‖")]  # KL(p\|q)
    db.add_context_category("alignlings", macros=macros, prepend=True)
    return LatexNodes2Text(latex_context=db, math_mode="text", strict_latex_spaces=False)


_OPERATOR_NAME = re.compile(r"(?<=[^\s(\[{|/^_-])(?=(?:log|exp|min|max|ln) )")


def _formula(latex: str) -> str:
    """One formula as Unicode text; verbatim LaTeX if the converter cannot read it."""
    try:
        plain = " ".join(_latex_converter().latex_to_text(latex).split())
    except Exception:  # noqa: BLE001 - never a crash, never a corrupted formula
        return latex.strip()
    return _OPERATOR_NAME.sub(" ", plain)  # "β log", not "βlog"


def latex_to_text(text: str) -> str:
    """Every ``$...$`` formula of a Markdown text as readable Unicode (pylatexenc): ``\\pi_\\theta``
    becomes ``π_θ``; a display formula goes on its own indented line. Code spans and prose are
    left as they are. The result is meant for a code span or plain text (its ``_`` are literal)."""
    out, last = [], 0
    for span in math_spans(text):
        out.append(text[last:span.start])
        if span.latex is None:  # an escaped dollar
            out.append("$")
        else:
            plain = _formula(span.latex)
            out.append(f"\n\n    {plain}\n\n" if span.display else plain)
        last = span.end
    out.append(text[last:])
    return "".join(out)


def _markdown_safe(text: str) -> str:
    """Formulas as Unicode inside code spans, so that Markdown cannot eat their underscores."""
    out, last = [], 0
    for span in math_spans(text):
        out.append(text[last:span.start])
        if span.latex is None:  # an escaped dollar, kept escaped for Markdown
            out.append("\\$")
        else:
            plain = _formula(span.latex).replace("`", "'")
            out.append(f"\n\n```text\n{plain}\n```\n\n" if span.display else f"`{plain}`")
        last = span.end
    out.append(text[last:])
    return "".join(out)


def markdown(text: str):
    """A Markdown text for the terminal: paragraphs reflowed, formulas as Unicode (``show``, ``predict``,
    ``review``)."""
    from rich.markdown import Markdown

    return Markdown(_markdown_safe(text))


LEVEL = i18n.texts("cli.show.level")  # strings: locales/{en,zh}.toml [cli.show]


def show(
    exercise_id: ExerciseId,
    code: Annotated[bool, typer.Option("--code", help="Print only the template a learner gets.")] = False,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Show an exercise's statement (formulas as Unicode text), or its template with --code; a pack's id
    shows the pack's introduction."""
    from alignlings.grading.grader import template_for

    lang = resolve_lang(lang)
    loaded = load(pack)
    intro_of = next((p for p in loaded.packs if p.id == exercise_id and exercise_id not in loaded.exercises), None)
    if intro_of is not None and not code:  # `show PACK`: the pack's introduction (prerequisites, formulas)
        from rich.markdown import Markdown

        console().print(f"[bold]{intro_of.title[lang]}[/]\n")
        console().print(Markdown(_markdown_safe(intro_of.intro(lang) or intro_of.title[lang])))
        return
    ex = get_exercise(loaded, exercise_id)
    if code:
        if not ex.kind_spec.graded_as_file:
            raise UsageError("no_code", "--code", lang=lang, id=exercise_id)
        typer.echo(template_for(ex, lang), nl=False)
        return
    from rich.markdown import Markdown

    out = console()
    level = LEVEL.get(lang, LEVEL["en"]).format(n=ex.level)
    out.print(f"[bold]{ex.title[lang]}[/]{'（' if lang == 'zh' else ' ('}{level}{'）' if lang == 'zh' else ')'}\n")
    out.print(Markdown(_markdown_safe(ex.texts(lang).statement)))
    from alignlings.content import figures  # the page's pictures, as text (issue 22)

    for name in figures.for_exercise(ex.id):
        out.print("")
        out.print(figures.text(name, lang), markup=False, highlight=False)
