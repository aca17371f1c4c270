"""Spaced review: what to practise again today, scheduled with FSRS, and mastery per concept.

Review items come from the packs' data, so a new exercise brings its items with it; each exercise's
kind says which (``Kind.review_items``), how one is asked (``review_prompt``) and judged
(``review_check``), so this module never branches on the kind of an exercise:

- ``cloze/EXERCISE/LINE``: a line of a cloze snippet, its worthwhile tokens masked together (a
  "position family"); introduced by the cloze drill.
- ``misconception/EXERCISE/ID``: a misconception the learner's fill once matched; the re-test is
  the blank where they made it, every other blank filled with the reference, in two variants that
  alternate from one review to the next (:func:`misconception_variant`): the empty blank, then the
  blank pre-filled with the misconceived fill to correct ("fix"). Both are graded by the grader's
  sandbox on the exercise's cases (the cases themselves are check.py's fixed ones).
- ``exercise/EXERCISE``: a solved exercise; the re-test is its hardest blank for this learner (the
  one they failed most, then the one with the most known misconceptions).
- ``quiz/QUESTION``: a quiz question once answered; a ``bug-or-not`` drill's two questions
  (``quiz/DRILL:verdict``, ``quiz/DRILL:reason``) are quiz questions too, asked as in the quiz.
- ``predict/QUESTION``: a predict item's question once answered, asked again like a quiz question;
  the answer brings the (cached) run's result, chart and explanation (``practice.predict``).
- ``bug/DRILL``: a ``bug`` drill once fixed; the re-test is the buggy file again, graded as a whole
  file by the grader's sandbox (``Grader.check(key, code)``), like the drill itself.
- ``level/EXERCISE``: the level-4 version of a fill-in exercise (``practice.levels``: write the body
  from the signature, the docstring and the steps), graded as a whole file at level 4. It is
  offered (:meth:`Review.level_offers`) once the learner fills the exercise reliably (its
  ``exercise/`` item's last :data:`RELIABLE_REVIEWS` reviews right), and an attempt at level 4
  (``alignlings check --level 4``) counts as a review of it.

An item enters the schedule when the learner's history first touches it, and every later event of
that history (a quiz answer, a cloze round, an attempt) counts as a review of it, replayed at its own
time. Reviews made here go to the progress store's ``review_log`` only, never back into the history
tables, so nothing is counted twice. The scheduler is FSRS (Ye et al., "A Stochastic Shortest Path
Algorithm for Optimizing Spaced Repetition Scheduling", KDD 2022; FSRS-6 through the maintained
``fsrs`` package), with the package's default parameters and 90% desired retention, and day-sized
steps: no intra-day learning steps (a new item answered once is scheduled in days), one relearning
step of a day (a lapse comes back the next day), and the package's fuzz on: an interval of 3 days or
more is moved by a few days at random (the package's fuzz ranges), and a first interval of 2 days
becomes 2 or 3 (the package leaves it alone, which brought a whole session's items back on day 2
together), so items learned together do not keep coming back together. The fuzz draws from a generator seeded per review with the item's key and
the review's time (:func:`fuzz_seed`), so replaying the same log, in any interface or after an export
and import, gives the same due dates.

Ratings (:func:`rate`): wrong = Again, right after a hint = Hard, right = Good; after a right answer
the learner may say it was hard or too easy (:meth:`Review.rerate`: the same log entry re-rated Hard
or Easy, the item re-scheduled).

Mastery of a concept is the weighted mean FSRS retrievability :data:`MASTERY_HORIZON_DAYS` (30) days from
now of the items tagged with it that the learner has met: "will you still know it next month?" (right
after a review every item's retrievability is 1, so "now" would hide a fresh lapse). Tags come from the pack: ``[concepts]`` in exercise.toml maps blank numbers to
tags, ``concepts = [...]`` on a misconception or a quiz question (a misconception defaults to its
blank's tags); names per language in the pack's ``texts/<lang>.toml`` ``[concepts]`` table. Each
item weighs its kind's ``mastery_weight``: a ``level/`` item (writing the body) 2
(``content.kinds.fill.LEVEL_WEIGHT``, as ``levels.WEIGHT[4]``), every other item 1.

Time comes from a :class:`Clock`, so tests run a learner over weeks with a :class:`FixedClock`.

Why one long module: the FSRS schedule, the replay of history into reviews and the item prompts and
checks must agree on one item model; the kinds say what differs (``Kind.review_items``), so what is
left here is shared by every kind.
"""

from __future__ import annotations

import copy
import json
import logging
import random
import re
import sys
import threading
import tomllib
import uuid as uuidlib
import weakref
import zlib
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import TYPE_CHECKING, Any, ClassVar

from alignlings.content import kinds
from alignlings.content.exercise import Exercise
from alignlings.content.pack import Pack, PackError

if TYPE_CHECKING:
    from alignlings.grading.grader import Grader
    from alignlings.practice.store import ProgressStore

AGAIN, HARD, GOOD, EASY = 1, 2, 3, 4  # fsrs.Rating values
RATING_NAMES = {AGAIN: "again", HARD: "hard", GOOD: "good", EASY: "easy"}
KINDS = tuple(kinds.REVIEW_ITEM_KINDS)  # item kinds: the one registry (practice.kinds)
RELIABLE_REVIEWS = 2  # an exercise item whose last reviews were this many right ones is filled reliably
RERATINGS = {"hard": HARD, "good": GOOD, "easy": EASY}  # what a right answer may be re-rated to
MAX_FILE_CHARS = 100_000  # a bug drill's answer is a whole file
DESIRED_RETENTION = 0.9  # the fsrs package's default
MASTERY_HORIZON_DAYS = 30
TAG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MAX_REVIEW_VARIANTS = 4  # draws of fresh inputs a misconception's re-test cycles through (each is a trusted run)
_log = logging.getLogger("alignlings.practice")
BANK = "bank:"  # a review item's ``exercise`` for a track's interview question (practice.questionbank.BANK)
_THIS = sys.modules[__name__]  # what the kinds' review hooks get (practice.kinds: they never import review)
_NS = uuidlib.UUID("4f1c2a7e-9d55-4b5e-a2f1-3c0de5a11a9e")  # history-derived reviews: uuid5 in this namespace


