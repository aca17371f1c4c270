"""`alignlings start ID`: write the exercise's template into your workspace folder."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from alignlings import i18n
from alignlings.cli.common import (ExerciseId, LangOption, LevelOption, PackOption, console, level_file, open_exercise,
                                   pack_args, session, usage)

MSG = i18n.table("cli.start")  # strings: locales/{en,zh}.toml [cli.start]


def backup(path) -> str:
    """Copy a learner's file aside before it is replaced; returns the backup's path."""
    target = path.with_name(f"{path.name}.{time.strftime('%Y%m%d-%H%M%S')}.bak")
    target.write_bytes(path.read_bytes())
    return str(target)


def start(
    exercise_id: ExerciseId,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file (after backing it up).")] = False,
    level: LevelOption = None,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Write the template into the workspace (./alignlings-workspace or $ALIGNLINGS_WORKSPACE); with
    --level 4 or 5, the fill-in exercise's level file (ID_level4.py, ID_level5.py) beside it."""
    from rich.markup import escape

    from alignlings.cli.kinds import view_of

    lang, course, ex = open_exercise(exercise_id, lang, pack, code_only=True)
    with usage():
        started = session(course).start(ex, level, lang=lang)
    path = level_file(ex.key, level)
    out = console()
    if path.exists():
        if not force:
            out.print(MSG["exists"][lang].format(path=path))
            raise typer.Exit(1)
        out.print(MSG["backup"][lang].format(path=backup(path)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(started.text, encoding="utf-8")
    wrote = view_of(ex).wrote if level is None else f"wrote_level{level}"
    out.print(escape(MSG[wrote][lang].format(path=path, id=ex.key, pack=pack_args(pack))))
