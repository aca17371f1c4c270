"""`alignlings quiz`: the concept quiz, one question at a time, with an explanation for every option."""

from __future__ import annotations

from typing import Annotated

import typer

from alignlings import i18n
from alignlings.cli.common import LangOption, PackOption, console, get_exercise, load, resolve_lang, store

MSG = i18n.table("cli.quiz")  # strings: locales/{en,zh}.toml [cli.quiz]
LETTERS = "ABCDEFGH"


def quiz_exercise(pack):
    for ex in pack:
        if ex.kind == "quiz":
            return ex
    raise typer.BadParameter("this pack has no quiz", param_hint="--pack")


def quiz(
    exercise_id: Annotated[str | None, typer.Argument(metavar="[ID]", help="Quiz id (default: the pack's quiz).")] = None,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Answer the concept questions; after each answer every option is explained."""
    from rich.markup import escape

    lang = resolve_lang(lang)
    p = load(pack)
    ex = get_exercise(p, exercise_id) if exercise_id else quiz_exercise(p)
    out, s = console(), store()
    right = 0
    for number, q in enumerate(ex.quiz, start=1):
        last = LETTERS[len(q.options) - 1]
        out.print(f"\n[bold]{number}. {escape(q.question[lang])}[/]")
        for i, option in enumerate(q.options):
            out.print(f"  {LETTERS[i]}) {escape(option.text[lang])}")
        while True:
            answer = typer.prompt(MSG["prompt"][lang].format(last=last)).strip().upper()
            if len(answer) == 1 and answer in LETTERS[: len(q.options)]:
                break
            out.print(MSG["bad"][lang].format(last=last))
        choice = LETTERS.index(answer)
        correct = choice == q.answer
        right += correct
        s.record_quiz_answer(q.id, choice, correct, pack=ex.pack)
        out.print(f"[green]{MSG['right'][lang]}[/]" if correct
                  else f"[red]{MSG['wrong'][lang].format(letter=LETTERS[q.answer])}[/]")
        for i, option in enumerate(q.options):
            mark = "[green]✓[/]" if i == q.answer else "[red]✗[/]"
            out.print(f"  {mark} {LETTERS[i]}) {escape(option.why[lang])}")
    total = len(ex.quiz)
    out.print(f"\n[bold]{MSG['score'][lang].format(right=right, total=total)}[/]")
    from alignlings.practice.service import record_quiz_round

    record_quiz_round(s, ex, right, total, source="quiz")
