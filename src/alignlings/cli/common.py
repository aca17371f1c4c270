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
ExerciseId = Annotated[str, typer.Argument(metavar="ID", help="Exercise id, e.g. dpo-loss.")]
LevelOption = Annotated[
    int | None, typer.Option("--level", min=4, max=5, show_default=False,
                             help="Level 4 (write the body) or 5 (from the statement) of a fill-in exercise; "
                                  "its own file is ID_level4.py / ID_level5.py.")
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
    _LANG.set(None)


# The language the running command resolved (resolve_lang sets it), for usage errors raised later.
_LANG: contextvars.ContextVar[str | None] = contextvars.ContextVar("alignlings_lang", default=None)


def _error_lang() -> str:
    lang = _LANG.get()
    if lang is None:
        root = _root_option("lang")
        lang = root if root in i18n.LANGS else _lang_from_environment()
    return lang


class UsageError(typer.BadParameter):
    """A usage error in the learner's language (exit 2): names the argument and what was expected.

    ``key`` is a string of locales [cli.errors]; click's own frame ("Usage:", "Try ... for help.",
    "Error: Invalid value for ...") is translated too."""

    def __init__(self, key: str, param_hint: str, lang: str | None = None, **kw) -> None:
        self.lang = lang or _error_lang()
        super().__init__(i18n.t(f"cli.errors.{key}", self.lang, **kw), param_hint=param_hint)

    def format_message(self) -> str:
        return i18n.t("cli.errors.invalid", self.lang, param=self.param_hint, message=self.message)

    def show(self, file=None) -> None:
        if file is None:
            file = typer.get_text_stream("stderr")
        if self.ctx is not None:
            usage = i18n.t("cli.errors.usage", self.lang) + self.ctx.get_usage().removeprefix("Usage: ")
            hint = i18n.t("cli.errors.try_help", self.lang, command=self.ctx.command_path)
            typer.echo(f"{usage}\n{hint}\n", file=file, color=self.ctx.color)
        typer.echo(i18n.t("cli.errors.error", self.lang, message=self.format_message()), file=file,
                   color=self.ctx.color if self.ctx is not None else None)


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
        if lang not in i18n.LANGS:
            raise UsageError("lang", "--lang", lang=_lang_from_environment(), got=lang)
        _LANG.set(lang)
        return lang
    lang = _lang_from_environment()
    _LANG.set(lang)
    return lang


def _lang_from_environment() -> str:
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
    from alignlings.content.pack import PackError, default_pack_paths, load_pack

    paths = given_packs(pack) or default_pack_paths()
    try:
        return load_pack(paths)
    except PackError as exc:
        raise UsageError("pack", "--pack", message=pack_error_text(exc)) from None


def open_exercise(exercise_id: str, lang: str | None, pack, *, code_only: bool = False):
    """What a command about one exercise starts with: (the language, the loaded course, the exercise);
    the language first, so that an unknown id or a broken pack is said in it."""
    lang = resolve_lang(lang)
    course = load(pack)
    return lang, course, get_exercise(course, exercise_id, code_only=code_only)


def pack_error_text(exc: Exception) -> str:
    """A pack's load error (``PackError``) in the language of the command's errors."""
    return i18n.reword("practice.pack_errors", str(exc), _error_lang())


def get_exercise(pack, exercise_id: str, *, code_only: bool = False):
    from alignlings.content.pack import PackError

    try:
        ex = pack.get(exercise_id)
    except PackError as exc:
        same = [e.key for e in pack if e.id == exercise_id]
        if len(same) > 1:
            raise UsageError("ambiguous_id", "ID", id=exercise_id, keys=", ".join(same)) from None
        if "unknown id" not in str(exc):  # a pack problem of its own (a track no loaded pack has...)
            raise UsageError("pack", "ID", message=pack_error_text(exc).removeprefix("exercise: ")) from None
        lang = _error_lang()
        close = close_ids(str(exercise_id), list(pack.exercises))
        raise UsageError("unknown_id", "ID", lang=lang, id=exercise_id, n=len(pack.exercises),
                         packs=pack.describe(), sep=os.pathsep,
                         close=i18n.t("cli.errors.did_you_mean", lang, ids=", ".join(map(repr, close))) if close else "",
                         ) from None
    if code_only and not ex.kind_spec.graded_as_file:
        from alignlings.cli.kinds import view_of

        raise UsageError(view_of(ex).not_file, "ID", id=exercise_id)
    return ex


def close_ids(given: str, ids: list[str], n: int = 4) -> list[str]:
    """A few ids the learner may have meant: those that start with what was typed (``dpo`` ->
    ``dpo-loss``), shortest first, then the closest by edit distance; never the whole list."""
    import difflib

    given = given.strip().lower()
    if not given:
        return []
    names = {i: i.rsplit("/", 1)[-1] for i in ids}  # a course's PACK/ID is matched on its ID too
    prefix = sorted((i for i, name in names.items() if name.startswith(given) or i.startswith(given)),
                    key=lambda i: (len(names[i]), i))
    if prefix:
        return prefix[:n]
    close = [names_i for m in difflib.get_close_matches(given, list(dict.fromkeys(names.values())), n=n, cutoff=0.6)
             for names_i, name in names.items() if name == m]
    return list(dict.fromkeys(close))[:n]


def workspace() -> Path:
    return Path(os.environ.get("ALIGNLINGS_WORKSPACE") or "alignlings-workspace")


def exercise_file(exercise_id: str) -> Path:
    """The learner's file for an exercise key: ``dpo_loss.py``, or ``ipo/dpo_loss.py`` for ``ipo/dpo-loss``."""
    return workspace() / f"{exercise_id.replace('-', '_')}.py"


def level_file(exercise_id: str, level: int | None) -> Path:
    """The learner's file at a level (``dpo_loss_level4.py``); the exercise's own file without one."""
    path = exercise_file(exercise_id)
    return path if level is None else path.with_name(f"{path.stem}_level{level}.py")


def store():
    from alignlings.practice.store import ProgressStore

    return ProgressStore()


def session(course, *, graded: bool = False):
    """The learner's practice session on ``course`` (``alignlings.practice.session.Practice``): every
    command goes through it. ``graded``: a grader is started on first use (closed with the session)."""
    from alignlings.practice.session import Practice

    def make_grader():
        from alignlings.grading.grader import Grader

        return Grader(course)

    return Practice(store(), course, make_grader if graded else None, source="cli")


_PARAM_HINTS = {"blank": "--blank", "ratio": "--ratio", "limit": "--limit", "data": "--import", "level": "--level"}


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



def next_text(nxt, lang: str, pack=None) -> str:
    """"Next: ID (title). Start it with `alignlings start ID`." (the command its kind answers with), or
    that every exercise is solved when ``nxt`` is None."""
    if nxt is None:
        return t("all_done", lang)
    from alignlings.cli.kinds import view_of

    return t(view_of(nxt).next, lang, id=nxt.key, title=nxt.title[lang], pack=pack_args(pack))
