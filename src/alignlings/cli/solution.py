"""`alignlings solution ID`: reveal the reference answer and why it is right (recorded as revealed).

Piped or redirected (not a terminal), the code and the explanation are written as plain text with
their lines whole: a pipe has no width, and rich would cut each line at its default 80 columns."""

from __future__ import annotations


import typer

from alignlings.cli.common import ExerciseId, LangOption, PackOption, console, open_exercise, saved, session, usage


def solution(
    exercise_id: ExerciseId,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Reveal the reference solution and its explanation; your progress records that you looked."""
    from alignlings.cli.show import latex_to_text, markdown

    lang, course, ex = open_exercise(exercise_id, lang, pack, code_only=True)
    with usage():
        shown = session(course).reveal(ex, lang=lang)
    out = console()
    print_code(out, shown.solution)
    if out.is_terminal:  # formulas as Unicode text, as `show` prints them
        out.print(markdown(shown.explanation))
    else:
        typer.echo(latex_to_text(shown.explanation).strip())
    saved(out, shown, lang)


def print_code(out, code: str) -> None:
    """Highlighted on a terminal; plain and uncut when piped (``alignlings solution ID > file.py``)."""
    if out.is_terminal:
        from rich.syntax import Syntax

        out.print(Syntax(code, "python", line_numbers=False))
    else:
        typer.echo(code.rstrip("\n"))