# -- time ----------------------------------------------------------------------------------------

class Clock:
    """Where "now" comes from. The system clock, in local time: a day ends at local midnight."""

    def now(self) -> datetime:
        return datetime.now().astimezone()


class FixedClock(Clock):
    """A clock that only moves when told (tests, simulations)."""

    def __init__(self, at: datetime):
        self.set(at)

    def set(self, at: datetime) -> None:
        if not isinstance(at, datetime) or at.tzinfo is None:
            raise ValueError(f"at: expected a timezone-aware datetime, got {at!r}")
        self._now = at

    def advance(self, **delta: float) -> datetime:
        """Move forward by ``timedelta(**delta)`` (e.g. ``days=1``); returns the new now."""
        step = timedelta(**delta)
        if step < timedelta(0):
            raise ValueError(f"delta: expected a forward step, got {step}")
        self._now += step
        return self._now

    def now(self) -> datetime:
        return self._now


CLOCK: Clock = Clock()  # what a Review uses when given none: tests (and the CLI's) set a FixedClock here


def _utc(value: str | datetime) -> datetime:
    dt = datetime.fromisoformat(value) if isinstance(value, str) else value
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc)


def end_of_day(now: datetime) -> datetime:
    """The next midnight in ``now``'s time zone: an item due before it is due today."""
    return (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)


# -- the scheduler -------------------------------------------------------------------------------

def _seeded_scheduler_class():
    import fsrs
    from fsrs.scheduler import FUZZ_RANGES

    class SeededScheduler(fsrs.Scheduler):
        """``fsrs.Scheduler`` whose fuzz draws from ``self.rng`` (a ``random.Random`` that
        :func:`replay` seeds per review) instead of the process-wide generator: the package's
        ranges and rounding, reproducible and thread-safe."""

        rng: random.Random | None = None

        def _get_fuzzed_interval(self, *, interval: timedelta) -> timedelta:
            if self.rng is None:  # not inside replay(): the package's own draw
                return super()._get_fuzzed_interval(interval=interval)
            days = interval.days
            if days < 2:  # a one-day step (a lapse's relearning) stays a day
                return interval
            if days < 2.5:
                # the package leaves intervals under 2.5 days alone, so every item learned in one
                # session came back on day 2 together (issue 22: 17 of 17); here they split over days 2 and 3
                return timedelta(days=2 + (self.rng.random() < 0.5))
            delta = 1.0
            for r in FUZZ_RANGES:
                delta += r["factor"] * max(min(float(days), r["end"]) - r["start"], 0.0)
            hi = min(round(days + delta), self.maximum_interval)
            lo = min(max(2, round(days - delta)), hi)
            fuzzed = self.rng.random() * (hi - lo + 1) + lo
            return timedelta(days=min(round(fuzzed), self.maximum_interval))

    return SeededScheduler


@lru_cache(maxsize=1)
def scheduler():
    """FSRS with day-sized steps and fuzz (see the module docstring)."""
    return _seeded_scheduler_class()(desired_retention=DESIRED_RETENTION, learning_steps=(),
                                     relearning_steps=(timedelta(days=1),), enable_fuzzing=True)


def _card_id(item: str) -> int:
    return zlib.crc32(item.encode()) + 1


def fuzz_seed(item: str, reviewed_at: str | datetime) -> int:
    """The seed of one review's fuzz: the item's key and the review's time (UTC, ISO 8601), so
    every replay of the same log draws the same intervals, whatever the interface or store."""
    return zlib.crc32(f"{item}\n{_utc(reviewed_at).isoformat()}".encode())


def replay(logs: list[dict]) -> tuple[str, str]:
    """An item's FSRS card after its reviews (oldest first): ``(card_json, due_iso)``."""
    import fsrs

    if not logs:
        raise ValueError("logs: expected at least one review")
    sched = copy.copy(scheduler())  # its own generator: replays in other threads draw their own
    card = fsrs.Card(card_id=_card_id(logs[0]["item"]), due=_utc(logs[0]["reviewed_at"]))
    for log in logs:
        sched.rng = random.Random(fuzz_seed(str(log["item"]), log["reviewed_at"]))
        card, _ = sched.review_card(card, fsrs.Rating(int(log["rating"])),
                                    review_datetime=_utc(log["reviewed_at"]),
                                    review_duration=log.get("duration_ms"))
    return card.to_json(), card.due.isoformat()


def retrievability(card_json: str, now: datetime) -> float:
    """FSRS's probability of recalling the item at ``now``."""
    import fsrs

    return float(scheduler().get_card_retrievability(fsrs.Card.from_json(card_json), _utc(now)))


def rate(correct: bool, *, hinted: bool = False, seconds: float | None = None) -> int:
    """The FSRS rating of one answer: Again if wrong, Hard after a hint, else Good. Speed does not
    make an answer Easy (a fast answer is not always an easy one): the learner says so afterwards
    (:meth:`Review.rerate`). ``seconds`` is validated here because the caller logs it as the
    review's duration."""
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0):
        raise ValueError(f"seconds: expected a non-negative number or None, got {seconds!r}")
    if not correct:
        return AGAIN
    return HARD if hinted else GOOD


# -- items from the pack's data ----------------------------------------------------------------

