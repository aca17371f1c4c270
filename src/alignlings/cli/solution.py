"""`alignlings solution ID`: reveal the reference answer and why it is right (recorded as revealed)."""

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
    from rich.syntax import Syntax

    from alignlings.practice.grader import solution_for

    lang = resolve_lang(lang)
    ex = get_exercise(load(pack), exercise_id, code_only=True)
    store().record_solution_revealed(ex.id, pack=ex.pack)
    out = console()
    out.print(Syntax(solution_for(ex, lang), "python", line_numbers=False))
    out.print(Markdown(ex.texts(lang).explanation))
