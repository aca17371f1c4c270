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
    from rich.cells import cell_len
    from rich.text import Text

    from alignlings.cli.layout import Column, grid
    from alignlings.cli.list import pack_heading, solved_mark, track_heading

    s = practice.store
    summary = summaries(p, s)
    for n, part in enumerate(p.packs):
        if n:
            out.print()
        keys = [ex.key for ex in p if ex.pack == part.id]
        done = sum(1 for k in keys if summary[k].get("solved"))
        for line in pack_heading(part, lang, f": {done}/{len(keys)}"):
            out.print(line)
        for track in (tr for tr in p.tracks if tr.pack == part.id):
            out.print()
            for line in track_heading(p, part, track, lang):
                out.print(line)
            columns = [Column(""), Column(t("exercise", lang)), Column(t("attempts", lang), right=True),
                       Column(t("hints", lang), right=True), Column(t("revealed", lang))]
            rows = []
            for key in track.exercises:
                row = summary.get(key, {})
                rows.append([solved_mark(row), (key, "bold"), (str(row.get("attempts", 0)), ""),
                             (str(row.get("hints", 0)), ""), ("✓" if row.get("revealed") else "", "")])
            for line in grid(columns, rows, out.width, min_last=cell_len(columns[-1].header)):
                out.print(line)
    out.print()
    out.print(Text(t("legend_progress", lang, mark="✓"), style="dim"))
    out.print(f"[dim]{escape(str(s.path))}[/]")
