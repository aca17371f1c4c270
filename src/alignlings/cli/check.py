"""`alignlings check ID [FILE]`: grade your file in a sandbox; exit 0 when it passes, 1 when not, 2 on usage errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from alignlings.cli.common import (ExerciseId, LangOption, LevelOption, PackOption, UsageError, console, exercise_file,
                                   level_file, next_text, open_exercise, pack_args, saved, store, usage)


def read_submission(exercise_id: str, file: Path | None, pack_hint: str = "", level: int | None = None
                    ) -> tuple[Path, str]:
    path = file or (exercise_file(exercise_id) if level is None else level_file(exercise_id, level))
    if not path.is_file():
        if file:
            raise UsageError("file_missing", "FILE", path=path)
        more = pack_hint if level is None else f" --level {level}{pack_hint}"
        raise UsageError("file_missing_start", "FILE", path=path, id=exercise_id, pack=more)
    try:
        return path, path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError("not_utf8", "FILE", path=path) from None


def grade_and_record(grader, exercise_id: str, code: str, lang: str, source: str = "cli",
                     level: int | None = None) -> Any:
    """Grade a file and record it through the learner's session (a store that cannot be written never
    hides the verdict)."""
    from alignlings.practice.session import Practice

    practice = Practice(store(), grader.pack, grader, source=source)
    with usage():
        return practice.check(grader.pack.get(exercise_id), code=code, lang=lang, level=level).verdict


def check(
    exercise_id: ExerciseId,
    file: Annotated[Path | None, typer.Argument(metavar="[FILE]", help="Your file (default: the workspace file).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON verdict object.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Say in full how the sandbox isolated the run.")] = False,
    level: LevelOption = None,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Grade your file: per-blank verdicts, visible, hidden and edge cases, run in a sandbox. With
    --level 4 or 5 (or a file whose header states its level) the whole file is graded at that level."""
    from alignlings.cli.report import render_verdict
    from alignlings.grading.grader import Grader

    lang, p, ex = open_exercise(exercise_id, lang, pack, code_only=True)
    _, code = read_submission(ex.key, file, pack_args(pack), level)
    from alignlings.practice.session import Practice

    with Grader(p) as grader, usage():
        practice = Practice(store(), p, grader, source="cli")
        checked = practice.check(ex, code=code, lang=lang, level=level)
    verdict: Any = checked.verdict
    if as_json:
        typer.echo(json.dumps(verdict, ensure_ascii=False))
    else:
        out = console()
        render_verdict(verdict, lang, out, verbose=verbose)
        saved(out, checked, lang)
        if verdict["passed"]:  # what comes next, as rustlings says it
            from alignlings.cli.layout import paragraph

            paragraph(out, next_text(practice.next_exercise(ex), lang, pack))
        from alignlings.grading.sandbox import is_isolated

        isolation = verdict.get("isolation") or ""  # "none (quiz)": no code ran
        if isolation.startswith(("rlimits", "namespaces")) and not is_isolated(isolation):  # or no task limit
            from alignlings import i18n

            why = i18n.reword("practice.isolation", verdict["isolation"], lang)
            typer.echo(i18n.t("cli.watch.unisolated", lang, why=why), err=True)
    raise typer.Exit(0 if verdict["passed"] else 1)