@dataclass(frozen=True)
class Item:
    key: str  # "cloze/dpo-loss/12", "misconception/dpo-loss/sum-not-mean", "exercise/dpo-loss", "quiz/bt-probability"
    kind: str
    pack: str  # the pack id (progress is keyed by pack and item)
    exercise: str  # the exercise's key in the loaded pack or course
    concepts: tuple[str, ...] = ()
    blank: int | None = None  # misconception items; exercise items get theirs from the learner's history
    line: int | None = None  # cloze items
    question: str | None = None  # quiz items
    misconception: str | None = None

    @property
    def uid(self) -> tuple[str, str]:
        return self.pack, self.key

    @property
    def kind_spec(self) -> kinds.ReviewItemKind:
        """What its kind of item is (how it is answered, weighed, re-tested), from the registry."""
        return kinds.review_item_kind(self.kind)


def _tags(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and TAG.match(v) for v in value):
        raise PackError(f"{where}: expected a list of concept tags like \"implicit-reward\" "
                        f"(lowercase words joined by '-'), got {value!r}")
    return tuple(value)


def blank_concepts(ex: Exercise) -> dict[int, tuple[str, ...]]:
    """``[concepts]`` of exercise.toml: blank number -> tags (``1 = ["implicit-reward"]``)."""
    if not ex.kind_spec.has_blanks:
        return {}
    table = ex.meta.get("concepts", {})
    where = f"{ex.path / 'exercise.toml'}: [concepts]"
    if not isinstance(table, dict):
        raise PackError(f"{where}: expected a table mapping blank numbers to lists of tags")
    from alignlings.content.blanks import find_blanks

    n = len(find_blanks(ex.solution_source))
    out = {}
    for key, tags in table.items():
        if not str(key).isdigit() or not 1 <= int(key) <= n:
            raise PackError(f"{where}: key {key!r} is not a blank number (1 to {n})")
        out[int(key)] = _tags(tags, f"{where} {key}")
    return out


def drill_concepts(ex: Exercise) -> tuple[str, ...]:
    """``concepts = [...]`` of a ``bug`` or ``bug-or-not`` drill's exercise.toml: the drill's tags
    (a bug-or-not drill's two questions share them); () for an exercise with blanks, whose
    ``[concepts]`` table maps blanks (:func:`blank_concepts`)."""
    if ex.kind_spec.has_blanks or "concepts" not in ex.meta:
        return ()
    return _tags(ex.meta["concepts"], f"{ex.path / 'exercise.toml'}: concepts")


def _raw(ex: Exercise, name: str, table: str) -> list[dict]:
    path = ex.path / name
    if not path.is_file():
        return []
    with path.open("rb") as f:
        return [t for t in tomllib.load(f).get(table, []) if isinstance(t, dict)]


def misconception_concepts(ex: Exercise) -> dict[str, tuple[str, ...]]:
    """misconception id -> its ``concepts``, else its blank's."""
    by_blank = blank_concepts(ex)
    raw = {str(m.get("id", f"m{i + 1}")): m for i, m in enumerate(_raw(ex, "misconceptions.toml", "misconception"))}
    out = {}
    for m in ex.misconceptions:
        given = raw.get(m.id, {}).get("concepts")
        out[m.id] = (_tags(given, f"{ex.path / 'misconceptions.toml'}: misconception {m.id!r} concepts")
                     if given is not None else by_blank.get(m.blank, ()))
    return out


def question_concepts(ex: Exercise) -> dict[str, tuple[str, ...]]:
    """question id -> ``concepts`` of quiz.toml's questions (the concept quiz)."""
    raw = {str(q.get("id", f"q{i + 1}")): q for i, q in enumerate(_raw(ex, "quiz.toml", "question"))}
    return {q.id: _tags(raw[q.id]["concepts"], f"{ex.path / 'quiz.toml'}: question {q.id!r} concepts")
            for q in ex.quiz if raw.get(q.id, {}).get("concepts") is not None}


def cloze_lines(ex: Exercise) -> dict[int, list]:
    """line -> the positions a review of that line masks: its tokens worth recalling (names,
    numbers, operators other than ``=``), or all of them where there is nothing else."""
    return _cloze_lines(ex.solution_source)


@lru_cache(maxsize=128)
def _cloze_lines(solution: str) -> dict[int, list]:
    from alignlings.content import blanks as bl
    from alignlings.practice import cloze as cz

    by_line: dict[int, list] = {}
    # the English snippet (cloze.snippet_source): the reference without its __main__ section
    for p in cz.maskable_positions(cz.strip_main(bl.reference(solution, bl.find_blanks(solution)))):
        by_line.setdefault(p.line, []).append(p)
    out = {}
    for line, positions in by_line.items():
        worth = [p for p in positions if cz.worth(p) >= 0.8]
        if worth:
            out[line] = worth
    return out


_catalogs: dict[int, tuple[weakref.ref, dict]] = {}


def catalog(pack: Pack) -> dict[tuple[str, str], Item]:
    """Every review item the loaded packs define, keyed by (pack id, item key); computed once
    per loaded pack object."""
    hit = _catalogs.get(id(pack))
    if hit is not None and hit[0]() is pack:
        return hit[1]
    out = _catalog(pack)
    _catalogs[id(pack)] = (weakref.ref(pack), out)
    return out


def _catalog(pack: Pack) -> dict[tuple[str, str], Item]:
    """Each exercise's kind says which items it brings (``Kind.review_items``, practice.kinds); each
    track's interview questions (``practice.questionbank``) are quiz items too, once answered."""
    from alignlings.content import questionbank as qb

    out = {item.uid: item for ex in pack for item in ex.kind_spec.review_items(_THIS, ex)}
    for track, (pack_id, questions, tags) in qb.course_banks(pack).items():
        for q in questions:
            item = Item(f"quiz/{q.id}", "quiz", pack_id, qb.BANK + track, tuple(tags.get(q.id, ())), question=q.id)
            out[item.uid] = item
    return out


# -- history -> reviews ------------------------------------------------------------------------

