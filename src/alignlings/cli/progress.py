"""`alignlings progress`: what you solved, by pack and track, with attempts and hints; export and import
between machines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from alignlings.cli.common import LangOption, PackOption, console, load, resolve_lang, session, summaries, t


def progress(
    export: Annotated[Path | None, typer.Option("--export", help="Write all progress to this JSON file.")] = None,
    import_: Annotated[Path | None, typer.Option("--import", help="Merge progress from a JSON export.")] = None,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Show your progress by pack and track; --export FILE.json / --import FILE.json move it between machines."""
    from rich.markup import escape
    from rich.table import Table

    from alignlings.cli.list import requires_text

    lang = resolve_lang(lang)
    from alignlings.practice.session import StoreUnavailable, UsageError

    p, out = load(pack), console()
    practice = session(p)
    if export is not None:
        export.write_text(json.dumps(practice.export(), ensure_ascii=False, indent=1), encoding="utf-8")
        out.print(escape(str(export)))
        return
    if import_ is not None:
        try:
            data = json.loads(import_.read_text(encoding="utf-8"))
            counts = practice.import_(data)  # the review schedule is rebuilt at once
        except UsageError as exc:
            raise typer.BadParameter(f"{import_}: {exc.message}", param_hint="--import") from None
        except StoreUnavailable as exc:
            console(stderr=True).print(escape(str(exc)))
            raise typer.Exit(1) from None
        except (OSError, json.JSONDecodeError, ValueError) as exc:
            raise typer.BadParameter(f"{import_}: {exc}", param_hint="--import") from None
        out.print(json.dumps(counts))
        return
    s = practice.store
    summary = summaries(p, s)
    for part in p.packs:
        keys = [ex.key for ex in p if ex.pack == part.id]
        done = sum(1 for k in keys if summary[k].get("solved"))
        table = Table(title=f"{escape(part.title[lang])} ({escape(part.id)}): {done}/{len(keys)}", title_justify="left")
        for col in ("track", "exercise", "status", "attempts", "hints", "revealed"):
            table.add_column(t(col, lang))
        for track in (tr for tr in p.tracks if tr.pack == part.id):
            needs = requires_text(p, track, lang)
            name = escape(track.title[lang]) + (f"\n[dim]{escape(needs)}[/]" if needs else "")
            for i, key in enumerate(track.exercises):
                row = summary.get(key, {})
                status = f"[green]{t('solved', lang)}[/]" if row.get("solved") else t("todo", lang)
                table.add_row(name if i == 0 else "", escape(key), status, str(row.get("attempts", 0)),
                              str(row.get("hints", 0)), "✓" if row.get("revealed") else "")
        out.print(table)
    out.print(f"[dim]{escape(str(s.path))}[/]")
