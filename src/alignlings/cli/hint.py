"""`alignlings hint ID`: the next hint, from a nudge to the formula; with --blank N, the next hint
for that blank, from a nudge to its answer."""

from __future__ import annotations

from typing import Annotated

import typer

from alignlings import i18n
from alignlings.cli.common import (ExerciseId, LangOption, PackOption, console, load, pack_args, resolve_lang, saved, session,
                                   usage)

MSG = i18n.table("cli.hint")  # strings: locales/{en,zh}.toml [cli.hint]


def hint(
    exercise_id: ExerciseId,
    blank: Annotated[int | None, typer.Option("--blank", metavar="N", show_default=False,
                                              help="Hints for blank N only (TODO N in the template).")] = None,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Show the next hint; each call goes one level further (per blank with --blank N)."""
    from rich.markdown import Markdown

    lang = resolve_lang(lang)
    practice = session(load(pack))
    with usage():
        ex = practice.exercise(exercise_id)
        h = practice.hint(ex, blank, lang=lang)
    out = console()
    if blank is None:
        out.print(f"[bold]{MSG['hint'][lang].format(n=h.index, total=h.total)}[/]")
    else:
        out.print(f"[bold]{MSG['blank'][lang].format(blank=blank, n=h.index, total=h.total)}[/]")
    out.print(Markdown(h.text))
    if h.last:
        out.print(f"[dim]{MSG['last'][lang].format(id=ex.key + pack_args(pack)) if blank is None else MSG['blank_last'][lang]}[/]")
    saved(out, h, lang)