def _event(item: str, rating: int, at: str, source_uuid: str, source: str) -> dict:
    return {"uuid": str(uuidlib.uuid5(_NS, f"{source_uuid}/{item}")), "item": item, "rating": rating,
            "reviewed_at": at, "source": source}


def history_reviews(pack: Pack, part: str, sources: dict[str, list[dict]],
                    items_of: dict[tuple[str, str], Item] | None = None) -> list[dict]:
    """The reviews one pack's history implies (see the module docstring), with stable uuids."""
    known = items_of if items_of is not None else catalog(pack)
    items = {key: item for (p, key), item in known.items() if p == part}
    ids = {ex.id for ex in pack if ex.pack == part}
    out: list[dict] = []
    by_question = {item.question: key for key, item in items.items() if item.question is not None}
    for r in sources["quiz"]:  # answers to quiz, bug-or-not and predict questions (ids unique in a pack)
        key = by_question.get(str(r["question_id"]), "")
        if key in items:
            out.append(_event(key, GOOD if r["correct"] else AGAIN, r["created_at"], r["uuid"], "quiz"))
    rounds: dict[tuple[str, str, int], list[dict]] = {}
    for r in sources["cloze"]:
        number = str(r["key"]).split(":")[0]
        if number.isdigit() and f"cloze/{r['snippet']}/{number}" in items:
            rounds.setdefault((r["snippet"], r["created_at"], int(number)), []).append(r)
    for (snippet, at, line), rows in rounds.items():
        out.append(_event(f"cloze/{snippet}/{line}", GOOD if all(r["correct"] for r in rows) else AGAIN, at,
                          rows[0]["uuid"], "cloze"))
    hints: dict[str, list[tuple[str, str]]] = {}
    for e in sources["events"]:
        hints.setdefault(e["exercise"], []).append((e["created_at"], e["kind"]))
    window: dict[str, dict] = {}  # per exercise, since its last reset: attempts, hints, revealed, solved
    pending: set[str] = set()  # misconceptions hit and not yet fixed
    for a in sources["attempts"]:
        ex_id = a["exercise"]
        if a.get("level"):  # an attempt at level 4 or 5: a review of the level item, never of the fill-in
            if a["level"] == 4 and f"level/{ex_id}" in items and ex_id in ids:
                out.append(_event(f"level/{ex_id}", GOOD if a["passed"] else AGAIN, a["created_at"], a["uuid"],
                                  "attempt"))
            continue
        solved_key = next((k for k in (f"exercise/{ex_id}", f"bug/{ex_id}") if k in items), None)
        if ex_id not in ids or solved_key is None:
            continue
        marks = [(at, kind) for at, kind in hints.get(ex_id, []) if at < a["created_at"]]
        reset_at = max((at for at, kind in marks if kind == "reset"), default="")
        w = window.get(ex_id)
        if w is None or w["reset_at"] != reset_at:
            w = window[ex_id] = {"reset_at": reset_at, "attempts": 0, "solved": False}
        w["attempts"] += 1
        for b in a["blanks"]:
            if b.get("misconception"):
                key = f"misconception/{ex_id}/{b['misconception']}"
                if key in items:
                    out.append(_event(key, AGAIN, a["created_at"], a["uuid"], "attempt"))
                    pending.add(key)
            elif b.get("passed") is True:
                for key in sorted(k for k in pending if k.startswith(f"misconception/{ex_id}/")):
                    if items[key].blank == b.get("index"):
                        out.append(_event(key, GOOD, a["created_at"], a["uuid"], "attempt"))
                        pending.discard(key)
        if a["passed"] and not w["solved"]:
            w["solved"] = True
            since = [kind for at, kind in marks if at > reset_at]
            rating = AGAIN if "reveal" in since else HARD if "hint" in since else EASY if w["attempts"] == 1 else GOOD
            out.append(_event(solved_key, rating, a["created_at"], a["uuid"], "attempt"))
    return out


# -- the queue -----------------------------------------------------------------------------------

@dataclass
class Due:
    item: Item
    due: datetime
    retrievability: float
    reviews: int


