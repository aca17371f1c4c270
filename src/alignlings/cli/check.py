"""`alignlings check ID [FILE]`: grade your file in a sandbox; exit 0 when it passes, 1 when not, 2 on usage errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from alignlings.cli.common import (LangOption, PackOption, console, exercise_file, get_exercise, load,
                                   pack_args, resolve_lang, store)


def read_submission(exercise_id: str, file: Path | None, pack_hint: str = "") -> tuple[Path, str]:
    path = file or exercise_file(exercise_id)
    if not path.is_file():
        hint = "" if file else f" (run `alignlings start {exercise_id}{pack_hint}` first)"
        raise typer.BadParameter(f"{path} does not exist{hint}", param_hint="FILE")
    try:
        return path, path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise typer.BadParameter(f"{path} is not UTF-8 text", param_hint="FILE") from None


def grade_and_record(grader, exercise_id: str, code: str, lang: str, source: str = "cli") -> dict:
    """The service's grade-and-record for a file (a store that cannot be written never hides the verdict)."""
    from alignlings.practice.service import grade_and_record as grade

    return grade(grader, store(), grader.pack.get(exercise_id), code=code, lang=lang, source=source)[0]


def check(
    exercise_id: Annotated[str, typer.Argument(metavar="ID", help="Exercise id, e.g. dpo-loss.")],
    file: Annotated[Path | None, typer.Argument(metavar="[FILE]", help="Your file (default: the workspace file).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON verdict object.")] = False,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Grade your file: per-blank verdicts, visible, hidden and edge cases, run in a sandbox."""
    from alignlings.cli.report import render_verdict
    from alignlings.practice.grader import Grader

    lang = resolve_lang(lang)
    p = load(pack)
    ex = get_exercise(p, exercise_id, code_only=True)
    _, code = read_submission(ex.key, file, pack_args(pack))
    with Grader(p) as grader:
        verdict = grade_and_record(grader, ex.key, code, lang)
    if as_json:
        typer.echo(json.dumps(verdict, ensure_ascii=False))
    else:
        render_verdict(verdict, lang, console())
        if (verdict.get("isolation") or "").startswith("rlimits"):  # no namespaces on this machine
            from alignlings import i18n

            typer.echo(i18n.t("cli.watch.unisolated", lang, why=verdict["isolation"]), err=True)
    raise typer.Exit(0 if verdict["passed"] else 1)
