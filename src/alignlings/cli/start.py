"""`alignlings start ID`: write the exercise's template into your workspace folder."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from alignlings import i18n
from alignlings.cli.common import ExerciseId, LangOption, PackOption, console, exercise_file, open_exercise, pack_args

MSG = i18n.table("cli.start")  # strings: locales/{en,zh}.toml [cli.start]


def backup(path) -> str:
    """Copy a learner's file aside before it is replaced; returns the backup's path."""
    target = path.with_name(f"{path.name}.{time.strftime('%Y%m%d-%H%M%S')}.bak")
    target.write_bytes(path.read_bytes())
    return str(target)


def start(
    exercise_id: ExerciseId,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file (after backing it up).")] = False,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Write the template into the workspace (./alignlings-workspace or $ALIGNLINGS_WORKSPACE)."""
    from rich.markup import escape

    from alignlings.practice.grader import template_for

    lang, _, ex = open_exercise(exercise_id, lang, pack, code_only=True)
    path = exercise_file(ex.key)
    out = console()
    if path.exists():
        if not force:
            out.print(MSG["exists"][lang].format(path=path))
            raise typer.Exit(1)
        out.print(MSG["backup"][lang].format(path=backup(path)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(template_for(ex, lang), encoding="utf-8")
    out.print(escape(MSG[ex.kind_spec.cli_wrote][lang].format(path=path, id=ex.key, pack=pack_args(pack))))
