"""`alignlings cloze SNIPPET`: the MLM drill: random tokens of a reference snippet are masked; fill them in."""

from __future__ import annotations

from typing import Annotated

import typer

from alignlings import i18n
from alignlings.cli.common import LangOption, PackOption, console, get_exercise, load, resolve_lang, store

MSG = i18n.table("cli.cloze")  # strings: locales/{en,zh}.toml [cli.cloze]


def cloze(
    snippet: Annotated[str, typer.Argument(metavar="SNIPPET", help="Exercise id of a snippet: dpo-loss, grpo-advantages, grpo-loss.")],
    ratio: Annotated[float, typer.Option("--ratio", help="Fraction of maskable positions to mask, in (0, 1].")] = 0.15,
    seed: Annotated[int | None, typer.Option("--seed", help="Replay a draw exactly.")] = None,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Fill randomly masked identifiers, numbers and operators; mistakes come back more often."""
    from rich.markup import escape
    from rich.syntax import Syntax

    from alignlings.practice import cloze as cz
    from alignlings.practice.grader import Grader

    lang = resolve_lang(lang)
    p = load(pack)
    ex = get_exercise(p, snippet)
    if not ex.cloze:
        ids = ", ".join(e.key for e in p if e.cloze)
        raise typer.BadParameter(MSG["none"][lang].format(id=snippet, ids=ids), param_hint="SNIPPET")
    if not 0 < ratio <= 1:
        raise typer.BadParameter(f"expected a value in (0, 1], got {ratio}", param_hint="--ratio")
    s = store()
    source = cz.snippet_source(ex, lang)
    positions = cz.maskable_positions(source)
    masked = cz.draw(positions, ratio=ratio, seed=seed, stats=s.cloze_stats(ex.id, pack=ex.pack))
    out = console()
    out.print(cz.counter_text(len(positions), len(masked), lang))
    numbered = {m.key: f"[{i}]" for i, m in enumerate(masked, start=1)}
    # long lines wrap at the terminal's width (indented continuation) instead of being cut off
    out.print(Syntax(cz.render(source, masked, numbered), "python", word_wrap=True))
    answers = {}
    for i, m in enumerate(masked, start=1):
        answers[m.key] = typer.prompt(MSG["prompt"][lang].format(n=i), default="", show_default=False).strip()
    with Grader(p) as grader:
        results = cz.check(ex, source, masked, answers, grader)
    s.record_cloze(ex.id, [{"key": r["key"], "token": r["token"], "correct": r["correct"]} for r in results],
                   pack=ex.pack)
    right = sum(r["correct"] for r in results)
    for i, r in enumerate(results, start=1):
        mark = "[green]✓[/]" if r["correct"] else "[red]✗[/]"
        out.print(f"{mark} [{i}] {escape(r['answer'] or '')}  {escape(MSG[r['how']][lang].format(token=r['token']))}")
    out.print(f"[bold]{MSG['score'][lang].format(right=right, total=len(results))}[/]")