@dataclass
class Review:
    """Reviews of one learner in one loaded pack or course, as of ``clock``."""

    store: ProgressStore
    pack: Pack
    clock: Clock = field(default_factory=lambda: CLOCK)

    def __post_init__(self):
        self._catalog = catalog(self.pack)
        self._mark: tuple | None = None
        self._lock = threading.Lock()

    # -- keeping the schedule in step with the history ----------------------------------------
    def sync(self) -> int:
        """Fold new history (and imported reviews) into the schedule; returns the reviews added."""
        from alignlings.practice.service import STORE_ERRORS

        mark = self.store.history_mark()
        if mark == self._mark:
            return 0
        added = 0
        with self._lock:
            try:
                for part in self.pack.packs:
                    rows = history_reviews(self.pack, part.id, self.store.review_sources(pack=part.id), self._catalog)
                    if rows:
                        added += self.store.record_reviews(rows, replay, pack=part.id)
                    self.store.refresh_review_states(replay, pack=part.id)
            except STORE_ERRORS:  # a store that cannot be written: the schedule as it was, retried next time
                _log.exception("could not fold the history into the review schedule")
                return added
            self._mark = self.store.history_mark()
        return added

    def _states(self) -> list[tuple[Item, dict]]:
        out = []
        for part in self.pack.packs:
            for key, state in self.store.review_states(pack=part.id).items():
                item = self._catalog.get((part.id, key))
                if item is not None:  # an item the pack no longer has keeps its log, off the queue
                    out.append((item, state))
        return out

    def item(self, pack_id: str, key: str) -> Item:
        try:
            return self._catalog[(pack_id, key)]
        except KeyError:
            raise ValueError(f"item: {pack_id}/{key} is not a review item of the loaded packs") from None

    def find(self, key: str) -> Item:
        """An item by ``KIND/...`` (the first pack that has it) or ``PACK:KIND/...`` (a bug-or-not
        question's key has a ':' of its own: ``quiz/DRILL:verdict``)."""
        pack_id, sep, rest = key.partition(":")
        if sep and "/" not in pack_id:
            return self.item(pack_id, rest)
        for part in self.pack.packs:
            if (part.id, key) in self._catalog:
                return self._catalog[(part.id, key)]
        raise ValueError(f"item: {key!r} is not a review item of the loaded packs")

    def queue(self, *, limit: int | None = None, concept: str | None = None) -> list[Due]:
        """Items due today (before the next midnight of the clock's time zone), most overdue first.
        With ``concept``: that concept's items met so far, due or not, least retrievable first."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"limit: expected a positive int or None, got {limit!r}")
        self.sync()
        now = self.clock.now()
        horizon = end_of_day(now)
        out = []
        for item, state in self._states():
            due = _utc(state["due"])
            if concept is not None:
                if concept not in item.concepts:
                    continue
            elif due >= horizon:
                continue
            out.append(Due(item, due, retrievability(state["card"], now), state["n_logs"]))
        for item in self.level_offers():  # never met: due now, nothing retained yet
            if concept is None or concept in item.concepts:
                out.append(Due(item, _utc(now), 0.0, 0))
        out.sort(key=(lambda d: (d.retrievability, d.due)) if concept is not None else (lambda d: (d.due, d.item.key)))
        return out[:limit] if limit else out

    def level_offers(self) -> list[Item]:
        """``level/`` items not met yet whose exercise the learner fills reliably: its ``exercise/``
        item's last :data:`RELIABLE_REVIEWS` reviews were right (Good or Easy)."""
        states = {(i.pack, i.key) for i, _ in self._states()}
        out = []
        for item, _ in self._states():
            # the level item's own rule, not a kind's field: it is offered through the exercise/ item
            # of the same exercise (both brought by the fill-in kind), once that one is reliable
            if item.kind != "exercise":
                continue
            level = self._catalog.get((item.pack, "level/" + item.key.split("/", 1)[1]))
            if level is None or level.uid in states:
                continue
            logs = self.store.review_log(pack=item.pack, item=item.key)[-RELIABLE_REVIEWS:]
            if len(logs) == RELIABLE_REVIEWS and all(r["rating"] >= GOOD for r in logs):
                out.append(level)
        return out

    def counts(self) -> dict:
        """``due`` today, ``items`` met so far, ``next``: when the first item after today comes
        (ISO 8601, or None)."""
        self.sync()
        now = self.clock.now()
        horizon = end_of_day(now)
        dues = [_utc(s["due"]) for _, s in self._states()]
        later = [d for d in dues if d >= horizon]
        return {"due": sum(d < horizon for d in dues), "items": len(dues),
                "next": min(later).isoformat() if later else None}

    def answer(self, item: Item, rating: int, *, duration_ms: int | None = None, answer: str = "") -> dict:
        """Record one review now; returns the item's new ``due`` and ``interval_days``."""
        if rating not in RATING_NAMES:
            raise ValueError(f"rating: expected 1 (again) to 4 (easy), got {rating!r}")
        self.sync()  # history before this review is folded in first: the log stays in time order
        now = _utc(self.clock.now())
        self.store.record_reviews([{"item": item.key, "rating": rating, "reviewed_at": now.isoformat(),
                                    "source": "review", "duration_ms": duration_ms, "answer": answer}],
                                  replay, pack=item.pack)
        state = self.store.review_states(pack=item.pack)[item.key]
        due = _utc(state["due"])
        return {"item": item.key, "rating": RATING_NAMES[rating], "due": due.isoformat(),
                "interval_days": round((due - now).total_seconds() / 86400, 2)}

    def rerate(self, item: Item, rating: int) -> dict:
        """The learner says their right answer to ``item`` was hard (:data:`HARD`) or too easy
        (:data:`EASY`), or takes that back (:data:`GOOD`): the rating of that same review (the
        item's last log row, made here, the last review made here in its pack, and right) is
        changed and the item re-scheduled; no review is added. Returns what :meth:`answer` returns.
        Anything else is refused with a ``ValueError``."""
        if rating not in (HARD, GOOD, EASY):
            raise ValueError(f"rating: expected 2 (hard), 3 (good) or 4 (easy), got {rating!r}")
        logs = self.store.review_log(pack=item.pack)
        mine = [r for r in logs if r["item"] == item.key]
        made_here = [r for r in logs if r["source"] == "review"]
        last = mine[-1] if mine else None
        if last is None or last["source"] != "review" or made_here[-1]["uuid"] != last["uuid"]:
            raise ValueError(f"item: {item.pack}/{item.key} is not the item just reviewed")
        if last["rating"] == AGAIN:
            raise ValueError(f"item: the last answer to {item.pack}/{item.key} was wrong; only a right answer is re-rated")
        if not self.store.rerate_review(last["uuid"], rating, replay, pack=item.pack):
            raise ValueError(f"item: the review of {item.pack}/{item.key} is gone")
        state = self.store.review_states(pack=item.pack)[item.key]
        due, at = _utc(state["due"]), _utc(last["reviewed_at"])
        return {"item": item.key, "rating": RATING_NAMES[rating], "due": due.isoformat(),
                "interval_days": round((due - at).total_seconds() / 86400, 2)}

    # -- mastery --------------------------------------------------------------------------------
    def mastery(self, lang: str = "en") -> list[dict]:
        """Per concept: ``mastery`` (mean retrievability in 30 days of its items met so far, None if none),
        ``items``, ``seen``, ``due``, ``title``, ``practise`` (a link); weakest first, concepts
        not started last."""
        self.sync()
        now = self.clock.now()
        horizon = end_of_day(now)
        states = {(i.pack, i.key): s for i, s in self._states()}
        rows: dict[str, dict] = {}
        for uid, item in self._catalog.items():
            for tag in item.concepts:
                row = rows.setdefault(tag, {"concept": tag, "items": 0, "seen": 0, "due": 0, "_r": [],
                                            "exercise": item.exercise, "kind": item.kind})
                row["items"] += 1
                state = states.get(uid)
                if state is not None:
                    row["seen"] += 1
                    weight = item.kind_spec.mastery_weight
                    row["_r"].append((weight, retrievability(state["card"], now + timedelta(days=MASTERY_HORIZON_DAYS))))
                    row["due"] += _utc(state["due"]) < horizon
        names = concept_names(self.pack, lang)
        out = []
        for tag, row in rows.items():
            r = row.pop("_r")
            exercise, _ = row.pop("exercise"), row.pop("kind")
            row["mastery"] = round(sum(w * x for w, x in r) / sum(w for w, _ in r), 4) if r else None
            row["title"] = names.get(tag, tag)
            if r:
                row["practise"] = f"/review?concept={tag}"
            elif exercise.startswith(BANK):  # a track's interview question: met in an interview
                row["practise"] = "/interview"
            else:
                ex = self.pack.get(exercise)
                row["practise"] = ex.kind_spec.practise_url(ex)
            out.append(row)
        out.sort(key=lambda r: (r["mastery"] is None, r["mastery"] or 0.0, r["concept"]))
        return out


