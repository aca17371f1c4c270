"""`alignlings quiz`: the concept quiz, one question at a time, with an explanation for every option."""

from __future__ import annotations

from typing import Annotated

import typer

from alignlings import i18n
from alignlings.cli.common import (LangOption, PackOption, UsageError, console, get_exercise, load, resolve_lang,
                                   saved, session)

MSG = i18n.table("cli.quiz")  # strings: locales/{en,zh}.toml [cli.quiz]
LETTERS = "ABCDEFGH"


def quiz_exercise(pack):
    for ex in pack:
        if ex.kind_spec.on_quiz_page:  # the concept quiz
            return ex
    raise UsageError("no_quiz", "--pack")


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
    if not ex.kind_spec.answered_by_choice:
        raise UsageError("not_quiz", "ID", lang=lang, id=ex.key)
    out, practice = console(), session(p)
    practice.quiz_start(ex)  # a round: every question once; the last answer closes it
    result = None
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
        result = practice.quiz_answer(ex, q, LETTERS.index(answer), lang=lang)
        out.print(f"[green]{MSG['right'][lang]}[/]" if result.correct
                  else f"[red]{MSG['wrong'][lang].format(letter=LETTERS[result.answer])}[/]")
        for i, option in enumerate(result.options):
            mark = "[green]✓[/]" if option.correct else "[red]✗[/]"
            out.print(f"  {mark} {LETTERS[i]}) {escape(option.why)}")
    if result is not None:
        out.print(f"\n[bold]{MSG['score'][lang].format(right=result.progress['right'], total=result.progress['total'])}[/]")
        saved(out, result, lang)
