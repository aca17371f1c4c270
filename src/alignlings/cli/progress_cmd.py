"""`alignlings progress`: what you solved, with attempts and hints; export and import between machines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from alignlings.cli.app import app
from alignlings.cli.common import LangOption, PackOption, console, load, resolve_lang, store, t


@app.command()
def progress(
    export: Annotated[Path | None, typer.Option("--export", help="Write all progress to this JSON file.")] = None,
    import_: Annotated[Path | None, typer.Option("--import", help="Merge progress from a JSON export.")] = None,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Show your progress; --export FILE.json / --import FILE.json move it between machines."""
    from rich.table import Table

    lang = resolve_lang(lang)
    s, out = store(), console()
    if export is not None:
        export.write_text(json.dumps(s.export(), ensure_ascii=False, indent=1), encoding="utf-8")
        out.print(f"{export}")
        return
    if import_ is not None:
        try:
            data = json.loads(import_.read_text(encoding="utf-8"))
            counts = s.import_(data)
        except (OSError, json.JSONDecodeError, ValueError) as exc:
            raise typer.BadParameter(f"{import_}: {exc}", param_hint="--import") from None
        out.print(json.dumps(counts))
        return
    p = load(pack)
    summary = s.summary()
    table = Table(title=p.title[lang])
    for col in ("exercise", "status", "attempts", "hints", "revealed"):
        table.add_column(t(col, lang))
    for ex in p:
        row = summary.get(ex.id, {})
        status = f"[green]{t('solved', lang)}[/]" if row.get("solved") else t("todo", lang)
        table.add_row(ex.id, status, str(row.get("attempts", 0)), str(row.get("hints", 0)),
                      "✓" if row.get("revealed") else "")
    out.print(table)
    out.print(f"[dim]{s.path}[/]")
