"""`alignlings hint ID`: the next hint, from a nudge to the formula."""

from __future__ import annotations

from typing import Annotated

import typer

from alignlings.cli.app import app
from alignlings.cli.common import (LangOption, PackOption, console, get_exercise, load, pack_args, resolve_lang,
                                   store)

MSG = {"hint": {"en": "Hint {n}/{total}", "zh": "提示 {n}/{total}"},
       "last": {"en": "(that was the last hint: `alignlings solution {id}` reveals the answer)",
                "zh": "（这是最后一条提示：`alignlings solution {id}` 会显示答案）"}}


@app.command()
def hint(
    exercise_id: Annotated[str, typer.Argument(metavar="ID", help="Exercise id, e.g. dpo-loss.")],
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Show the next hint; each call goes one level further."""
    from rich.markdown import Markdown

    lang = resolve_lang(lang)
    ex = get_exercise(load(pack), exercise_id)
    hints = ex.texts(lang).hints
    if not hints:
        raise typer.BadParameter(f"{exercise_id!r} has no hints", param_hint="ID")
    taken = store().record_hint(ex.id, pack=ex.pack, available=len(hints))
    n = min(taken, len(hints))
    out = console()
    out.print(f"[bold]{MSG['hint'][lang].format(n=n, total=len(hints))}[/]")
    out.print(Markdown(hints[n - 1]))
    if n == len(hints):
        out.print(f"[dim]{MSG['last'][lang].format(id=ex.key + pack_args(pack))}[/]")