def rebuild_after_import(store: ProgressStore, pack: Pack | None, data: dict) -> dict:
    """Bring the review schedule up to date right after an import (``alignlings progress --import``),
    so the states are not left to the next review: every imported pack's states are replayed from
    its review log, and with ``pack`` (the loaded packs) the imported history (quiz answers, cloze
    rounds, attempts) is folded in as reviews. Returns ``review_states`` (states recomputed) and
    ``history_reviews`` (reviews derived from the imported history; its items' states follow)."""
    if not isinstance(data, dict):
        raise ValueError(f"data: expected an export (a dict), got {type(data).__name__}")
    packs = {str(r["pack"]) for table in ("review_log", "attempts", "quiz_answers", "cloze")
             for r in data.get(table) or [] if isinstance(r, dict) and isinstance(r.get("pack"), str)}
    refreshed = sum(store.refresh_review_states(replay, pack=pid) for pid in sorted(packs))
    added = Review(store, pack).sync() if pack is not None else 0  # record_reviews refreshes what it touches
    return {"review_states": refreshed, "history_reviews": added}


def concept_names(pack: Pack, lang: str = "en") -> dict[str, str]:
    """tag -> name in ``lang``: the ``[concepts]`` table of each pack's texts/<lang>.toml."""
    out: dict[str, str] = {}
    for part in pack.packs:
        path = part.path / "texts" / f"{lang}.toml"
        if path.is_file():
            with path.open("rb") as f:
                table = tomllib.load(f).get("concepts", {})
            if isinstance(table, dict):
                out.update({str(k): str(v) for k, v in table.items()})
    return out


# -- presenting and grading one item ---------------------------------------------------------

def hardest_blank(ex: Exercise, attempts: list[dict]) -> int:
    """The blank this learner failed most (ties: most known misconceptions, then the later one)."""
    from alignlings.content.blanks import find_blanks

    blanks = find_blanks(ex.solution_source)
    failed = {b.index: 0 for b in blanks}
    for a in attempts:
        for b in (a.get("verdict") or {}).get("blanks") or []:
            if isinstance(b, dict) and b.get("passed") is False and b.get("index") in failed:
                failed[b["index"]] += 1
    known = {b.index: sum(m.blank == b.index for m in ex.misconceptions) for b in blanks}
    return max(failed, key=lambda i: (failed[i], known[i], i))


@dataclass(frozen=True)
class Prompt:
    """What the learner sees of a review item, without its answer; one subclass per way of asking
    (``form``), which the interfaces render by type."""

    item: str
    pack: str
    kind: str
    exercise: str
    title: str
    concepts: list[str]
    form: ClassVar[str] = ""

    def as_dict(self) -> dict[str, Any]:
        """The JSON the web app sends (``form`` included)."""
        return {**asdict(self), "form": self.form}


@dataclass(frozen=True)
class QuizPrompt(Prompt):
    question: str
    options: list[str]
    form: ClassVar[str] = "quiz"


@dataclass(frozen=True)
class PredictPrompt(QuizPrompt):
    """A predict question asked again: answered like a quiz question (``form`` "quiz"); the answer
    brings the (cached) run's result and the explanation."""

    statement: str = ""


@dataclass(frozen=True)
class ClozePrompt(Prompt):
    source: str
    line: int
    masked: list[dict]  # key, line, col, end_col of each masked token
    hints: list[str]  # the first character of each masked token
    rendered: str  # the source with the masks in place
    form: ClassVar[str] = "cloze"


@dataclass(frozen=True)
class BlankPrompt(Prompt):
    blank: int
    source: str  # the reference with every other blank filled, without its __main__ section
    line: int
    todo: str
    hint: str
    variant: str  # "blank" (write the fill) or "fix" (correct the misconceived fill in ``prefill``)
    prefill: str
    form: ClassVar[str] = "blank"


@dataclass(frozen=True)
class BugPrompt(Prompt):
    source: str  # the buggy file
    statement: str
    hint: str  # the neighbourhood of the bug, worded as the drill's own hint, without the line
    line: None = None
    form: ClassVar[str] = "bug"


def kind_of(pack: Pack, item: Item) -> Any:
    """The exercise kind that asks and judges ``item`` (``practice.kinds``): its exercise's, or the
    quiz's for a track's interview question."""
    from alignlings.content import kinds

    return kinds.get("quiz") if item.exercise.startswith(BANK) else pack.get(item.exercise).kind_spec


