"""`alignlings reset ID`: start an exercise over (history is kept; your file is backed up first)."""

from __future__ import annotations

from typing import Annotated

import typer

from alignlings import i18n
from alignlings.cli.common import (
    LangOption,
    PackOption,
    console,
    exercise_file,
    get_exercise,
    load,
    resolve_lang,
    saved,
    session,
)

MSG = i18n.table("cli.reset")  # strings: locales/{en,zh}.toml [cli.reset]


def reset(
    exercise_id: Annotated[str, typer.Argument(metavar="ID", help="Exercise id, e.g. dpo-loss.")],
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Reset an exercise's progress and give you a fresh template (the old file is backed up)."""
    from alignlings.cli.start import backup
    from alignlings.practice.grader import template_for

    lang = resolve_lang(lang)
    course = load(pack)
    ex = get_exercise(course, exercise_id)
    done = session(course).reset(ex)
    out = console()
    if done.recorded:
        out.print(MSG["done"][lang].format(id=ex.key))
    saved(out, done, lang)
    path = exercise_file(ex.key)
    if ex.kind_spec.graded_as_file and path.exists():
        copy = backup(path)
        path.write_text(template_for(ex, lang), encoding="utf-8")
        out.print(MSG["file"][lang].format(backup=copy))
