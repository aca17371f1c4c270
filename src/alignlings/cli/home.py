"""`alignlings` with no command: a welcome on first run, then progress and the next exercise."""

from __future__ import annotations

import typer

from alignlings.cli.app import app
from alignlings.cli.common import LangOption, PackOption, console, load, next_exercise, resolve_lang, store, t


@app.callback(invoke_without_command=True)
def home(ctx: typer.Context, lang: LangOption = None, pack: PackOption = None) -> None:
    """Practise DPO, GRPO and reward models by filling blanks, graded against a verified reference library.

    Run without a command to see your progress and the next exercise.
    """
    ctx.ensure_object(dict)
    ctx.obj["lang"], ctx.obj["pack"] = lang, pack
    if ctx.invoked_subcommand is not None:
        return
    lang = resolve_lang(lang)
    p, s, out = load(pack), store(), console()
    if s.is_first_run():
        out.print(f"[bold]{t('welcome', lang)}[/]\n")
        s.mark_welcomed()
    summary = s.summary()
    done = sum(1 for ex in p if summary.get(ex.id, {}).get("solved"))
    out.print(f"{p.title[lang]}: {done}/{len(p.exercises)}")
    nxt = next_exercise(p, summary)
    out.print(t("next", lang, id=nxt.id, title=nxt.title[lang]) if nxt else t("all_done", lang))
    out.print("\n[dim]alignlings --help[/]")