def present(review: Review, item: Item, lang: str = "en") -> Prompt:
    """What the learner sees for an item (no answers), as the exercise's kind asks it
    (``Kind.review_prompt``): a :class:`QuizPrompt` (:class:`PredictPrompt`), :class:`ClozePrompt`,
    :class:`BlankPrompt` (misconception and exercise items) or :class:`BugPrompt`."""
    if item.exercise.startswith(BANK):  # a track's interview question, asked as in the quiz
        from alignlings.content import questionbank as qb

        q = qb.bank_question(review.pack, item.exercise, item.question or "")[1]
        track = review.pack.track(item.exercise.removeprefix(BANK))
        return QuizPrompt(item.key, item.pack, item.kind, item.exercise, track.title.get(lang) or track.id,
                          list(item.concepts), question=q.question.get(lang, ""),
                          options=[o.text.get(lang, "") for o in q.options])
    ex = review.pack.get(item.exercise)
    base: dict[str, Any] = {"item": item.key, "pack": item.pack, "kind": item.kind, "exercise": item.exercise,
                            "title": ex.title.get(lang, ex.id), "concepts": list(item.concepts)}
    return ex.kind_spec.review_prompt(_THIS, review, item, base, lang)


def cloze_prompt(review: Review, item: Item, base: dict[str, Any], lang: str) -> ClozePrompt:
    from alignlings.practice import cloze as cz

    ex = review.pack.get(item.exercise)
    source = cz.snippet_source(ex, lang)
    masked = cloze_lines(ex)[item.line or 0]  # a cloze item always has its line
    return ClozePrompt(**base, source=source, line=item.line or 0,
                       masked=[{"key": p.key, "line": p.line, "col": p.col, "end_col": p.end_col} for p in masked],
                       hints=[p.token[0] for p in masked], rendered=cz.render(source, masked))


def blank_prompt(review: Review, item: Item, base: dict[str, Any], lang: str) -> BlankPrompt:
    """A misconception or exercise item: one blank of the reference, the others filled."""
    from alignlings.content import blanks as bl
    from alignlings.practice import cloze as cz

    ex = review.pack.get(item.exercise)
    blank = item.blank or hardest_blank(ex, review.store.attempts(ex.id, pack=ex.pack))
    variant = misconception_variant(review, item)
    blanks = bl.find_blanks(ex.solution_source)
    texts = ex.texts(lang)
    fills = {b.index: b.answer for b in blanks if b.index != blank}
    code = cz.strip_main(bl.render(ex.solution_source, blanks, fills,
                                   comments=texts.comments if lang != "en" else None))
    hints = texts.blank_hints[blank - 1] if len(texts.blank_hints) >= blank else ()
    prefill = next(m.fill for m in ex.misconceptions if m.id == item.misconception) if variant == "fix" else ""
    return BlankPrompt(**base, blank=blank, source=code, line=blanks[blank - 1].line,
                       todo=texts.blanks[blank - 1] if len(texts.blanks) >= blank else "",
                       hint=hints[0] if hints else "", variant=variant, prefill=prefill)


@dataclass(frozen=True)
class LevelPrompt(BugPrompt):
    """A ``level/`` item: the exercise's level-4 file (write each body), answered as a whole file like
    a bug drill's (``form`` "bug"); ``level`` is 4."""

    level: int = 4


def level_prompt(review: Review, item: Item, base: dict[str, Any], lang: str) -> LevelPrompt:
    from alignlings.grading import levels

    ex = review.pack.get(item.exercise)
    return LevelPrompt(**base, source=levels.level_file(ex, 4, lang), statement=levels.level_statement(ex, 4, lang),
                       hint="")


def check_level(review: Review, item: Item, answer: Any, grader: Grader, lang: str) -> dict:
    """A ``level/`` item's answer: the whole file, graded at level 4 (``levels.check_level``)."""
    from alignlings.content import blanks as bl
    from alignlings.grading import levels

    if not isinstance(answer, str):
        raise reject(answer, "the whole file (a string)")
    if not answer.strip() or len(answer) > MAX_FILE_CHARS:
        raise ValueError(f"answer: expected the whole file (1 to {MAX_FILE_CHARS} characters), got {len(answer)}")
    ex = review.pack.get(item.exercise)
    verdict = levels.check_level(grader, ex.key, answer, 4, lang=lang, run_main=False)
    failed = [c["message"] for c in verdict["cases"] if not c["passed"]]
    lines = ([verdict["misconception"]["message"]] if verdict.get("misconception") else []) + failed[:3]
    if verdict.get("error"):
        lines.insert(0, str(verdict["error"].get("message", ""))[:2000])
    return {"correct": verdict["passed"] is True, "feedback": "\n".join(lines),
            "expected": bl.reference(ex.solution_source, bl.find_blanks(ex.solution_source)),
            "misconception": (verdict.get("misconception") or {}).get("id"), "repeated": False,
            "diff": "", "failing": failed, "story": None, "wrong_fix": None}


def fresh_inputs(review: Review, item: Item) -> int:
    """Which draw of random inputs a re-test uses (``Grader.check(variant=...)``): a misconception's
    re-test gets other inputs at every review (1, 2, ..., :data:`MAX_REVIEW_VARIANTS`, then 1 again),
    so it is not passed by remembering the last run, while the grader's trusted runs and caches stay
    bounded; other items are graded on the exercise's own cases (0). Which items: their kind's
    ``fresh_inputs``."""
    if not item.kind_spec.fresh_inputs:
        return 0
    done = sum(r["source"] == "review" for r in review.store.review_log(pack=item.pack, item=item.key))
    return 1 + done % MAX_REVIEW_VARIANTS


def misconception_variant(review: Review, item: Item) -> str:
    """How a misconception's re-test is asked this time: "blank" (write the fill) on its 1st, 3rd,
    ... review here, "fix" (the misconceived fill is shown in the blank; correct it) on the 2nd,
    4th, ...; other items: "blank". Counted from the reviews made in review, not the history. Which
    items alternate: their kind's ``fresh_inputs``."""
    if not item.kind_spec.fresh_inputs:
        return "blank"
    done = sum(r["source"] == "review" for r in review.store.review_log(pack=item.pack, item=item.key))
    return "fix" if done % 2 else "blank"


