"""`alignlings list`: the exercises grouped by pack and track, with your progress."""

from __future__ import annotations

from alignlings.cli.common import LangOption, PackOption, console, load, resolve_lang, store, summaries, t


def requires_text(pack, track, lang: str) -> str:
    """'needs: DPO/GRPO fill-in' for a track with prerequisites ('' without)."""
    if not track.requires:
        return ""
    names = [pack.track(r).title[lang] for r in track.requires]
    return t("requires", lang, tracks=t("requires_sep", lang).join(names))


def track_heading(pack, part, track, lang: str) -> list:
    """A track's title (bold) and what it comes after (dim), as lines that fit the terminal."""
    from rich.text import Text

    from alignlings.cli.layout import wrap_cells

    width = console().width
    title = track.title[lang] if not track.implicit or len(part.tracks) > 1 else part.title[lang]
    lines = [Text(line, style="bold") for line in wrap_cells(title, width)]
    needs = requires_text(pack, track, lang)
    return lines + [Text(line, style="dim") for line in wrap_cells(needs, width)] if needs else lines


def pack_heading(part, lang: str, suffix: str = "") -> list:
    """The pack's title and id (bold) as lines that fit the terminal, without trailing spaces."""
    from rich.text import Text

    from alignlings.cli.layout import wrap_cells

    return [Text(line, style="bold") for line in wrap_cells(f"{part.title[lang]} ({part.id}){suffix}", console().width)]


def solved_mark(row: dict) -> tuple[str, str]:
    return ("✓", "green") if row.get("solved") else ("", "")


def legend(lang: str) -> str:
    return t("legend", lang, mark="✓")


def list_exercises(lang: LangOption = None, pack: PackOption = None) -> None:
    """List the exercises by pack and track, with their level and your progress."""

    from alignlings.cli.layout import Column, grid, paragraph

    lang = resolve_lang(lang)
    p = load(pack)
    summary = summaries(p, store())
    out = console()
    for n, part in enumerate(p.packs):
        if n:
            out.print()
        for line in pack_heading(part, lang):
            out.print(line)
        for track in (tr for tr in p.tracks if tr.pack == part.id):
            out.print()
            for line in track_heading(p, part, track, lang):
                out.print(line)
            columns = [Column(""), Column(t("exercise", lang)), Column(t("kind", lang)),
                       Column(t("level", lang), right=True), Column(t("reached_short", lang), right=True),
                       Column(t("title", lang))]
            rows = []
            for key in track.exercises:
                ex, row = p.exercises[key], summary.get(key, {})
                reached = row.get("highest_level")
                rows.append([solved_mark(row), (key, "bold"), (ex.kind_spec.label[lang], ""),
                             (str(ex.level), ""), ("" if reached is None else str(reached), "cyan"),
                             (ex.title[lang], "")])
            for line in grid(columns, rows, out.width):
                out.print(line)
    out.print()
    paragraph(out, t("legend_levels", lang), style="dim")
    paragraph(out, legend(lang), style="dim")
