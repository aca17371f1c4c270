"""`alignlings solution ID`: reveal the reference answer and why it is right (recorded as revealed).

Piped or redirected (not a terminal), the code and the explanation are written as plain text with
their lines whole: a pipe has no width, and rich would cut each line at its default 80 columns."""

from __future__ import annotations

from typing import Annotated

import typer

from alignlings.cli.common import LangOption, PackOption, console, get_exercise, load, resolve_lang, store


def solution(
    exercise_id: Annotated[str, typer.Argument(metavar="ID", help="Exercise id, e.g. dpo-loss.")],
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Reveal the reference solution and its explanation; your progress records that you looked."""
    from rich.markdown import Markdown

    from alignlings.practice.grader import solution_for

    lang = resolve_lang(lang)
    ex = get_exercise(load(pack), exercise_id, code_only=True)
    store().record_solution_revealed(ex.id, pack=ex.pack)
    out = console()
    print_code(out, solution_for(ex, lang))
    if out.is_terminal:
        out.print(Markdown(ex.texts(lang).explanation))
    else:
        typer.echo(ex.texts(lang).explanation.strip())


def print_code(out, code: str) -> None:
    """Highlighted on a terminal; plain and uncut when piped (``alignlings solution ID > file.py``)."""
    if out.is_terminal:
        from rich.syntax import Syntax

        out.print(Syntax(code, "python", line_numbers=False))
    else:
        typer.echo(code.rstrip("\n"))
