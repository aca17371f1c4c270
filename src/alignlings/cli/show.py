"""`alignlings show ID`: an exercise's statement, or with --code the exact template a learner gets."""

from __future__ import annotations

from typing import Annotated

import typer

from alignlings.cli.app import app
from alignlings.cli.common import LangOption, PackOption, console, get_exercise, load, resolve_lang


@app.command()
def show(
    exercise_id: Annotated[str, typer.Argument(metavar="ID", help="Exercise id, e.g. dpo-loss.")],
    code: Annotated[bool, typer.Option("--code", help="Print only the template a learner gets.")] = False,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Show an exercise's statement (formulas in LaTeX), or its template with --code; a pack's id
    shows the pack's introduction."""
    from alignlings.practice.grader import template_for

    lang = resolve_lang(lang)
    loaded = load(pack)
    intro_of = next((p for p in loaded.packs if p.id == exercise_id and exercise_id not in loaded.exercises), None)
    if intro_of is not None and not code:  # `show PACK`: the pack's introduction (prerequisites, formulas)
        from rich.markdown import Markdown

        console().print(f"[bold]{intro_of.title[lang]}[/]\n")
        console().print(Markdown(intro_of.intro(lang) or intro_of.title[lang]))
        return
    ex = get_exercise(loaded, exercise_id)
    if code:
        if not ex.is_code:
            raise typer.BadParameter(f"{exercise_id!r} is the quiz and has no code", param_hint="--code")
        typer.echo(template_for(ex, lang), nl=False)
        return
    from rich.markdown import Markdown

    out = console()
    out.print(f"[bold]{ex.title[lang]}[/] (level {ex.level})\n")
    out.print(Markdown(ex.texts(lang).statement))
