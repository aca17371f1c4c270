"""How the web app shows each exercise kind (issue 30): the page an exercise opens on, its template,
and whether its page checks the whole file.

A kind (``content.kinds``) says what an exercise is; how it is rendered is the web app's business,
registered here by kind name. A new kind brings its :class:`KindView` with ``register`` (its module
in web/, or the module that registers the kind when it has none of its own), and :func:`view_of`
asks for it wherever a page used to branch on the kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from alignlings.content.kinds import Kind, register_view, view_in

if TYPE_CHECKING:
    from alignlings.content.exercise import Exercise


@dataclass(frozen=True)
class KindView:
    """How exercises of one kind are shown on the web."""

    page: str | None = None
    """Its own page in ``web.helpers.PAGES`` (the renderer of ``GET /exercises/{id}``); None: the
    fill-in page of web/exercises.py. Default None."""
    template: str = "exercise.html"
    """The template (under web/templates) that page renders. Default "exercise.html"."""
    whole_file: bool = False
    """Its page checks the whole file and shows the verdict in that file's own line numbers
    (``web.verdict.file_for_web``), not per blank. Default False."""

    def __post_init__(self) -> None:
        if not self.template.endswith(".html") or self.page == "":
            raise ValueError(f"KindView: expected an .html template and a page name or None, got {self!r}")


VIEWS: dict[str, KindView] = {}  # exercise kind name -> how the web shows it


def register(kind_name: str, view: KindView) -> KindView:
    """Show exercises of kind ``kind_name`` as ``view``; registering another view for a kind
    that has one is an error."""
    return register_view(VIEWS, "web", kind_name, view, KindView)


def view_of(ex_or_kind: Exercise | Kind | str) -> KindView:
    """The web view of an exercise, a kind or a kind's name; a clear error naming the kind when none
    is registered."""
    return view_in(VIEWS, "web", ex_or_kind)


# the built-in kinds (content/kinds/{fill,quiz,bug,bug_or_not,predict}.py)
register("code", KindView(page=None, template="exercise.html"))  # web/exercises.py: an input per blank
register("quiz", KindView(page="quiz", template="quiz.html"))  # web/quiz.py
register("bug", KindView(page="bug", template="bug.html", whole_file=True))  # web/bugdrill.py
register("bug-or-not", KindView(page="bug-or-not", template="quiz.html"))  # web/quiz.py with only this drill
register("predict", KindView(page="predict", template="predict.html"))  # web/predict.py
