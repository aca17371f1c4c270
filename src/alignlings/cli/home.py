"""`alignlings` with no command: a welcome on first run, then progress and the next exercise."""

from __future__ import annotations

import typer

from alignlings.cli.common import (LangOption, PackOption, console, load, pack_args,
                                   resolve_lang, session, set_global_options, summaries, t)


def home(ctx: typer.Context, lang: LangOption = None, pack: PackOption = None) -> None:
    """Practise DPO, GRPO and reward models by filling blanks, graded against a verified reference library.

    Run without a command to see your progress and the next exercise.
    """
    set_global_options(lang=lang, pack=pack)  # `alignlings --lang zh list`: commands read them
    if ctx.invoked_subcommand is not None:
        return
    from rich.markup import escape

    lang = resolve_lang(lang)
    p, out = load(pack), console()
    practice = session(p)
    s = practice.store
    if practice.welcome():
        out.print(f"[bold]{t('welcome', lang)}[/]\n")
    summary = summaries(p, s)
    for part in p.packs:
        done = sum(1 for ex in p if ex.pack == part.id and summary[ex.key].get("solved"))
        out.print(f"{escape(part.title[lang])}: {done}/{sum(1 for ex in p if ex.pack == part.id)}")
    nxt = practice.summary().next_exercise(p)  # the session's rule (one place)
    if nxt is None:
        out.print(t("all_done", lang))
    else:
        key = nxt.kind_spec.cli_next  # "start it", "answer it with the quiz", "predict it"
        out.print(escape(t(key, lang, id=nxt.key, title=nxt.title[lang], pack=pack_args(pack))))
    from alignlings.cli.review import review_line

    line = review_line(p, s, lang)
    if line:
        out.print(escape(line))
    out.print("\n[dim]alignlings --help[/]")
