"""`alignlings` with no command: a welcome on first run, then progress and the next exercise."""

from __future__ import annotations

import typer

from alignlings.cli.common import (LangOption, PackOption, console, load, next_text, resolve_lang, session,
                                   set_global_options, summaries, t)


def home(ctx: typer.Context, lang: LangOption = None, pack: PackOption = None) -> None:
    """Practise DPO, GRPO and reward models by filling blanks, graded against a verified reference library.

    Run without a command to see your progress and the next exercise.
    """
    set_global_options(lang=lang, pack=pack)  # `alignlings --lang zh list`: commands read them
    if ctx.invoked_subcommand is not None:
        return
    lang = resolve_lang(lang)
    p, out = load(pack), console()
    practice = session(p)
    s = practice.store
    from alignlings.cli.layout import paragraph

    if practice.welcome():
        paragraph(out, t("welcome", lang), "bold")
        out.print()
    summary = summaries(p, s)
    for part in p.packs:
        done = sum(1 for ex in p if ex.pack == part.id and summary[ex.key].get("solved"))
        paragraph(out, f"{part.title[lang]}: {done}/{sum(1 for ex in p if ex.pack == part.id)}")
    paragraph(out, next_text(practice.next_exercise(), lang, pack))  # "start it", "answer the quiz", "predict it"
    from alignlings.cli.review import review_line

    line = review_line(p, s, lang)
    if line:
        paragraph(out, line)
    out.print()
    paragraph(out, t("more_commands", lang), "dim")
