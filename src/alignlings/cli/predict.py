"""`alignlings predict [ID]`: commit to what a small run will show, then run it and see."""

from __future__ import annotations

from typing import Annotated

import typer

from alignlings import i18n
from alignlings.cli.common import LangOption, PackOption, console, load, resolve_lang, saved, session, usage
from alignlings.cli.show import latex_to_text, markdown

MSG = i18n.table("cli.predict")  # strings: locales/{en,zh}.toml [cli.predict]
LETTERS = "ABCDEFGH"


def m(key: str, lang: str, **kw) -> str:
    return MSG[key][lang].format(**kw)


def predict(
    exercise_id: Annotated[str | None, typer.Argument(
        metavar="[ID]", help="Predict item id (default: the first one not solved yet).")] = None,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Answer a predict item: choose what you expect a small run to show, then see the run and why.

    The run is cached; its time limit is ALIGNLINGS_PREDICT_TIMEOUT seconds (default 120)."""
    from rich.markup import escape

    lang = resolve_lang(lang)
    p, out = load(pack), console()
    practice = session(p)
    items = practice.predict_exercises()
    if not items:
        out.print(m("none", lang))
        raise typer.Exit(1)
    with usage():
        if exercise_id:
            ex = practice.predict_exercise(exercise_id)
        else:
            solved = practice.summary().exercises
            ex = next((e for e in items if not solved[e.key].solved), items[0])
    out.print(f"[bold]{escape(ex.title[lang])}[/] [dim]({escape(ex.key)})[/]")
    out.print(markdown(ex.texts(lang).statement.strip()))
    for number, ask in enumerate(practice.predict_questions(ex, lang=lang), start=1):
        last = LETTERS[len(ask.options) - 1]
        out.print(f"\n[bold]{number}. {escape(latex_to_text(ask.question))}[/]")
        for i, option in enumerate(ask.options):
            out.print(f"  {LETTERS[i]}) {escape(latex_to_text(option))}")
        while True:
            answer = typer.prompt(m("prompt", lang, last=last)).strip().upper()
            if len(answer) == 1 and answer in LETTERS[: len(ask.options)]:
                break
            out.print(m("bad", lang, last=last))
        with out.status(m("running", lang, letter=answer)):
            with usage():
                result = practice.predict_answer(ex, ask.question_id, LETTERS.index(answer), lang=lang)
        show(out, result, lang)
        saved(out, result, lang)


def show(out, result, lang: str) -> None:
    """The result of a committed prediction: right or not, the run, the chart as text, then why."""
    from rich.markup import escape

    out.print(f"[green]{m('right', lang)}[/]" if result.correct
              else f"[red]{m('wrong', lang, letter=LETTERS[result.answer])}[/]")
    if result.run_error:
        out.print(f"[red]{escape(m('run_failed', lang, error=result.run_error))}[/]")
    else:
        out.print(f"\n[bold]{m('result', lang)}[/]{' [dim]' + m('cached', lang) + '[/]' if result.cached else ''}")
        out.print(escape(latex_to_text(result.result_text or "")))
        if result.chart:
            out.print(chart_table(result.chart, lang))
    out.print(f"\n[bold]{m('options', lang)}[/]")
    for i, option in enumerate(result.options):
        mark = "[green]✓[/]" if option.correct else ("[red]✗[/]" if i == result.choice else " ")
        out.print(f"  {mark} {LETTERS[i]}) {escape(latex_to_text(option.text))}")
        out.print(f"       [dim]{escape(latex_to_text(option.why))}[/]")
    out.print(f"\n[bold]{m('explanation', lang)}[/]")
    out.print(markdown(result.explanation.strip()))


def chart_table(chart: dict, lang: str):
    """The chart's series as a compact table: a sparkline, first, last, min and max per series."""
    from rich.markup import escape
    from rich.table import Table

    from alignlings.content.predictions import sparkline

    table = Table(title=escape(m("chart", lang, y=chart["y"], x=chart["x"])), title_justify="left")
    for col in ("series", "shape", "first", "last", "min", "max"):
        table.add_column(m("col_" + col, lang))
    for s in chart["series"]:
        pts = s["points"]
        table.add_row(escape(s["label"]), sparkline(pts), f"{pts[0]:.4g}", f"{pts[-1]:.4g}", f"{min(pts):.4g}",
                      f"{max(pts):.4g}")
    return table
