"""`alignlings cloze SNIPPET`: the MLM drill: random tokens of a reference snippet are masked; fill them in."""

from __future__ import annotations

from typing import Annotated

import typer
from typer.core import TyperCommand

from alignlings import i18n
from alignlings.cli.common import LangOption, PackOption, console, get_exercise, load, resolve_lang, saved, session, usage

MSG = i18n.table("cli.cloze")  # strings: locales/{en,zh}.toml [cli.cloze]


class ClozeCommand(TyperCommand):
    """`alignlings cloze --help` ends with the snippets of the loaded pack (read when help is asked)."""

    def format_help(self, ctx, formatter) -> None:
        from alignlings.cli.layout import wrap_cells

        try:
            course = load(None)
            lang = resolve_lang(None)
            ids = ", ".join(ex.key for ex in course if ex.cloze)
            text = MSG["snippets"][lang].format(ids=ids) if ids else MSG["no_snippets"][lang]
            # "\b": click keeps these lines as they are (its own wrapping would cut ids at their hyphens)
            self.epilog = "\b\n" + "\n".join(wrap_cells(text, max(console().width - 4, 40)))
        except typer.BadParameter:  # a pack that does not load: the command itself will say why
            self.epilog = None
        super().format_help(ctx, formatter)


def cloze(
    snippet: Annotated[str | None, typer.Argument(
        metavar="[SNIPPET]", help="Exercise id of a snippet (listed below); default: the next one to drill.",
        show_default=False)] = None,
    ratio: Annotated[float, typer.Option("--ratio", help="Fraction of maskable positions to mask, in (0, 1].")] = 0.15,
    seed: Annotated[int | None, typer.Option("--seed", help="Replay a draw exactly.")] = None,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Fill randomly masked identifiers, numbers and operators; mistakes come back more often.

    On an exercise you have not solved, the drill shows its solution: that counts as seen."""
    from rich.markup import escape
    from rich.syntax import Syntax

    from alignlings.practice import cloze as cz

    lang = resolve_lang(lang)
    course = load(pack)
    with session(course, graded=True) as practice:
        ex = get_exercise(course, snippet) if snippet is not None else practice.next_cloze()
        if ex is None:
            raise typer.BadParameter(MSG["no_snippets"][lang], param_hint="SNIPPET")
        if not ex.cloze:
            ids = ", ".join(e.key for e in course if e.cloze)
            raise typer.BadParameter(MSG["none"][lang].format(id=snippet, ids=ids), param_hint="SNIPPET")
        with usage():
            drawn = practice.cloze_draw(ex, lang=lang, ratio=ratio, seed=seed)
        out = console()
        if drawn.revealed_now:
            out.print(f"[yellow]{escape(MSG['seen'][lang])}[/]")
        out.print(drawn.counter)
        numbered = {m.key: f"[{i}]" for i, m in enumerate(drawn.masked, start=1)}
        # long lines wrap at the terminal's width (indented continuation) instead of being cut off
        out.print(Syntax(cz.render(drawn.source, drawn.masked, numbered), "python", word_wrap=True))
        answers = {}
        for i, m in enumerate(drawn.masked, start=1):
            answers[m.key] = typer.prompt(MSG["prompt"][lang].format(n=i), default="", show_default=False).strip()
        with usage():
            checked = practice.cloze_check(ex, [m.key for m in drawn.masked], answers, lang=lang)
    for i, r in enumerate(checked.results, start=1):
        mark = "[green]✓[/]" if r["correct"] else "[red]✗[/]"
        out.print(f"{mark} [{i}] {escape(r['answer'] or '')}  {escape(MSG[r['how']][lang].format(token=r['token']))}")
    out.print(f"[bold]{MSG['score'][lang].format(right=checked.right, total=checked.total)}[/]")
    saved(out, checked, lang)


cloze.command_cls = ClozeCommand  # type: ignore[attr-defined]
