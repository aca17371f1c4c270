"""`alignlings solution ID`: reveal the reference answer and why it is right (recorded as revealed)."""

from __future__ import annotations

from typing import Annotated

import typer

from alignlings.cli.common import LangOption, PackOption, console, get_exercise, load, resolve_lang, saved, session, usage


def solution(
    exercise_id: Annotated[str, typer.Argument(metavar="ID", help="Exercise id, e.g. dpo-loss.")],
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Reveal the reference solution and its explanation; your progress records that you looked."""
    from rich.markdown import Markdown
    from rich.syntax import Syntax

    lang = resolve_lang(lang)
    course = load(pack)
    ex = get_exercise(course, exercise_id, code_only=True)
    with usage():
        shown = session(course).reveal(ex, lang=lang)
    out = console()
    out.print(Syntax(shown.solution, "python", line_numbers=False))
    out.print(Markdown(shown.explanation))
    saved(out, shown, lang)