def reject(value: Any, expected: str) -> ValueError:
    return ValueError(f"answer: expected {expected}, got {type(value).__name__} {str(value)[:60]!r}")


def check(review: Review, item: Item, answer: Any, *, grader: Grader | None = None, lang: str = "en") -> dict:
    """Judge an answer: ``correct``, ``feedback``, ``expected`` (and per-kind details), as the
    exercise's kind judges it (``Kind.review_check``).

    ``answer``: the option index for a quiz or predict item; ``{position key: text}`` for a cloze
    item (graded by :func:`alignlings.practice.cloze.check`); the fill for a blank, graded by the
    grader's sandbox (``Grader.check(..., fills=..., quick=True)``); the whole edited file for a bug
    drill, graded like the drill (``Grader.check(key, code)``: every case, the wrong fixes
    recognised): learner code never runs in this process.
    """
    if item.exercise.startswith(BANK):  # a track's interview question: judged as a quiz question
        from alignlings.content import questionbank as qb
        from alignlings.content.kinds.quiz import check_choice

        return check_choice(qb.bank_question(review.pack, item.exercise, item.question or "")[1], answer, lang)
    ex = review.pack.get(item.exercise)
    return ex.kind_spec.review_check(_THIS, review, item, answer, grader, lang)


def check_cloze(review: Review, item: Item, answer: Any, grader: Grader, lang: str) -> dict:
    from alignlings.practice import cloze as cz

    if not isinstance(answer, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in answer.items()):
        raise reject(answer, "a {position key: text} mapping")
    ex = review.pack.get(item.exercise)
    source = cz.snippet_source(ex, lang)
    masked = cloze_lines(ex)[item.line or 0]  # a cloze item always has its line
    results = cz.check(ex, source, masked, answer, grader)
    return {"correct": all(r["correct"] for r in results), "results": results,
            "expected": " ".join(r["token"] for r in results), "feedback": ""}


def check_blank(review: Review, item: Item, answer: Any, grader: Grader, lang: str) -> dict:
    from alignlings.content import blanks as bl

    if not isinstance(answer, str):
        raise reject(answer, "the blank's code (a string)")
    if "\n" in answer.strip():
        raise ValueError("answer: a blank's fill must fit on one line")
    ex = review.pack.get(item.exercise)
    shown = present(review, item, lang)
    assert isinstance(shown, BlankPrompt)  # misconception and exercise items are asked as a blank
    blank = shown.blank
    blanks = bl.find_blanks(ex.solution_source)
    fills = [answer if b.index == blank else b.answer for b in blanks]
    verdict: Any = grader.check(ex.key, fills=fills, lang=lang, quick=True, run_main=False,
                                variant=fresh_inputs(review, item))
    entry: dict[str, Any] = next((b for b in verdict.get("blanks", []) if b.get("index") == blank), {})
    correct = entry.get("passed") is True
    feedback = entry.get("message") or ""
    if not correct and not entry and verdict.get("error"):
        feedback = str(verdict["error"].get("message", ""))[:2000]
    return {"correct": correct, "blank": blank, "expected": blanks[blank - 1].answer, "feedback": feedback,
            "misconception": entry.get("misconception"),
            "repeated": bool(item.misconception and entry.get("misconception") == item.misconception)}


def check_bug(ex: Exercise, answer: Any, grader: Grader | None, lang: str) -> dict:
    from alignlings.content import bugdrill

    if grader is None:
        raise ValueError("grader: a code item is graded in the sandbox; pass a Grader")
    if not isinstance(answer, str):
        raise reject(answer, "the edited file (a string)")
    if not answer.strip() or len(answer) > MAX_FILE_CHARS:
        raise ValueError(f"answer: expected the edited file (1 to {MAX_FILE_CHARS} characters), got {len(answer)}")
    verdict: Any = grader.check(ex.key, answer, lang=lang, run_main=False)
    info = verdict.get("bug") or {}
    feedback = "\n".join(bugdrill.verdict_lines(verdict, lang))
    if not info and verdict.get("error"):
        feedback = str(verdict["error"].get("message", ""))[:2000]
    return {"correct": verdict["passed"] is True, "feedback": feedback,
            "expected": bugdrill.unified_diff(ex.buggy_source, ex.solution_source),
            "diff": info.get("diff", ""), "wrong_fix": info.get("wrong_fix"), "failing": info.get("failing", []),
            "story": info.get("story") if verdict["passed"] else None, "repeated": False}


_reject = reject  # the old private name
_check_bug = check_bug


def schedule_row(review: Review, item: Item) -> list[dict]:
    """The item's reviews so far: ``day`` (from its first), ``rating``, ``next_due`` (as of that review)."""
    logs = review.store.review_log(pack=item.pack, item=item.key)
    out = []
    for i in range(len(logs)):
        _, due = replay(logs[: i + 1])
        first = _utc(logs[0]["reviewed_at"])
        at = _utc(logs[i]["reviewed_at"])
        out.append({"day": (at - first).days, "at": at.isoformat(), "rating": RATING_NAMES[logs[i]["rating"]],
                    "next_due": due, "next_due_day": (_utc(due) - first).days, "source": logs[i]["source"]})
    return out


def describe_answer(answer: Any) -> str:
    """An answer as text for the review log."""
    return answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)


__all__ = ["AGAIN", "HARD", "GOOD", "EASY", "Clock", "FixedClock", "Item", "Review", "catalog", "check",
           "present", "Prompt", "QuizPrompt", "PredictPrompt", "ClozePrompt", "BlankPrompt", "BugPrompt", "rate", "replay", "concept_names", "history_reviews", "schedule_row"]
