"""Exercise kinds through one registry (issue 20 §2): what each kind of exercise is, asked of
the kind instead of branching on ``ex.kind`` across the code.

A kind says how its exercise is answered and graded (a file through the grader, or options chosen),
whether it has blanks, how ``alignlings dev check`` proves it beyond the texts, what it brings to
spaced review, and its label; how the web app and the CLI show it is theirs, registered by kind name
in ``web.kinds`` and ``cli.kinds``. ``of(ex)`` returns the kind of an exercise; ``register`` adds one,
so a new kind is one new module that calls ``register``, plus its two views (and templates).

This package imports nothing that imports ``practice.pack`` (only ``Exercise`` for typing), also
inside its methods (``packdata``, ``blanks``, ``bugdrill`` and the skeletons' text), so the pack
loader, the grader and ``dev check`` can ask it without an import circle; what review needs of a
kind gets the review module as an argument (``rv``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from alignlings.i18n import LANGS
from alignlings.content.packdata import PackError, QuizQuestion, read_quiz_questions

if TYPE_CHECKING:
    from alignlings.content.blanks import Blank
    from alignlings.content.exercise import Exercise


REVIEW_ANSWERS = ("fills", "file", "choice")  # what a review item's answer is (``ReviewItemKind.answer``)


@dataclass(frozen=True)
class ReviewItemKind:
    """A kind of spaced-review item (issue 30 §2), registered by the exercise kinds that bring it: an
    item's key is ``NAME/REST`` where REST starts with what ``names`` says, an exercise id
    ("exercise") or a question id ("question"). The store's import validation, review and the pack
    loader all ask :data:`REVIEW_ITEM_KINDS`, so a kind of item cannot be known to one and not another;
    review and the web app ask its fields instead of branching on its name."""

    name: str
    names: str  # "exercise" or "question": what the key's part after NAME/ names
    answer: str = "fills"
    """What an answer is: "fills" (short code: a blank's fill, a cloze's ``{position: text}``),
    "file" (a whole file: the web app allows ``practice.review.MAX_FILE_CHARS``) or "choice" (an
    option's index). Default "fills"."""
    runs_code: bool = True
    """Judging an answer runs code (the grader's sandbox, or a predict item's variant in its own
    process), so the web app queues it in its bounded grading queue; False: judged at once (a quiz
    question). Default True."""
    fresh_inputs: bool = False
    """Each re-test draws other random inputs and alternates writing the fill with fixing the
    misconceived one shown in the blank (``practice.review.fresh_inputs``, ``misconception_variant``),
    so it is not passed by remembering the last run. Default False: the exercise's own cases, a blank."""
    mastery_weight: float = 1.0
    """Its weight in a concept's mastery (``Review.mastery``: a weighted mean of retrievability).
    Default 1."""
    offered_before_met: bool = False
    """It may be answered before it was ever met, when review offers it (``Review.level_offers``: a
    level item once its exercise is filled reliably). Default False: only items met have a schedule."""

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name or self.names not in ("exercise", "question"):
            raise ValueError(f"ReviewItemKind: expected a name without '/' naming an exercise or a question, "
                             f"got {self.name!r}, {self.names!r}")
        if self.answer not in REVIEW_ANSWERS or not self.mastery_weight > 0:
            raise ValueError(f"ReviewItemKind {self.name!r}: expected answer one of {', '.join(REVIEW_ANSWERS)} "
                             f"and a positive mastery_weight, got {self.answer!r}, {self.mastery_weight!r}")


V = TypeVar("V")


def register_view(views: dict[str, V], where: str, kind_name: str, view: V, view_type: type) -> V:
    """Add ``view`` (how an interface, ``where``, shows exercises of kind ``kind_name``) to that
    interface's ``views``; registering another view for a kind that has one is an error. The CLI
    (``cli.kinds``) and the web app (``web.kinds``) each keep such a table: a kind says what it is,
    the interfaces say how they show it."""
    if not isinstance(kind_name, str) or not kind_name or not isinstance(view, view_type):
        raise TypeError(f"register: expected a kind name and a {view_type.__name__}, got {kind_name!r}, {view!r}")
    if views.get(kind_name, view) != view:
        raise ValueError(f"register: kind {kind_name!r} already has a {where} view ({views[kind_name]!r})")
    views[kind_name] = view
    return view


def view_in(views: dict[str, V], where: str, ex_or_kind: Any) -> V:
    """The view in ``views`` of an exercise, a kind or a kind's name; a clear error naming the kind
    when the interface ``where`` registered none."""
    name = ex_or_kind if isinstance(ex_or_kind, str) else ex_or_kind.name if isinstance(ex_or_kind, Kind) \
        else ex_or_kind.kind
    try:
        return views[name]
    except KeyError:
        raise KeyError(f"{where}: no view registered for exercise kind {name!r} (alignlings.{where}.kinds.register); "
                       f"registered: {', '.join(views)}") from None


class Kind:
    """One kind of exercise. Subclasses set the class attributes and override the methods that differ
    from the defaults (a kind with no file, no blanks, questions read from quiz.toml)."""

    name: str = ""  # the ``kind`` of exercise.toml
    author_name: str = ""  # what ``alignlings dev new --kind`` calls it ("" : ``name``)
    label: dict[str, str] = {}  # shown to learners, per language
    graded_as_file: bool = False  # a file graded by the grader (``Exercise.kind_spec.graded_as_file``)
    answered_by_choice: bool = False  # questions answered by choosing options (``Exercise.kind_spec.answered_by_choice``)
    has_blanks: bool = False  # a template with blanks (the fill-in exercise)
    starts_from_buggy_file: bool = False  # the learner's file starts as buggy.py (``Exercise.kind_spec.starts_from_buggy_file``)
    on_quiz_page: bool = False  # on the Quiz page and ``alignlings quiz`` without an id (the concept quiz)
    questions_file: str = "quiz.toml"  # where its questions are written (``questions``, dev check's lines)
    cli_answer: str = "quiz"  # the command that answers it when it is not a file (a notebook says so)
    texts_need_hints: bool = True  # dev check wants hints and an explanation in texts/<lang>.toml
    first_answer_counts: bool = False  # the teacher's report judges its questions by the first answer (a prediction)

    def __init__(self) -> None:
        self.author_name = self.author_name or self.name

    # -- what the learner works on -------------------------------------------------------------
    def blanks(self, ex: Exercise) -> list[Blank]:
        """The blanks of its template, in order (none unless ``has_blanks``)."""
        return []

    def learner_file(self, ex: Exercise, lang: str) -> str:
        """The file the learner starts from, in ``lang`` (``grader.template_for``)."""
        raise PackError(f"exercise {ex.id!r} is a {self.name}, it has no file to work on")

    def solution_file(self, ex: Exercise, lang: str) -> str:
        """The reference solution as the learner is shown it (``grader.solution_for``)."""
        raise PackError(f"exercise {ex.id!r} is a {self.name}, it has no solution file")

    asks_predictions: bool = False  # its questions are predictions of a run (``predictions``)

    def predictions(self, ex: Exercise) -> tuple[Any, ...]:
        """The predictions it asks (``Exercise.predict``): none unless ``asks_predictions``."""
        return ()

    def questions(self, ex: Exercise) -> tuple[QuizQuestion, ...]:
        """The questions answered by choosing an option (``Exercise.quiz``)."""
        return read_quiz_questions(ex.path / self.questions_file)

    # -- grading -----------------------------------------------------------------------------------
    def trusted_variants(self, ex: Exercise) -> dict[str, str]:
        """Files beyond the reference and the misconceptions whose behaviour the grader computes once
        (name -> source), e.g. a drill's known wrong fixes."""
        return {}

    def annotate(self, ex: Exercise, trusted: Any, learner: Any, code: str, verdict: dict, lang: str,
                 names: list[str]) -> None:
        """Add this kind's own entries to a file's verdict (in place), after the cases are judged."""

    # -- authoring -----------------------------------------------------------------------------
    def text_problems(self, ex: Exercise) -> list[str]:
        """``dev check``'s text problems of this kind, beyond the statement, hints and title every
        exercise has (``practice.devcheck.check_texts``); by default, its questions' texts."""
        return question_text_problems(ex) if self.answered_by_choice else []

    def dev_check(self, ex: Exercise, grader: Any) -> tuple[list[str], list[str]] | None:
        """``dev check`` beyond the texts: (problems, what was checked), or None when the exercise is
        proved by the grader's run of its solution and misconceptions (``practice.devcheck``)."""
        return None

    @property
    def writes_skeleton(self) -> bool:
        """Whether ``alignlings dev new --kind`` offers it (it overrides ``skeleton``)."""
        return type(self).skeleton is not Kind.skeleton

    def skeleton(self, exercise_id: str) -> dict[str, str] | None:
        """Relative path -> text of a new exercise's files (``alignlings dev new``); None: not offered."""
        return None

    # -- spaced review (practice.review asks the exercise's kind, never branches on it) ---------------
    # ``rv`` is the module practice.review, passed in by it: a kind never imports review, which
    # imports the pack loader and the grader (an import circle through this package otherwise).
    review_needs_grader: bool = True  # its review answers are graded in the grader's sandbox
    review_item_kinds: tuple[ReviewItemKind, ...] = ()  # the kinds of review item its exercises bring

    def review_items(self, rv: Any, ex: Exercise) -> list[Any]:
        """The ``rv.Item`` s this exercise brings to spaced review."""
        return []

    def review_prompt(self, rv: Any, review: Any, item: Any, base: dict[str, Any], lang: str) -> Any:
        """What the learner sees of one of its review items (a ``practice.review.Prompt``, no answer);
        ``base``: the fields every prompt has."""
        raise ValueError(f"item: {item.key} cannot be asked: {self.name} exercises bring no review items")

    def review_check(self, rv: Any, review: Any, item: Any, answer: Any, grader: Any, lang: str) -> dict:
        """Judge a review answer: ``correct``, ``expected``, ``feedback`` and per-kind details."""
        raise ValueError(f"item: {item.key} cannot be checked: {self.name} exercises bring no review items")

    def review_withholds(self, item: Any) -> bool:
        """Whether a wrong answer's ``expected`` is withheld until the exercise is solved or its
        solution seen (it would solve the exercise)."""
        return False

    def question_ids(self, ex: Exercise) -> list[str]:
        """The ids of its questions answered by choosing an option (recorded as quiz answers)."""
        return []

    def recorded_questions(self, ex: Exercise) -> tuple[Any, ...]:
        """Its questions whose chosen options are recorded as quiz answers (each with ``id``,
        ``answer`` and ``options[i].text``), for the teacher's report (``practice.report``)."""
        return tuple(ex.quiz) if self.answered_by_choice else ()

    def practise_url(self, ex: Exercise) -> str:
        """Where the learner practises it (the mastery table's link)."""
        return f"/exercises/{ex.key}"

    def __repr__(self) -> str:
        return f"<kind {self.name}>"


def question_text_problems(ex: Exercise) -> list[str]:
    """Every question and option of an exercise answered by choosing has its text in every language."""
    problems = []
    for q in ex.quiz:
        for lang in LANGS:
            if not q.question.get(lang):
                problems.append(f"quiz {q.id}: no {lang} question")
            for i, o in enumerate(q.options):
                for what, given in (("text", o.text), ("why", o.why)):
                    if not given.get(lang):
                        problems.append(f"quiz {q.id} option {i}: no {lang} {what}")
    return problems


REGISTRY: dict[str, Kind] = {}
REVIEW_ITEM_KINDS: dict[str, ReviewItemKind] = {}  # every kind of review item, from the exercise kinds


def register(kind: Kind) -> Kind:
    """Add ``kind`` under its name, and the review-item kinds it brings; a second kind with the same
    name, or a review-item kind registered twice with different meanings, is an error."""
    if not isinstance(kind, Kind) or not kind.name:
        raise TypeError(f"register: expected a Kind instance with a name, got {kind!r}")
    if kind.name in REGISTRY and REGISTRY[kind.name] is not kind:
        raise ValueError(f"register: kind {kind.name!r} is already registered ({REGISTRY[kind.name]!r})")
    for item in kind.review_item_kinds:
        if REVIEW_ITEM_KINDS.get(item.name, item) != item:
            raise ValueError(f"register: review item kind {item.name!r} is already registered as "
                             f"{REVIEW_ITEM_KINDS[item.name]!r}")
    REGISTRY[kind.name] = kind
    for item in kind.review_item_kinds:
        REVIEW_ITEM_KINDS.setdefault(item.name, item)
    return kind


def review_item_kind(name: str) -> ReviewItemKind:
    """The review-item kind called ``name``; a clear error naming the known ones otherwise."""
    try:
        return REVIEW_ITEM_KINDS[name]
    except KeyError:
        raise KeyError(f"kind: unknown review item kind {name!r}, expected one of "
                       f"{', '.join(REVIEW_ITEM_KINDS)}") from None


def get(name: str) -> Kind:
    """The kind called ``name``; a clear error naming the known kinds otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"kind: unknown exercise kind {name!r}, expected one of {', '.join(REGISTRY)}") from None


def of(ex: Exercise) -> Kind:
    """The kind of exercise ``ex``."""
    return get(ex.kind)


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def by_author_name(name: str) -> Kind | None:
    """The kind ``alignlings dev new --kind NAME`` means (``fill`` is "code"), or None."""
    return next((k for k in REGISTRY.values() if k.author_name == name), None)


# in the order ``dev new --kind`` and error messages list them
from alignlings.content.kinds import fill, quiz, bug, bug_or_not, predict  # noqa: E402,F401,I001 - they register themselves
