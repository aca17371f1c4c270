"""`alignlings reset ID`: start an exercise over (history is kept; your file is backed up first)."""

from __future__ import annotations



from alignlings import i18n
from alignlings.cli.common import ExerciseId, LangOption, PackOption, console, exercise_file, open_exercise, saved, session

MSG = i18n.table("cli.reset")  # strings: locales/{en,zh}.toml [cli.reset]


def reset(
    exercise_id: ExerciseId,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Reset an exercise's progress and give you a fresh template (the old file is backed up)."""
    from alignlings.cli.start import backup
    from alignlings.grading.grader import template_for

    lang, course, ex = open_exercise(exercise_id, lang, pack)
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
