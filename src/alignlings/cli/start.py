"""`alignlings start ID`: write the exercise's template into your workspace folder."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from alignlings.cli.app import app
from alignlings.cli.common import (LangOption, PackOption, console, exercise_file, get_exercise, load, pack_args,
                                   resolve_lang)

MSG = {
    "exists": {"en": "{path} already exists: your work is kept. Use --force to start over (the old file is backed up).",
               "zh": "{path} 已存在：你的代码会被保留。用 --force 重新开始（旧文件会先备份）。"},
    "backup": {"en": "backed up your previous file to {path}", "zh": "已把之前的文件备份到 {path}"},
    "wrote": {"en": "wrote {path}. Fill the _____ blanks, then run `alignlings check {id}{pack}` "
                    "(or `alignlings watch {id}{pack}`).",
              "zh": "已写入 {path}。填好 _____ 空，然后运行 `alignlings check {id}{pack}`"
                    "（或 `alignlings watch {id}{pack}`）。"},
    "wrote_bug": {"en": "wrote {path}: complete code with one real bug. Fix it, then run `alignlings check {id}{pack}` "
                        "(or `alignlings watch {id}{pack}`).",
                  "zh": "已写入 {path}：完整的代码，里面有一个真实的 bug。修好它，然后运行 `alignlings check {id}{pack}`"
                        "（或 `alignlings watch {id}{pack}`）。"},
}


def backup(path) -> str:
    """Copy a learner's file aside before it is replaced; returns the backup's path."""
    target = path.with_name(f"{path.name}.{time.strftime('%Y%m%d-%H%M%S')}.bak")
    target.write_bytes(path.read_bytes())
    return str(target)


@app.command()
def start(
    exercise_id: Annotated[str, typer.Argument(metavar="ID", help="Exercise id, e.g. dpo-loss.")],
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file (after backing it up).")] = False,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Write the template into the workspace (./alignlings-workspace or $ALIGNLINGS_WORKSPACE)."""
    from rich.markup import escape

    from alignlings.practice.grader import template_for

    lang = resolve_lang(lang)
    ex = get_exercise(load(pack), exercise_id, code_only=True)
    path = exercise_file(ex.key)
    out = console()
    if path.exists():
        if not force:
            out.print(MSG["exists"][lang].format(path=path))
            raise typer.Exit(1)
        out.print(MSG["backup"][lang].format(path=backup(path)))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(template_for(ex, lang), encoding="utf-8")
    out.print(escape(MSG["wrote_bug" if ex.is_bug else "wrote"][lang].format(path=path, id=ex.key, pack=pack_args(pack))))
