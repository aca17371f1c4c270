"""`alignlings hint ID`: the next hint, from a nudge to the formula; with --blank N, the next hint
for that blank, from a nudge to its answer."""

from __future__ import annotations

from typing import Annotated

import typer

from alignlings import i18n
from alignlings.cli.common import LangOption, PackOption, console, get_exercise, load, pack_args, resolve_lang, store

MSG = i18n.table("cli.hint")  # strings: locales/{en,zh}.toml [cli.hint]


def hint(
    exercise_id: Annotated[str, typer.Argument(metavar="ID", help="Exercise id, e.g. dpo-loss.")],
    blank: Annotated[int | None, typer.Option("--blank", metavar="N", show_default=False,
                                              help="Hints for blank N only (TODO N in the template).")] = None,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Show the next hint; each call goes one level further (per blank with --blank N)."""
    from rich.markdown import Markdown

    lang = resolve_lang(lang)
    ex = get_exercise(load(pack), exercise_id)
    if blank is not None:
        _blank_hint(ex, blank, lang)
        return
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


def _blank_hint(ex, blank: int, lang: str) -> None:
    """The next hint for one blank. Each is recorded as a hint taken on the exercise (as plain
    ``hint`` does); how far the learner got on each blank is kept in a setting, restarted when the
    exercise is reset."""
    from rich.markdown import Markdown

    if not ex.is_code:
        raise typer.BadParameter(f"{ex.key!r} is the quiz: it has no blanks", param_hint="--blank")
    per_blank = ex.texts(lang).blank_hints
    if not per_blank:
        raise typer.BadParameter(f"{ex.key!r} has no per-blank hints", param_hint="--blank")
    if not 1 <= blank <= len(per_blank):
        raise typer.BadParameter(f"expected a blank from 1 to {len(per_blank)}, got {blank}", param_hint="--blank")
    hints = per_blank[blank - 1]
    st = store()
    key = f"blank_hints/{ex.pack}/{ex.id}/{blank}"
    reset_at = st._reset_at(ex.id, ex.pack)  # the store's own reset marker: a reset starts the blank over
    seen = st.get_setting(key) or {}
    taken = seen.get("taken", 0) if isinstance(seen, dict) and seen.get("reset_at") == reset_at else 0
    if taken < len(hints):
        st.record_hint(ex.id, pack=ex.pack)
        taken += 1
        st.set_setting(key, {"taken": taken, "reset_at": reset_at})
    out = console()
    out.print(f"[bold]{MSG['blank'][lang].format(blank=blank, n=taken, total=len(hints))}[/]")
    out.print(Markdown(hints[taken - 1]))
    if taken == len(hints):
        out.print(f"[dim]{MSG['blank_last'][lang]}[/]")
