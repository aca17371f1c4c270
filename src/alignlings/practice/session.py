"""One learner's practice in one loaded course: every use case, and its rules, written once.

``Practice(store, course, grader, clock)`` is what the CLI (``cli/``), the web app (``web/``) and
notebooks call; they parse input and render what its methods return (small dataclasses), and never
write to the progress store or decide a rule themselves. The rules that live here:

- A hint is one hint event on the exercise (the count the learner, the teacher's view and review's
  ratings read), whichever kind it is: the exercise's own next hint, or the next hint about one blank.
  Each kind advances its own progression key, ``hints/PACK/ID`` or ``blank_hints/PACK/ID/N``
  (``{"taken", "reset_at"}``), restarted by a reset; asking past the last hint re-shows it and
  records nothing.
- The solution counts as seen ("revealed") when the learner asks for it, and when the cloze drill
  of a code exercise that is neither solved nor revealed is opened or drawn (the drill shows the
  rest of the solution), from any interface.
- A cloze check grades only the positions of a draw the server issued to this learner (the last
  few draws are kept in the store, ``cloze_draws/PACK/ID``; an import never brings one), so no
  set of keys a learner makes up is answered with the reference's tokens.
- A quiz round starts with :meth:`Practice.quiz_start` (``alignlings quiz``, the page's "retake")
  and ends with an answer to the quiz's last question: its score is the latest answer to each
  question since the start, recorded as one attempt (passed when all are right).
- A review answer is rated by :func:`alignlings.practice.review.rate` from the verdict and whether a
  hint was shown (Again, Hard, else Good); the learner may then call a right answer hard or too easy
  (:meth:`Practice.review_rate`), which re-rates that same review; only items the learner has met are served or accepted, and
  a wrong answer shows the reference fill (or a bug drill's fix) only once the exercise is solved
  or its solution was seen.
- A check the learner stopped (the page's "Stop", a file saved again under ``watch``) is not an
  attempt: nothing is recorded.
- A store that cannot be written never hides a result: the failure is logged, the learner still
  gets the verdict, the hint, the solution, the quiz explanation or the cloze verdict, and the
  result says ``recorded=False``. Grading and recording are separate steps, so a store error is
  never reported as a grader failure.

Every learner action on an exercise passes one gate (:func:`gated`): who is asking (the store's
learner) -> may they (a track the teacher locked refuses with :class:`Locked` and its reason) -> the
action -> its record. Interfaces never decide it: the CLI, the web app and notebooks get the same
refusal.

Bad input raises :class:`UsageError` (a ``ValueError`` naming the argument); the CLI turns it into a
usage error, the web app into 404 (``missing``) or 422.

Why one long module: it is the gate. Every use case of a learner is a method of one class so that
the rule "who, may they, act, record" is written once and every interface calls the same place;
splitting the use cases across modules would split the gate (the interview's use cases, a mixin, are
the one part kept apart, in ``practice.interview``).
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar, cast

from alignlings.practice.errors import Locked, UsageError
from alignlings.practice.interview import InterviewMixin
from alignlings.content.exercise import Exercise
from alignlings.content.pack import Pack, PackError, QuizQuestion
from alignlings.practice.service import STORE_ERRORS, quiz_round_verdict, record_safely
from alignlings.grading.verdict import Verdict

log = logging.getLogger("alignlings.practice")

DEFAULT_CLOZE_RATIO = 0.15


_Action = TypeVar("_Action", bound=Callable[..., Any])


HELP_ACTIONS = frozenset({"hint", "reveal", "quiz_answer", "predict_answer", "cloze_open", "cloze_draw", "cloze_check",
                          "bug_diff"})
"""The actions that would show what a mock interview asks: refused while one runs (``gated``)."""


def gated(action: _Action) -> _Action:
    """The gate of a learner action on one exercise (the method's first argument): who is asking
    (this session's store and its learner) -> may they (the exercise's track is not locked for them;
    else :class:`Locked` with the reason, in the action's ``lang``) -> the action, which records what
    it did. Every action a learner can take on an exercise is a method wearing it."""
    refused_in_interview = action.__name__ in HELP_ACTIONS

    @functools.wraps(action)
    def gate(self: Practice, ex: Exercise, *args: Any, **kwargs: Any) -> Any:
        lang = kwargs.get("lang", "en")
        self._refuse_if_locked(ex, lang)
        if refused_in_interview:  # while a mock interview runs (practice.interview)
            self._refuse_during_interview(lang)
        return action(self, ex, *args, **kwargs)

    gate.gated = True  # type: ignore[attr-defined]  # tests list the gated actions
    return cast(_Action, gate)


class StoreUnavailable(RuntimeError):
    """What only the store can do (an import) could not be done now: it cannot be written."""


# -- results ---------------------------------------------------------------------------------------

class _Result:
    def as_dict(self) -> dict[str, Any]:
        return asdict(self)  # type: ignore[call-overload]


@dataclass
class BugDiff(_Result):
    exercise: str
    changes: str
    hunks: list[dict]
    changed_lines: list[int]
    diff: str


@dataclass
class Checked(_Result):
    verdict: Verdict
    code: str  # what was graded (for fills: the template with them in place)
    recorded: bool


@dataclass
class Started(_Result):
    key: str
    level: int | None  # None: the exercise's own file (the fill-in template, a drill's buggy.py); else 4 or 5
    text: str  # the file the learner starts from
    statement: str  # the statement shown with it (at level 5, the level's own where the pack gives one)


@dataclass
class Hint(_Result):
    exercise: str  # the exercise's key
    blank: int | None  # None: the exercise's own hints
    index: int  # which hint this is, 1-based
    total: int
    text: str
    last: bool
    recorded: bool


@dataclass
class HintState(_Result):
    """How far the learner got in each hint progression since the last reset."""

    exercise: int
    blanks: dict[int, int]


@dataclass
class Answer(_Result):
    index: int
    name: str
    answer: str
    todo: str


@dataclass
class Reveal(_Result):
    exercise: str
    solution: str
    answers: list[Answer]
    explanation: str
    recorded: bool


@dataclass
class Reset(_Result):
    exercise: str
    recorded: bool


@dataclass
class QuizRound(_Result):
    exercise: str
    answered: dict[str, int]  # question id -> the choice, since the round started
    right: int
    total: int
    correct: dict[str, bool] = field(default_factory=dict)  # question id -> whether that choice was right


@dataclass
class QuizOption(_Result):
    text: str
    why: str
    correct: bool


@dataclass
class QuizAnswer(_Result):
    exercise: str
    question: str
    choice: int
    answer: int
    correct: bool
    options: list[QuizOption]
    progress: dict[str, int]  # answered, right, total in this round
    score: dict[str, Any] | None  # the round's {right, total, passed} once its last question is answered
    recorded: bool


@dataclass
class PredictAsk(_Result):
    """A predict question before the commit: nothing of the answer, the feedback or the result."""

    exercise: str
    question_id: str
    intro: str  # the item's statement: what is being varied
    question: str
    options: list[str]
    answered: bool  # a prediction was committed before (the page may say so; it shows nothing of it)


@dataclass
class PredictAnswer(_Result):
    """A committed prediction and what the run showed."""

    exercise: str
    question: str
    choice: int
    answer: int  # the option the measured run supports
    correct: bool
    why: str  # feedback for the chosen option
    options: list[QuizOption]
    result_text: str | None  # the result sentence over the measured values (None: the run failed)
    values: dict[str, float]
    series: dict[str, list[float]]
    chart: dict | None  # x, y labels and the drawn series with their legend labels (practice.predict.chart_data)
    explanation: str
    run_error: str | None  # why the run could not be shown (a sentence, never a traceback)
    cached: bool
    score: dict[str, Any] | None  # the round's {right, total, passed} once its last question is answered
    recorded: bool


@dataclass
class ClozeDraw(_Result):
    exercise: str
    seed: int
    ratio: float
    source: str
    maskable: int
    masked: list[Any]  # cloze.Position, in the drill's order
    counter: str
    revealed_now: bool  # this draw counted the solution as seen


@dataclass
class ClozeChecked(_Result):
    exercise: str
    results: list[dict]
    right: int
    total: int
    recorded: bool


@dataclass
class ExerciseProgress(_Result):
    key: str
    id: str
    pack: str
    kind: str
    level: int
    title: dict[str, str]
    solved: bool
    attempts: int
    hints: int
    revealed: bool
    levels: list[int] = field(default_factory=list)  # levels 4 and 5 solved (``practice.levels``)
    highest_level: int | None = None  # the highest level solved: 4 or 5, else the exercise's own if solved


@dataclass
class PackProgress(_Result):
    id: str
    title: dict[str, str]
    done: int
    total: int


@dataclass
class Summary(_Result):
    packs: list[PackProgress]
    exercises: dict[str, ExerciseProgress]  # by exercise key, in course order
    by_pack: dict[str, dict[str, dict]]  # the store's rows: pack id -> exercise id -> row

    def next_exercise(self, course: Pack, after: Exercise | None = None) -> Exercise | None:
        """What to do next, as rustlings says after a pass: the first unsolved exercise after ``after``
        in the course's track order (from the start without it), else the first unsolved one before
        it; None when all are solved."""
        order = [key for track in course.tracks for key in track.exercises]
        start = order.index(after.key) + 1 if after is not None and after.key in order else 0
        for key in order[start:] + order[:start]:
            if not self.exercises[key].solved:
                return course.exercises[key]
        return None


@dataclass
class ReviewPrompt(_Result):
    shown: Any  # review.Prompt (its subclass says how it is asked): what the learner sees, without answers
    retrievability: float


@dataclass
class ReviewQueue(_Result):
    counts: dict
    items: list[ReviewPrompt]


@dataclass
class ReviewAnswer(_Result):
    item: str
    kind: str
    result: dict  # review.check(): correct, feedback, expected (None when withheld), ...
    rating: str  # again, hard, good, easy
    schedule: dict | None  # the item's new due date (None when the store could not be written)
    counts: dict | None
    recorded: bool


@dataclass
class ReviewHint(_Result):
    item: str
    hints: list[str]  # a cloze item: the first character of each masked token; others: the one hint
    recorded: bool  # False when the store could not keep it (this session still knows it)


@dataclass
class ReviewRated(_Result):
    item: str
    rating: str  # hard, good, easy
    schedule: dict | None  # the item's new due date (None when the store could not be written)
    counts: dict | None
    recorded: bool


@dataclass
class ClassReport(_Result):
    learners: list[dict]
    progress: list[dict]  # one row per learner and exercise
    misconceptions: list[dict]


def status_of(row: dict) -> str:
    """solved, attempted (anything done since the last reset) or not_started."""
    if row.get("solved"):
        return "solved"
    return "attempted" if row.get("attempts") or row.get("hints") or row.get("revealed") else "not_started"


def highest_level(ex: Exercise, solved: bool, solved_levels: list[int]) -> int | None:
    """The highest level reached: the highest of levels 4 and 5 solved, else the exercise's own
    level when it is solved, else None."""
    if solved_levels:
        return max(solved_levels)
    return ex.level if solved else None


def hint_key(ex: Exercise) -> str:
    return f"hints/{ex.pack}/{ex.id}"


def blank_hint_key(ex: Exercise, blank: int) -> str:
    return f"blank_hints/{ex.pack}/{ex.id}/{blank}"


def quiz_round_key(ex: Exercise) -> str:
    return f"quiz_round/{ex.pack}/{ex.id}"


def review_hint_key(pack_id: str, item_key: str) -> str:
    """The setting that says a hint was served for a review item, and for which of its reviews."""
    return f"review_hint/{pack_id}/{item_key}"


def cloze_draws_key(ex: Exercise) -> str:
    """The setting that keeps the cloze draws issued to this learner (the latest few, server-side)."""
    return f"cloze_draws/{ex.pack}/{ex.id}"


CLOZE_DRAWS_KEPT = 8  # a check may answer any of the learner's last few draws (several tabs, a retry)


def blank_hints(ex: Exercise, lang: str) -> list[list[str]]:
    """The pack's per-blank hints, one list per blank ([] when it has none)."""
    return [list(h or []) for h in (getattr(ex.texts(lang), "blank_hints", None) or [])]


# -- the session -----------------------------------------------------------------------------------

class Practice(InterviewMixin):
    """One learner's practice in one loaded course.

    ``store``: the learner's progress store (a ``ProgressStore`` or a view ``for_learner``);
    ``grader``: a grader, or a function that makes one on first use (owned and closed by
    :meth:`close`), or None where nothing is graded; ``clock``: review's time (None: review's
    ``CLOCK``); ``source``: the interface, as attempts record it ("cli", "web", "notebook", ...).
    """

    def __init__(self, store, course: Pack, grader: Any = None, clock: Any = None, *, source: str = "cli"):
        self.store, self.course, self.clock, self.source = store, course, clock, source
        self._grader: Any = None
        self._make_grader: Callable[[], Any] | None = None
        self._owns_grader = False
        if grader is not None and not hasattr(grader, "check") and callable(grader):
            self._make_grader = grader
        else:
            self._grader = grader
        self._review: Any = None
        # what could not be recorded still counts for this session: quiz answers and round starts
        self._unrecorded_answers: dict[tuple[str, str, str], dict] = {}  # (pack, exercise, question)
        self._unrecorded_starts: dict[tuple[str, str], str] = {}
        self._unrecorded_draws: dict[tuple[str, str], list[dict]] = {}  # cloze draws the store did not keep
        self._unrecorded_review_hints: dict[str, dict] = {}  # review hints served the store did not keep

    def grader(self):
        if self._grader is None:
            if self._make_grader is None:
                raise RuntimeError("grader: this session was made without a grader")
            self._grader, self._owns_grader = self._make_grader(), True
        return self._grader

    def close(self) -> None:
        if self._owns_grader and self._grader is not None:
            self._grader.close()
            self._grader = None

    def __enter__(self) -> Practice:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- helpers -----------------------------------------------------------------------------------
    def exercise(self, exercise_id: str) -> Exercise:
        try:
            return self.course.get(exercise_id)
        except PackError as exc:
            raise UsageError("ID", str(exc).removeprefix("exercise: "), missing=True) from None

    def _safely(self, what: str, fn: Callable[[], Any]) -> bool:
        try:
            fn()
            return True
        except STORE_ERRORS:
            log.exception("could not record %s", what)
            return False

    def _read(self, what: str, fn: Callable[[], Any], default: Any) -> Any:
        try:
            return fn()
        except STORE_ERRORS:
            log.exception("could not read %s", what)
            return default

    def _row(self, ex: Exercise) -> dict:
        return self._read("progress", lambda: self.store.summary(ex.pack), {}).get(ex.id, {})

    def attempts(self, ex: Exercise) -> list[dict]:
        """The exercise's attempts, oldest first (``before_reset`` on those a reset left behind);
        [] when the store cannot be read."""
        return list(self._read("attempts", lambda: self.store.attempts(ex.id, pack=ex.pack), []) or [])

    def latest_attempt(self, ex: Exercise, level: int | None = None) -> dict | None:
        """The latest attempt with code since the last reset (what a page puts back), else None;
        ``level``: only attempts at that level (0: the exercise's own file, 4 or 5: ``practice.levels``)."""
        for attempt in reversed(self.attempts(ex)):
            get = attempt.get if isinstance(attempt, dict) else lambda k, d=None: getattr(attempt, k, d)
            if get("before_reset"):
                return None
            if level is not None and int(get("level") or 0) != level:
                continue  # another level's file
            if get("code"):
                return {"code": str(get("code")), "verdict": get("verdict") or {}}
        return None

    def quiz_answers(self, pack_id: str, exercise: str | None = None) -> dict[str, dict]:
        """Question id -> the latest answer in one pack, or to one exercise's questions (its id) ({} when
        the store cannot be read)."""
        return dict(self._read("quiz answers", lambda: self.store.quiz_answers(pack=pack_id, exercise=exercise), {})
                    or {})

    def cloze_stats(self, ex: Exercise) -> dict[str, dict]:
        """Position key -> seen, wrong, right, streak of the cloze drill ({} when the store cannot be read)."""
        return dict(self._read("cloze statistics", lambda: self.store.cloze_stats(ex.id, pack=ex.pack), {}) or {})

    # -- levels 4 and 5 (practice.levels) ---------------------------------------------------------------
    def _exercise_arg(self, ex: Exercise | str) -> Exercise:
        return self.exercise(ex) if isinstance(ex, str) else ex

    def _level_arg(self, ex: Exercise, level: Any) -> int:
        from alignlings.grading import levels

        try:
            return levels.parse_level(level, ex)
        except levels.LevelError as exc:
            raise UsageError("level", str(exc).removeprefix("level: ")) from None

    def start(self, ex: Exercise | str, level: int | None = None, *, lang: str = "en") -> Started:
        """The file the learner starts from: the exercise's own (``level`` None), or the level-4 or
        level-5 file generated from the reference (``practice.levels``). Nothing is recorded."""
        from alignlings.grading import levels
        from alignlings.grading.grader import template_for

        ex = self._exercise_arg(ex)
        if not ex.kind_spec.graded_as_file:
            raise UsageError("ID", f"{ex.key!r} is a {ex.kind_spec.label['en']} item, not a file: answer it with "
                                   f"`alignlings {ex.kind_spec.cli_answer} {ex.key}`", missing=True)
        if level is None:
            return Started(ex.key, None, template_for(ex, lang), ex.texts(lang).statement)
        level = self._level_arg(ex, level)
        return Started(ex.key, level, levels.level_file(ex, level, lang), levels.level_statement(ex, level, lang))

    def levelled_exercises(self) -> list[Exercise]:
        """The exercises that have levels 4 and 5 (every fill-in exercise), in course order."""
        from alignlings.grading.levels import has_levels

        return [ex for ex in self.course if has_levels(ex)]

    def level_progress(self, ex: Exercise | str) -> dict[int, dict]:
        """Level (4, 5) -> ``solved``, ``attempts``, ``solved_at`` of one exercise, each level on its own
        (since the exercise's last reset); {} when nothing was tried at those levels."""
        ex = self._exercise_arg(ex)
        rows = self._read("level progress", lambda: self.store.level_summary(ex.pack), {}) or {}
        return {int(k): dict(v) for k, v in (rows.get(ex.id) or {}).items()}

    # -- check ---------------------------------------------------------------------------------------
    @gated
    def check(self, ex: Exercise, *, code: str | None = None, fills: list[str] | None = None,
              lang: str = "en", run_main: bool = True, level: int | None = None) -> Checked:
        """Grade a whole file (``code``) or one fill per blank (``fills``) in the sandbox and record it.
        ``level`` (4 or 5), or a level the file states in its header (``levels.level_of``): the file
        is graded at that level (``levels.check_level``) and recorded as an attempt at it."""
        if (code is None) == (fills is None):
            raise UsageError("code", "give exactly one of 'code' and 'fills'")
        if not ex.kind_spec.graded_as_file:
            raise UsageError("ID", f"{ex.key!r} is a {ex.kind_spec.label['en']} item, not a file: answer it with "
                                   f"`alignlings {ex.kind_spec.cli_answer} {ex.key}`", missing=True)
        if level is None and code is not None:
            from alignlings.grading.levels import level_of

            level = level_of(code)
        if level is not None:
            if fills is not None:
                raise UsageError("fills", f"level {level} has no blanks: give the whole file as 'code'")
            from alignlings.grading.levels import check_level

            level = self._level_arg(ex, level)
            assert code is not None
            verdict: Verdict = check_level(self.grader(), ex.key, code, level, lang=lang,  # type: ignore[assignment]
                                           run_main=run_main)
            return Checked(verdict, code, record_safely(self.store, ex, verdict, code=code, source=self.source))
        grader = self.grader()
        verdict = grader.check(ex.key, code, fills=fills, lang=lang, run_main=run_main)
        graded = code if code is not None else grader.submission(ex, fills=fills).code
        error: Any = verdict.get("error") if isinstance(verdict, dict) else None
        if isinstance(error, dict) and error.get("kind") == "stopped":
            return Checked(verdict, graded, False)  # the learner stopped it: it says nothing of the answer
        recorded = record_safely(self.store, ex, verdict, code=graded, source=self.source)
        return Checked(verdict, graded, recorded)

    # -- hints -----------------------------------------------------------------------------------------
    @gated
    def hint(self, ex: Exercise, blank: int | None = None, *, lang: str = "en") -> Hint:
        """The next hint: the exercise's own (a nudge first, the formula last), or with ``blank`` the
        next one about that blank. Past the last, the last again (nothing recorded)."""
        if blank is None:
            hints = list(ex.texts(lang).hints)
            if not hints:
                raise UsageError("ID", f"{ex.key!r} has no hints", missing=True)
            key = hint_key(ex)
        else:
            hints = self._blank_hint_list(ex, blank, lang)
            key = blank_hint_key(ex, blank)
        try:
            taken = int(self.store.take_hint(ex.id, pack=ex.pack, key=key, limit=len(hints)))
            recorded = True
        except STORE_ERRORS:
            log.exception("could not record a hint on %s", ex.key)
            taken = self._read("hints", lambda: self.store.hint_progress(ex.id, pack=ex.pack, key=key), 0) + 1
            recorded = False
        n = max(1, min(taken, len(hints)))
        return Hint(ex.key, blank, n, len(hints), hints[n - 1], n >= len(hints), recorded)

    def _blank_hint_list(self, ex: Exercise, blank: int, lang: str) -> list[str]:
        n_blanks = len(ex.kind_spec.blanks(ex))
        if isinstance(blank, bool) or not isinstance(blank, int) or not 1 <= blank <= n_blanks:
            raise UsageError("blank", f"expected a blank from 1 to {n_blanks} of {ex.key}, got {blank!r}"
                             if n_blanks else f"{ex.key!r} has no blanks")
        per_blank = blank_hints(ex, lang)
        hints = per_blank[blank - 1] if blank - 1 < len(per_blank) else []
        if not hints:
            raise UsageError("blank", f"{ex.key!r} has no hints for TODO {blank}", missing=True)
        return hints

    def hint_state(self, ex: Exercise) -> HintState:
        """The hints taken so far (per progression, since the last reset): what a page shows again."""
        def taken(key: str) -> int:
            return int(self._read("hints", lambda: self.store.hint_progress(ex.id, pack=ex.pack, key=key), 0))

        n_blanks = len(ex.kind_spec.blanks(ex))
        per_blank = {n: taken(blank_hint_key(ex, n)) for n in range(1, n_blanks + 1)}
        return HintState(taken(hint_key(ex)), {n: k for n, k in per_blank.items() if k})

    # -- the solution --------------------------------------------------------------------------------
    @gated
    def reveal(self, ex: Exercise, *, lang: str = "en") -> Reveal:
        """The reference solution, each blank's fill and the explanation; recorded as revealed."""
        from alignlings.grading.grader import solution_for

        if not ex.kind_spec.graded_as_file:
            raise UsageError("ID", f"{ex.key!r} is a {ex.kind_spec.label['en']} item: it has no solution file",
                             missing=True)
        recorded = self._safely(f"the reveal of {ex.key}",
                                lambda: self.store.record_solution_revealed(ex.id, pack=ex.pack))
        texts = ex.texts(lang)
        todos = list(texts.blanks)
        answers = [Answer(b.index, b.name, b.answer, todos[b.index - 1] if b.index - 1 < len(todos) else "")
                   for b in ex.kind_spec.blanks(ex)]
        return Reveal(ex.key, solution_for(ex, lang), answers, texts.explanation, recorded)

    def reset(self, ex: Exercise) -> Reset:
        """Start the exercise over: its summary and hint progressions restart; the history stays."""
        return Reset(ex.key, self._safely(f"the reset of {ex.key}", lambda: self.store.reset(ex.id, pack=ex.pack)))

    # -- the quiz ------------------------------------------------------------------------------------
    def quiz_exercises(self) -> list[Exercise]:
        return [ex for ex in self.course if ex.kind_spec.answered_by_choice]  # the concept quiz, bug-or-not drills

    def quiz_question(self, qid: str) -> tuple[Exercise, QuizQuestion]:
        """A question by its id, or ``PACK/QID`` where two packs share one."""
        for ex in self.quiz_exercises():
            for q in ex.quiz:
                if qid in (q.id, f"{ex.pack}/{q.id}"):
                    return ex, q
        raise UsageError("question", f"unknown question {qid!r}", missing=True)

    def quiz_start(self, ex: Exercise) -> QuizRound:
        """Start a round: answers before now no longer count toward it (the history keeps them)."""
        from alignlings.practice.store import utcnow

        if not ex.kind_spec.answered_by_choice:
            raise UsageError("exercise", f"expected a quiz, got {ex.key!r} ({ex.kind})")
        now = utcnow()
        if self._safely(f"the start of a round of {ex.key}", lambda: self.store.set_setting(quiz_round_key(ex), now)):
            self._unrecorded_starts.pop((ex.pack, ex.id), None)
        else:
            self._unrecorded_starts[(ex.pack, ex.id)] = now
        return QuizRound(ex.key, {}, 0, len(ex.quiz))

    def _round_answers(self, ex: Exercise) -> dict[str, dict]:
        latest = self._read("quiz answers", lambda: dict(self.store.quiz_answers(pack=ex.pack, exercise=ex.id) or {}),
                            {})
        for (pack, exercise, qid), a in self._unrecorded_answers.items():
            if (pack, exercise) == (ex.pack, ex.id) and str(a["answered_at"]) >= str(latest.get(qid, {}).get("answered_at", "")):
                latest[qid] = a
        started = self._read("the quiz round", lambda: self.store.get_setting(quiz_round_key(ex)), None)
        pending = self._unrecorded_starts.get((ex.pack, ex.id))
        if pending and (not started or pending > str(started)):
            started = pending
        ids = set(ex.kind_spec.question_ids(ex))  # quiz, bug-or-not and predict questions
        return {qid: a for qid, a in latest.items()
                if qid in ids and (not started or str(a.get("answered_at", "")) >= str(started))}

    def quiz_round(self, ex: Exercise) -> QuizRound:
        """The round so far: the latest answer to each question since it started."""
        latest = self._round_answers(ex)
        answered = {q.id: int(latest[q.id]["choice"]) for q in ex.quiz if q.id in latest}
        correct = {q.id: bool(latest[q.id].get("correct")) for q in ex.quiz if q.id in latest}
        return QuizRound(ex.key, answered, sum(correct.values()), len(ex.quiz), correct)

    @gated
    def quiz_answer(self, ex: Exercise, q: QuizQuestion, choice: int, *, lang: str = "en") -> QuizAnswer:
        """Record an answer; every option explained; the last question closes the round (recorded as
        one attempt)."""
        correct, latest, right, score, recorded = self._record_choice(ex, ex.quiz, q, choice, f"an answer to {q.id}")
        options = [QuizOption(o.text.get(lang, ""), o.why.get(lang, ""), i == q.answer) for i, o in enumerate(q.options)]
        progress = {"answered": sum(1 for x in ex.quiz if x.id in latest), "right": right, "total": len(ex.quiz)}
        return QuizAnswer(ex.key, q.id, choice, q.answer, correct, options, progress, score, recorded)

    def _record_choice(self, ex: Exercise, questions: Any, q: Any, choice: int,
                       what: str) -> tuple[bool, dict, int, dict | None, bool]:
        """The one rule for an option chosen (quiz, bug-or-not and predict questions): record it (a
        store failure is logged and the answer still counts toward this round), and the last question
        closes the round, recorded as one attempt that passes when every latest answer is right.
        Returns (correct, the round's latest answers, how many are right, the score or None, recorded)."""
        from alignlings.practice.store import utcnow

        if isinstance(choice, bool) or not isinstance(choice, int) or not 0 <= choice < len(q.options):
            raise UsageError("choice", f"expected 0..{len(q.options) - 1}, got {choice!r}")
        correct = choice == q.answer
        recorded = self._safely(what, lambda: self.store.record_quiz_answer(q.id, choice, correct, pack=ex.pack,
                                                                                   exercise=ex.id))
        if recorded:
            self._unrecorded_answers.pop((ex.pack, ex.id, q.id), None)
        else:  # it still counts toward this round
            self._unrecorded_answers[(ex.pack, ex.id, q.id)] = {"choice": choice, "correct": correct, "answered_at": utcnow()}
        latest = self._round_answers(ex)
        latest[q.id] = {"choice": choice, "correct": correct}
        right = sum(1 for x in questions if latest.get(x.id, {}).get("correct"))
        total, score = len(questions), None
        if q.id == questions[-1].id:
            verdict = quiz_round_verdict(ex, right, total)
            recorded = record_safely(self.store, ex, verdict, code="", source=self.source) and recorded
            score = {"right": right, "total": total, "passed": right == total}
        return correct, latest, right, score, recorded

    # -- the teacher's plan ------------------------------------------------------------------------------
    def track_locks(self, lang: str = "en") -> dict[str, str]:
        """Track key -> why it is locked for this learner: the teacher locked it and the tracks it
        ``requires`` are not all solved yet (each: every exercise solved, ever). {} outside a class."""
        from alignlings import i18n
        from alignlings.practice import report

        learner, locked_tracks = getattr(self.store, "learner", ""), getattr(self.store, "locked_tracks", None)
        locked = self._read("locked tracks", locked_tracks, set()) if learner and locked_tracks else set()
        if not locked:
            return {}
        s = i18n.lang_table("web.classroom")[lang]
        solved = self._read("solved exercises", lambda: report.solved_by(self.store, learner), set())
        out = {}
        for track in self.course.tracks:
            if track.key not in locked:
                continue
            todo = [r for r in (self.course.track(name) for name in track.requires)
                    if not all((self.course.exercises[k].pack, self.course.exercises[k].id) in solved
                               for k in r.exercises)]
            if todo:
                names = s["list_sep"].join(s["track_name"].format(title=r.title.get(lang) or r.title.get("en", r.id))
                                           for r in todo)
                out[track.key] = s["track_locked"].format(tracks=names)
        return out

    def lock_reason(self, ex: Exercise, lang: str = "en") -> str | None:
        """Why this learner may not work on ``ex`` yet (its track is locked for them), else None."""
        track = self.course.track_of(ex.key)
        return self.track_locks(lang).get(track.key) if track is not None else None

    def _refuse_if_locked(self, ex: Exercise, lang: str) -> None:
        reason = self.lock_reason(ex, lang)
        if reason:
            raise Locked(reason)

    def _refuse_during_interview(self, lang: str) -> None:
        """While a mock interview runs: no hints, solutions, cloze drills, quiz or predict answers
        or review answers outside it (each would show what an interview item asks)."""
        reason = self.interview_refusal(lang)
        if reason:
            raise Locked(reason)

    # -- predict items -------------------------------------------------------------------------------
    def predict_exercises(self) -> list[Exercise]:
        return [ex for ex in self.course if ex.kind_spec.asks_predictions]

    def predict_exercise(self, exercise_id: str) -> Exercise:
        ex = self.exercise(exercise_id)
        if not ex.kind_spec.asks_predictions:
            ids = ", ".join(e.key for e in self.predict_exercises())
            raise UsageError("ID", f"{ex.key!r} is not a predict item (predict items: {ids})", missing=True)
        return ex

    def _predict_question(self, ex: Exercise, question_id: str) -> Any:
        ex = self.predict_exercise(ex.key)
        for q in ex.predict:
            if question_id in (q.id, f"{ex.pack}/{q.id}"):
                return q
        raise UsageError("question", f"{ex.key!r} has no question {question_id!r} "
                                     f"(its questions: {', '.join(q.id for q in ex.predict)})", missing=True)

    def predict_questions(self, ex: Exercise, *, lang: str = "en") -> list[PredictAsk]:
        """The item's questions as asked before the commit: the intro, the question and the options,
        nothing of the answer, the feedback or the result."""
        ex = self.predict_exercise(ex.key)
        answered = self._round_answers(ex)
        intro = ex.texts(lang).statement
        return [PredictAsk(ex.key, q.id, intro, q.question.get(lang, ""), [o.text.get(lang, "") for o in q.options],
                           q.id in answered) for q in ex.predict]

    @gated
    def predict_answer(self, ex: Exercise, question_id: str, choice: int, *, lang: str = "en") -> PredictAnswer:
        """Commit a prediction, then run the variant (or take its cached run) and show the result.

        The choice is recorded first (like a quiz answer; a store failure is logged, the result is
        still shown and ``recorded`` is False), and only then is anything of the answer or the run
        computed. The item counts as solved under the quiz's rule: its last question closes a round,
        recorded as one attempt that passes when every question's latest prediction is right."""
        from alignlings.content.kinds.predict import measured

        q = self._predict_question(ex, question_id)
        ex = self.predict_exercise(ex.key)
        correct, _, _, score, recorded = self._record_choice(ex, ex.predict, q, choice, f"a prediction on {q.id}")
        run = measured(ex, q, lang)
        options = [QuizOption(o.text.get(lang, ""), o.why.get(lang, ""), i == q.answer) for i, o in enumerate(q.options)]
        return PredictAnswer(ex.key, q.id, choice, q.answer, correct, q.options[choice].why.get(lang, ""), options,
                             run["result_text"], run["values"], run["series"], run["chart"], run["explanation"],
                             run["run_error"], run["cached"], score, recorded)

    # -- the spot-the-bug drill ------------------------------------------------------------------------
    @gated
    def bug_diff(self, ex: Exercise, code: str, *, lang: str = "en") -> BugDiff:
        """The learner's change against buggy.py (nothing graded or recorded): ``changes`` (one
        sentence), ``hunks``, ``changed_lines`` and ``diff`` (unified text)."""
        from alignlings.content import bugdrill

        if not ex.kind_spec.starts_from_buggy_file:
            raise UsageError("ID", f"{ex.key!r} is not a spot-the-bug drill", missing=True)
        hunks = bugdrill.changes(ex.buggy_source, code)
        return BugDiff(ex.key, bugdrill.describe_changes(hunks, lang), hunks,
                       sorted({n for h in hunks if h["new"] for n in range(h["new"][0], h["new"][1] + 1)}),
                       bugdrill.unified_diff(ex.buggy_source, code))

    def bug_story(self, ex: Exercise, *, lang: str = "en") -> str | None:
        """The story of the real bug, once the drill is solved (None before)."""
        return ex.texts(lang).story if self._row(ex).get("solved") else None

    # -- the cloze drill -------------------------------------------------------------------------------
    def next_cloze(self) -> Exercise | None:
        """The snippet to drill when none is named: of the solved exercises, the one drilled least (course
        order breaks ties); before any is solved, the first snippet. None when the course has none."""
        snippets = [ex for ex in self.course if ex.cloze]
        if not snippets:
            return None
        solved = self.summary().exercises
        done = [ex for ex in snippets if solved[ex.key].solved]
        if not done:
            return snippets[0]
        return min(done, key=lambda ex: sum(int(s.get("seen", 0)) for s in self.cloze_stats(ex).values()))

    def cloze_exercise(self, exercise_id: str) -> Exercise:
        ex = self.exercise(exercise_id)
        if not ex.cloze:
            ids = ", ".join(e.key for e in self.course if e.cloze)
            raise UsageError("SNIPPET", f"{exercise_id!r} has no cloze snippet (snippets: {ids})", missing=True)
        return ex

    def cloze_reveals(self, ex: Exercise) -> bool:
        """Whether the drill would show the solution of an exercise neither solved nor revealed."""
        row = self._row(ex)
        return ex.kind_spec.graded_as_file and not row.get("solved") and not row.get("revealed")

    @gated
    def cloze_open(self, ex: Exercise, *, lang: str = "en") -> bool:
        """Open the drill: the solution counts as seen when it was not yet; True when it now is.
        Refused (``Locked``) on a track locked for this learner, like a check or a hint."""
        if not self.cloze_reveals(ex):
            return False
        self._safely(f"the reveal of {ex.key} by its cloze drill",
                     lambda: self.store.record_solution_revealed(ex.id, pack=ex.pack))
        return True

    @gated
    def cloze_draw(self, ex: Exercise, *, lang: str = "en", ratio: float = DEFAULT_CLOZE_RATIO,
                   seed: int | None = None) -> ClozeDraw:
        """Mask random tokens of the snippet (past mistakes come back more often); a draw shows the
        rest of the solution, so it opens the drill (:meth:`cloze_open`)."""
        from alignlings.practice import cloze as cz

        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
            raise UsageError("ratio", f"expected a value in (0, 1], got {ratio!r}")
        revealed = self.cloze_open(ex, lang=lang)
        source = cz.snippet_source(ex, lang)
        positions = cz.maskable_positions(source)
        if seed is None:
            seed = random.SystemRandom().randrange(2**31)
        stats = self._read("cloze statistics", lambda: self.store.cloze_stats(ex.id, pack=ex.pack), None)
        masked = list(cz.draw(positions, ratio=ratio, seed=seed, stats=stats))
        self._issue_cloze_draw(ex, [p.key for p in masked])
        return ClozeDraw(ex.key, seed, ratio, source, len(positions), masked,
                         cz.counter_text(len(positions), len(masked), lang), revealed)

    @gated
    def cloze_check(self, ex: Exercise, masked: list[str], answers: dict[str, str], *,
                    lang: str = "en") -> ClozeChecked:
        """Grade answers for the masked positions (a different token that behaves the same is run in
        the sandbox and accepted), then record the round (a store failure never hides the verdict)."""
        from alignlings.practice import cloze as cz

        if not masked:
            raise UsageError("masked", "empty: give the keys of the positions your draw masked")
        source = cz.snippet_source(ex, lang)
        by_key = {p.key: p for p in cz.maskable_positions(source)}
        # only positions of a draw issued to this learner are graded; the message is the same for
        # every other set of keys, so it tells nothing about which keys are positions
        if not self.cloze_draw_issued(ex, masked) or any(k not in by_key for k in masked):
            raise UsageError("masked", "these are not the positions of a draw you were given: "
                                       "draw again and answer its masks")
        chosen = [by_key[k] for k in dict.fromkeys(masked)]
        answers = {k: v for k, v in answers.items() if k in by_key}  # other keys are not this snippet's
        try:
            results = cz.check(ex, source, chosen, answers, self.grader())
        except cz.ClozeError as exc:
            raise UsageError("answers", str(exc)) from None
        rows = [{"key": r["key"], "token": r["token"], "correct": r["correct"]} for r in results]
        recorded = self._safely(f"a cloze round of {ex.key}",
                                lambda: self.store.record_cloze(ex.id, rows, pack=ex.pack))
        return ClozeChecked(ex.key, results, sum(1 for r in results if r["correct"]), len(results), recorded)

    def _cloze_draws(self, ex: Exercise) -> list[dict]:
        kept = self._read("cloze draws", lambda: self.store.get_setting(cloze_draws_key(ex)), None)
        draws = [d for d in kept if isinstance(d, dict) and isinstance(d.get("keys"), list)] \
            if isinstance(kept, list) else []
        return draws + self._unrecorded_draws.get((ex.pack, ex.id), [])

    def _issue_cloze_draw(self, ex: Exercise, keys: list[str]) -> None:
        """Keep a draw server-side (the latest CLOZE_DRAWS_KEPT): a check grades only these."""
        from alignlings.practice.store import utcnow

        draws = [*self._cloze_draws(ex), {"keys": list(keys), "issued_at": utcnow()}][-CLOZE_DRAWS_KEPT:]
        if self._safely(f"a cloze draw of {ex.key}", lambda: self.store.set_setting(cloze_draws_key(ex), draws)):
            self._unrecorded_draws.pop((ex.pack, ex.id), None)
        else:  # this session still knows it (the CLI's draw and check share one session)
            self._unrecorded_draws[(ex.pack, ex.id)] = draws

    def cloze_draw_issued(self, ex: Exercise, masked: list[str]) -> bool:
        """Whether ``masked`` are exactly the positions of one of the draws issued to this learner."""
        want = set(masked)
        return bool(want) and any(set(map(str, d["keys"])) == want for d in self._cloze_draws(ex))

    # -- spaced review -----------------------------------------------------------------------------------
    def review(self):
        """The review engine of this learner and course (its catalog computed once per course)."""
        from alignlings.practice import review as rv

        if self._review is None:
            self._review = (rv.Review(self.store, self.course, self.clock) if self.clock is not None
                            else rv.Review(self.store, self.course))
        return self._review

    def review_counts(self) -> dict:
        return self.review().counts()

    def review_queue(self, *, limit: int | None = None, concept: str | None = None,
                     lang: str = "en") -> ReviewQueue:
        """Today's due items (or a concept's items met so far), as the learner sees them: no answers."""
        from alignlings.practice import review as rv

        engine = self.review()
        try:
            due = engine.queue(limit=limit, concept=concept)
        except ValueError as exc:
            raise UsageError("limit", str(exc)) from None
        return ReviewQueue(engine.counts(), [ReviewPrompt(rv.present(engine, d.item, lang), d.retrievability)
                                             for d in due])

    def review_item(self, pack_id: str, key: str):
        """A review item the learner has met (one with a schedule), or one review offers before it is
        met (its kind's ``offered_before_met``: a level item); others are refused."""
        engine = self.review()
        try:
            item = engine.item(pack_id, key)
        except ValueError as exc:
            raise UsageError("item", str(exc), missing=True) from None
        engine.sync()
        met = self._read("review states", lambda: self.store.review_states(pack=item.pack), {})
        if item.key not in met and not (item.kind_spec.offered_before_met and item in engine.level_offers()):
            raise UsageError("item", f"item: {pack_id}/{key} is not an item you have met yet", missing=True)
        return item

    def _review_due(self, item) -> str | None:
        """The item's current due time (None before its first review): names one review of it."""
        state = self._read("review states", lambda: self.store.review_states(pack=item.pack), {}).get(item.key)
        return state["due"] if state else None

    def review_hint(self, pack_id: str, key: str, *, lang: str = "en") -> ReviewHint:
        """The hint of a review item the learner has met, served here so that the server knows it
        was shown: it is recorded (keyed by the item and its current due time, so it counts for
        this review only) and :meth:`review_answer` then rates a right answer Hard. Refused for an
        item without a hint (quiz and predict questions, level files)."""
        self._refuse_during_interview(lang)
        from alignlings.practice import review as rv

        item = self.review_item(pack_id, key)
        if not item.exercise.startswith(rv.BANK):  # the gate (:func:`gated`)
            self._refuse_if_locked(self.course.get(item.exercise), lang)
        shown = rv.present(self.review(), item, lang)
        one = str(getattr(shown, "hint", "") or "")  # a blank's first hint, a bug drill's neighbourhood
        hints = [str(h) for h in getattr(shown, "hints", None) or []] or ([one] if one else [])
        if not hints:
            raise UsageError("item", f"item: {pack_id}/{key} has no hint")
        mark = {"due": self._review_due(item)}
        setting = review_hint_key(item.pack, item.key)
        recorded = self._safely(f"the review hint of {item.key}", lambda: self.store.set_setting(setting, mark))
        if not recorded:  # this session still knows it (the CLI's hint and answer share one session)
            self._unrecorded_review_hints[setting] = mark
        return ReviewHint(item.key, hints, recorded)

    def review_hinted(self, item) -> bool:
        """Whether :meth:`review_hint` served this item's hint for its current review."""
        setting = review_hint_key(item.pack, item.key)
        mark = self._unrecorded_review_hints.get(setting) or self._read(
            "a review hint", lambda: self.store.get_setting(setting), None)
        return isinstance(mark, dict) and mark.get("due") == self._review_due(item)

    def review_answer(self, pack_id: str, key: str, answer: Any, *, seconds: float | None = None,
                      lang: str = "en") -> ReviewAnswer:
        """Grade one review answer (code in the sandbox), rate it and schedule the item. A right
        answer is Hard when this item's hint was served (:meth:`review_hint`) for this review; the
        server's record decides, never what a client says."""
        self._refuse_during_interview(lang)
        from alignlings.practice import review as rv

        engine = self.review()
        item = self.review_item(pack_id, key)
        kind = rv.kind_of(self.course, item)  # how its items are graded and what a wrong answer may show
        if not item.exercise.startswith(rv.BANK):  # the gate (:func:`gated`), once the item names its exercise
            self._refuse_if_locked(self.course.get(item.exercise), lang)
        try:
            result = rv.check(engine, item, answer, grader=self.grader() if kind.review_needs_grader else None,
                              lang=lang)
        except ValueError as exc:  # a malformed answer for this kind of item
            raise UsageError("answer", str(exc)) from None
        if not result["correct"] and kind.review_withholds(item):
            row = self._row(self.course.get(item.exercise))
            if not row.get("solved") and not row.get("revealed"):  # the fill (or the fix) would solve it
                result["expected"] = None
                result["withheld"] = True
        rating = rv.rate(result["correct"], hinted=self.review_hinted(item), seconds=seconds)
        schedule = counts = None
        try:
            schedule = engine.answer(item, rating, duration_ms=None if seconds is None else int(seconds * 1000),
                                     answer=rv.describe_answer(answer))
            counts = engine.counts()
            recorded = True
        except STORE_ERRORS:
            log.exception("could not record the review of %s", item.key)
            recorded = False
        return ReviewAnswer(item.key, item.kind, result, rv.RATING_NAMES[rating], schedule, counts, recorded)

    def review_rate(self, pack_id: str, key: str, rating: str, *, lang: str = "en") -> ReviewRated:
        """The learner says the right answer they just gave to ``key`` was hard (``"hard"``) or too
        easy (``"easy"``), or keeps it as it was rated (``"good"``): that same review is re-rated and
        the item re-scheduled (no review is added). Only the item just answered right, and only by
        its last review here."""
        from alignlings.practice import review as rv

        if rating not in rv.RERATINGS:
            raise UsageError("rating", f"expected one of {', '.join(rv.RERATINGS)}, got {rating!r}")
        engine = self.review()
        item = self.review_item(pack_id, key)
        self._refuse_if_locked(self.course.get(item.exercise), lang)  # the gate (:func:`gated`)
        schedule = counts = None
        try:
            schedule = engine.rerate(item, rv.RERATINGS[rating])
            counts = engine.counts()
            recorded = True
        except ValueError as exc:
            raise UsageError("item", str(exc)) from None
        except STORE_ERRORS:
            log.exception("could not re-rate the review of %s", item.key)
            recorded = False
        return ReviewRated(item.key, rating, schedule, counts, recorded)

    def mastery(self, lang: str = "en") -> list[dict]:
        return self.review().mastery(lang)

    # -- progress --------------------------------------------------------------------------------------
    def summary(self) -> Summary:
        """Per pack and per exercise: solved, attempts, hints, solution seen (since each reset)."""
        by_pack: dict[str, dict[str, dict]] = {}
        for part in self.course.packs:
            pid = part.id
            by_pack[pid] = self._read("progress", lambda: self.store.summary(pid), {})
        level_rows: dict[str, dict[str, dict]] = {}
        for part in self.course.packs:
            pid = part.id
            level_rows[pid] = self._read("level progress", lambda: self.store.level_summary(pid), {}) or {}
        rows = {}
        for ex in self.course:
            r = by_pack.get(ex.pack, {}).get(ex.id, {})
            solved_levels = sorted(int(k) for k, v in (level_rows.get(ex.pack, {}).get(ex.id) or {}).items()
                                   if v.get("solved"))
            rows[ex.key] = ExerciseProgress(ex.key, ex.id, ex.pack, ex.kind, ex.level, dict(ex.title),
                                            bool(r.get("solved")), int(r.get("attempts", 0)),
                                            int(r.get("hints", 0)), bool(r.get("revealed")), solved_levels,
                                            highest_level(ex, bool(r.get("solved")), solved_levels))
        packs = [PackProgress(part.id, dict(part.title), sum(1 for e in rows.values() if e.pack == part.id and e.solved),
                              sum(1 for e in rows.values() if e.pack == part.id)) for part in self.course.packs]
        return Summary(packs, rows, by_pack)

    def next_exercise(self, after: Exercise | None = None) -> Exercise | None:
        """What to do next, as rustlings says after a pass: the first unsolved exercise after ``after``
        in the course's track order, else the first unsolved one before it; None when all are solved."""
        return self.summary().next_exercise(self.course, after)

    def welcome(self) -> bool:
        """True the first time (and the welcome is marked as shown)."""
        first = bool(self._read("the welcome", self.store.is_first_run, False))
        if first:
            self._safely("the welcome", self.store.mark_welcomed)
        return first

    def export(self) -> dict:
        return self.store.export()

    def import_(self, data: Any, *, only_loaded: bool = False) -> dict:
        """Merge an export; with ``only_loaded``, ids must be the loaded course's. The review schedule
        is rebuilt at once. Bad data: UsageError."""
        from alignlings.practice.review import rebuild_after_import

        if not isinstance(data, dict):
            raise UsageError("data", "expected a JSON object (an alignlings progress export)")
        from alignlings.content import questionbank

        limits: dict[str, Any] = {}
        if only_loaded:
            limits = {"exercises": {ex.id for ex in self.course},
                      "questions": ({qid for ex in self.course for qid in ex.kind_spec.question_ids(ex)}
                                    | questionbank.course_question_ids(self.course)),
                      "packs": {p.id for p in self.course.packs}}
        settings = data.get("settings")
        if isinstance(settings, dict):  # a cloze draw is issued by the server, never imported
            data = {**data, "settings": {k: v for k, v in settings.items()
                                         if not (isinstance(k, str) and k.startswith("cloze_draws/"))}}
        try:
            counts = self.store.import_(data, **limits)
        except STORE_ERRORS:
            log.exception("could not import progress")
            raise StoreUnavailable("the progress database cannot be written now (busy or read-only); "
                                   "nothing was imported, try again") from None
        except (ValueError, KeyError, TypeError, OverflowError, RecursionError) as exc:
            raise UsageError("data", f"not an alignlings progress export: {exc}") from None
        counts.update(rebuild_after_import(self.store, self.course, data))
        return counts

    # -- the class (a teacher's view of the whole store) -----------------------------------------------
    def class_report(self, lang: str = "en") -> ClassReport:
        """Learners x exercises (status, attempts, hints, solution seen) and, per misconception, how
        many learners' attempts hit it; a few queries per pack, however many learners."""
        learners = self.store.learners()
        by_pack = {part.id: self.store.class_summaries(part.id) for part in self.course.packs}
        level_rows = {part.id: self.store.class_level_summaries(part.id) for part in self.course.packs}
        progress = []
        for learner in learners:
            for ex in self.course:
                row = by_pack.get(ex.pack, {}).get(learner["id"], {}).get(ex.id, {})
                lv = level_rows.get(ex.pack, {}).get(learner["id"], {}).get(ex.id, {})
                solved_levels = sorted(int(k) for k, v in lv.items() if v.get("solved"))
                progress.append({"learner": learner["id"], "name": learner["name"], "exercise": ex.key,
                                 "pack": ex.pack, "status": status_of(row), "attempts": int(row.get("attempts", 0)),
                                 "hints": int(row.get("hints", 0)), "solution_seen": bool(row.get("revealed")),
                                 "highest_level": highest_level(ex, bool(row.get("solved")), solved_levels)})
        return ClassReport(learners, progress, self._class_misconceptions(lang, {lr["id"] for lr in learners}))

    def _class_misconceptions(self, lang: str, learners: set[str]) -> list[dict]:
        by_key = {(ex.pack, ex.id): ex for ex in self.course}
        hits: dict[tuple[str, str, str], set[str]] = {}
        blanks: dict[tuple[str, str, str], int] = {}
        for part in self.course.packs:
            for attempt in self.store.class_attempt_blanks(part.id):
                if attempt["learner"] not in learners:
                    continue
                for b in attempt["blanks"]:
                    if b.get("misconception") and not b.get("passed"):
                        key = (part.id, attempt["exercise"], str(b["misconception"]))
                        hits.setdefault(key, set()).add(attempt["learner"])
                        if isinstance(b.get("index"), int):
                            blanks[key] = b["index"]
        out = []
        for (pack_id, ex_id, mid), who in hits.items():
            ex = by_key.get((pack_id, ex_id))
            if ex is None:  # an exercise no longer in the loaded packs
                continue
            m = next((m for m in ex.misconceptions if m.id == mid), None)
            blank = blanks.get((pack_id, ex_id, mid), m.blank if m else None)
            out.append({"misconception": mid, "exercise": ex.key, "pack": pack_id, "blank": blank,
                        "learners": len(who), "feedback": (m.feedback.get(lang) or m.feedback.get("en", "")) if m else "",
                        "url": f"/exercises/{ex.key}" + (f"#blank-{blank}" if blank else "")})
        out.sort(key=lambda r: (-r["learners"], r["exercise"], r["blank"] or 0, r["misconception"]))
        return out


__all__ = ["Practice", "UsageError", "StoreUnavailable", "Checked", "Started", "highest_level", "Hint", "HintState", "Reveal", "Reset", "QuizRound", "QuizAnswer", "PredictAsk", "PredictAnswer",
           "ClozeDraw", "ClozeChecked", "Summary", "ExerciseProgress", "PackProgress", "ReviewQueue", "ReviewAnswer", "ReviewRated",
           "ClassReport", "status_of"]
