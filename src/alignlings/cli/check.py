"""`alignlings check ID [FILE]`: grade your file in a sandbox; exit 0 when it passes, 1 when not, 2 on usage errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from alignlings.cli.common import (ExerciseId, LangOption, PackOption, UsageError, console, exercise_file, open_exercise, usage,
                                   pack_args, saved, store)


def read_submission(exercise_id: str, file: Path | None, pack_hint: str = "") -> tuple[Path, str]:
    path = file or exercise_file(exercise_id)
    if not path.is_file():
        if file:
            raise UsageError("file_missing", "FILE", path=path)
        raise UsageError("file_missing_start", "FILE", path=path, id=exercise_id, pack=pack_hint)
    try:
        return path, path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError("not_utf8", "FILE", path=path) from None


def grade_and_record(grader, exercise_id: str, code: str, lang: str, source: str = "cli") -> Any:
    """Grade a file and record it through the learner's session (a store that cannot be written never
    hides the verdict)."""
    from alignlings.practice.session import Practice

    practice = Practice(store(), grader.pack, grader, source=source)
    return practice.check(grader.pack.get(exercise_id), code=code, lang=lang).verdict


def check(
    exercise_id: ExerciseId,
    file: Annotated[Path | None, typer.Argument(metavar="[FILE]", help="Your file (default: the workspace file).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON verdict object.")] = False,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Grade your file: per-blank verdicts, visible, hidden and edge cases, run in a sandbox."""
    from alignlings.cli.report import render_verdict
    from alignlings.practice.grader import Grader

    lang, p, ex = open_exercise(exercise_id, lang, pack, code_only=True)
    _, code = read_submission(ex.key, file, pack_args(pack))
    from alignlings.practice.session import Practice

    with Grader(p) as grader, usage():  # a locked track: the session's refusal, as a usage error
        checked = Practice(store(), p, grader, source="cli").check(ex, code=code, lang=lang)
    verdict: Any = checked.verdict
    if as_json:
        typer.echo(json.dumps(verdict, ensure_ascii=False))
    else:
        out = console()
        render_verdict(verdict, lang, out)
        saved(out, checked, lang)
        from alignlings.practice.sandbox import is_isolated

        isolation = verdict.get("isolation") or ""  # "none (quiz)": no code ran
        if isolation.startswith(("rlimits", "namespaces")) and not is_isolated(isolation):  # or no task limit
            from alignlings import i18n

            why = i18n.reword("practice.isolation", verdict["isolation"], lang)
            typer.echo(i18n.t("cli.watch.unisolated", lang, why=why), err=True)
    raise typer.Exit(0 if verdict["passed"] else 1)
