"""`alignlings list`: the exercises grouped by pack and track, with your progress."""

from __future__ import annotations

from alignlings.cli.common import LangOption, PackOption, console, load, resolve_lang, store, summaries, t


def requires_text(pack, track, lang: str) -> str:
    """'needs: DPO/GRPO fill-in' for a track with prerequisites ('' without)."""
    if not track.requires:
        return ""
    names = [pack.track(r).title[lang] for r in track.requires]
    return t("requires", lang, tracks=", ".join(names))


def list_exercises(lang: LangOption = None, pack: PackOption = None) -> None:
    """List the exercises by pack and track, with their level and your progress."""
    from rich.markup import escape
    from rich.table import Table

    lang = resolve_lang(lang)
    p = load(pack)
    summary = summaries(p, store())
    out = console()
    for part in p.packs:
        out.print(f"[bold]{escape(part.title[lang])}[/] [dim]({escape(part.id)})[/]")
        for track in (tr for tr in p.tracks if tr.pack == part.id):
            title = track.title[lang] if not track.implicit or len(part.tracks) > 1 else part.title[lang]
            needs = requires_text(p, track, lang)
            table = Table(title=escape(title) + (f"\n[dim]{escape(needs)}[/]" if needs else ""), title_justify="left")
            for col in ("exercise", "title", "kind", "level", "status", "reached", "attempts", "hints"):
                table.add_column(t(col, lang))
            for key in track.exercises:
                ex, s = p.exercises[key], summary.get(key, {})
                status = f"[green]{t('solved', lang)}[/]" if s.get("solved") else t("todo", lang)
                reached = s.get("highest_level")
                table.add_row(escape(key), escape(ex.title[lang]), escape(ex.kind_spec.label[lang]), str(ex.level), status,
                              "-" if reached is None else str(reached), str(s.get("attempts", 0)), str(s.get("hints", 0)))
            out.print(table)
