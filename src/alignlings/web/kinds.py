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

from alignlings.content.kinds import Kind

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
    """Show exercises of kind ``kind_name`` as ``view``; registering another view for a kind that
    has one is an error."""
    if not isinstance(kind_name, str) or not kind_name or not isinstance(view, KindView):
        raise TypeError(f"register: expected a kind name and a KindView, got {kind_name!r}, {view!r}")
    if VIEWS.get(kind_name, view) != view:
        raise ValueError(f"register: kind {kind_name!r} already has a web view ({VIEWS[kind_name]!r})")
    VIEWS[kind_name] = view
    return view


def view_of(ex_or_kind: Exercise | Kind | str) -> KindView:
    """The web view of an exercise, a kind or a kind's name; a clear error naming the kind when none
    is registered."""
    name = ex_or_kind if isinstance(ex_or_kind, str) else ex_or_kind.name if isinstance(ex_or_kind, Kind) \
        else ex_or_kind.kind
    try:
        return VIEWS[name]
    except KeyError:
        raise KeyError(f"web: no view registered for exercise kind {name!r} (alignlings.web.kinds.register); "
                       f"registered: {', '.join(VIEWS)}") from None


# the built-in kinds (content/kinds/{fill,quiz,bug,bug_or_not,predict}.py)
register("code", KindView(page=None, template="exercise.html"))  # web/exercises.py: an input per blank
register("quiz", KindView(page="quiz", template="quiz.html"))  # web/quiz.py
register("bug", KindView(page="bug", template="bug.html", whole_file=True))  # web/bugdrill.py
register("bug-or-not", KindView(page="bug-or-not", template="quiz.html"))  # web/quiz.py with only this drill
register("predict", KindView(page="predict", template="predict.html"))  # web/predict.py
