"""How the command line speaks of each exercise kind (issue 30): the message ``alignlings start``
prints, the error a command that needs a file gives, and how the home screen names it as next.

A kind (``content.kinds``) says what an exercise is; what the CLI says about it is registered here
by kind name, as keys of the locales' tables. A new kind brings its :class:`KindView` with
``register``, and :func:`view_of` asks for it where a command used to ask the kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from alignlings.content.kinds import Kind, register_view, view_in

if TYPE_CHECKING:
    from alignlings.content.exercise import Exercise


@dataclass(frozen=True)
class KindView:
    """What the CLI says of exercises of one kind: each field is a key of locales/{en,zh}.toml."""

    wrote: str = "wrote"
    """[cli.start]: what ``alignlings start`` prints after writing the learner's file (a kind graded
    as a file). Default "wrote"."""
    not_file: str = "quiz_not_code"
    """[cli.errors]: the error of a command that needs a file (start, check, watch, solution) given
    an exercise of a kind that is not one. Default "quiz_not_code"."""
    next: str = "next"
    """[cli.common]: the home screen's "Next: ..." line naming it and the command that answers it
    (``cli.common.next_text``). Default "next" (start it)."""


VIEWS: dict[str, KindView] = {}  # exercise kind name -> what the CLI says of it


def register(kind_name: str, view: KindView) -> KindView:
    """Speak of exercises of kind ``kind_name`` as ``view``; registering another view for a kind
    that has one is an error."""
    return register_view(VIEWS, "cli", kind_name, view, KindView)


def view_of(ex_or_kind: Exercise | Kind | str) -> KindView:
    """The CLI view of an exercise, a kind or a kind's name; a clear error naming the kind when none
    is registered."""
    return view_in(VIEWS, "cli", ex_or_kind)


# the built-in kinds (content/kinds/{fill,quiz,bug,bug_or_not,predict}.py)
register("code", KindView())
register("quiz", KindView(next="next_quiz"))
register("bug", KindView(wrote="wrote_bug"))
register("bug-or-not", KindView(not_file="bug_or_not_not_code", next="next_quiz"))  # named as itself, not "the quiz"
register("predict", KindView(not_file="predict_not_code", next="next_predict"))
