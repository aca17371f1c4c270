"""Shared CLI plumbing: the pack, the language, the workspace, the progress store, the console.

Nothing here imports torch: commands that grade or train import it in their own bodies.
"""

from __future__ import annotations

import contextlib
import contextvars
import locale
import os
from pathlib import Path
from typing import Annotated

import typer

from alignlings import i18n

LangOption = Annotated[
    str | None, typer.Option("--lang", help="Language of texts: en or zh (default: $ALIGNLINGS_LANG, else the locale).",
                             show_default=False)
]
PackOption = Annotated[
    list[Path] | None, typer.Option(
        "--pack", help="Load exercises from this pack folder (repeatable: a course of several packs; a built-in "
                       "pack by name, e.g. dpo-grpo). Default: $ALIGNLINGS_PACK (folders separated by "
                       f"'{os.pathsep}'), else the built-in pack.", show_default=False)
]


# Global options given before the command (``alignlings --lang zh list``): the root callback sets
# them on every invocation; a command's own option wins over them.
_GLOBAL: contextvars.ContextVar[dict] = contextvars.ContextVar("alignlings_global_options", default={})


def set_global_options(**options) -> None:
    _GLOBAL.set({k: v for k, v in options.items() if v})


def _root_option(name: str):
    return _GLOBAL.get().get(name)


def given_packs(pack) -> list[Path]:
    """The pack folders named on the command line, after the command or before it."""
    if isinstance(pack, Path):
        pack = [pack]
    return list(pack or _root_option("pack") or [])


def pack_args(pack) -> str:
    """The ``--pack`` options to repeat in a message, e.g. `` --pack ../ipo`` ('' for the default)."""
    import shlex

    return "".join(f" --pack {shlex.quote(str(p))}" for p in given_packs(pack))


def resolve_lang(lang: str | None) -> str:
    if lang is None:
        lang = _root_option("lang")
    if lang is not None:
        if lang not in ("en", "zh"):
            raise typer.BadParameter(f"expected 'en' or 'zh', got {lang!r}", param_hint="--lang")
        return lang
    for var in ("ALIGNLINGS_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(var)
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    try:
        loc = locale.getlocale()[0] or ""
    except ValueError:
        loc = ""
    return "zh" if loc.lower().startswith("zh") else "en"


def load(pack):
    """The pack or course: --pack (after or before the command), else $ALIGNLINGS_PACK, else built-in."""
    from alignlings.practice.pack import PackError, default_pack_paths, load_pack

    paths = given_packs(pack) or default_pack_paths()
    try:
        return load_pack(paths)
    except PackError as exc:
        raise typer.BadParameter(str(exc), param_hint="--pack") from None


def get_exercise(pack, exercise_id: str, *, code_only: bool = False):
    from alignlings.practice.pack import PackError

    try:
        ex = pack.get(exercise_id)
    except PackError as exc:
        raise typer.BadParameter(str(exc).removeprefix("exercise: "), param_hint="ID") from None
    if code_only and not ex.is_code:
        raise typer.BadParameter(f"{exercise_id!r} is the quiz: run `alignlings quiz`", param_hint="ID")
    return ex


def workspace() -> Path:
    return Path(os.environ.get("ALIGNLINGS_WORKSPACE") or "alignlings-workspace")


def exercise_file(exercise_id: str) -> Path:
    """The learner's file for an exercise key: ``dpo_loss.py``, or ``ipo/dpo_loss.py`` for ``ipo/dpo-loss``."""
    return workspace() / f"{exercise_id.replace('-', '_')}.py"


def store():
    from alignlings.practice.store import ProgressStore

    return ProgressStore()


def session(course, *, graded: bool = False):
    """The learner's practice session on ``course`` (``alignlings.practice.session.Practice``): every
    command goes through it. ``graded``: a grader is started on first use (closed with the session)."""
    from alignlings.practice.session import Practice

    def make_grader():
        from alignlings.practice.grader import Grader

        return Grader(course)

    return Practice(store(), course, make_grader if graded else None, source="cli")


_PARAM_HINTS = {"blank": "--blank", "ratio": "--ratio", "limit": "--limit", "data": "--import"}


@contextlib.contextmanager
def usage():
    """The session's UsageError as a usage error naming the option or argument (exit code 2)."""
    from alignlings.practice.session import UsageError

    try:
        yield
    except UsageError as exc:
        raise typer.BadParameter(exc.message, param_hint=_PARAM_HINTS.get(exc.argument, exc.argument)) from None


def saved(out, result, lang: str) -> None:
    """A dim line when what the learner did could not be recorded (the result itself was shown)."""
    if not getattr(result, "recorded", True):
        out.print(f"[dim]{t('not_saved', lang)}[/]")


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


T = i18n.table("cli.common")  # strings: locales/{en,zh}.toml [cli.common]


def t(key: str, lang: str, **kw) -> str:
    return T[key][lang].format(**kw)


def summaries(pack, s) -> dict[str, dict]:
    """Exercise key -> its progress row (the session's summary, as plain dicts)."""
    from alignlings.practice.session import Practice

    return {key: row.as_dict() for key, row in Practice(s, pack).summary().exercises.items()}


def next_exercise(pack, summary: dict):
    """The first unsolved exercise, in track order; ``summary`` is keyed like :func:`summaries`."""
    for track in pack.tracks:
        for key in track.exercises:
            if not summary.get(key, {}).get("solved"):
                return pack.exercises[key]
    return None
