"""`alignlings list`: the pack's exercises with your progress."""

from __future__ import annotations

from alignlings.cli.app import app
from alignlings.cli.common import LangOption, PackOption, console, load, resolve_lang, store, t


@app.command("list")
def list_exercises(lang: LangOption = None, pack: PackOption = None) -> None:
    """List the exercises with their level and your progress."""
    from rich.table import Table

    lang = resolve_lang(lang)
    p = load(pack)
    summary = store().summary()
    table = Table(title=p.title[lang])
    for col in ("exercise", "title", "level", "status", "attempts", "hints"):
        table.add_column(t(col, lang))
    for ex in p:
        s = summary.get(ex.id, {})
        status = f"[green]{t('solved', lang)}[/]" if s.get("solved") else t("todo", lang)
        table.add_row(ex.id, ex.title[lang], str(ex.level), status, str(s.get("attempts", 0)), str(s.get("hints", 0)))
    console().print(table)
