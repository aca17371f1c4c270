"""A mock interview: a few items drawn across the learner's tracks, answered under a clock.

An interview is drawn from a seed, so the same seed over the same course gives the same items (a
teacher hands a class one seed with a due date). The default set asks the way an interview does:
three concept questions (the concept quizzes' questions), one exercise to write at level 4 or 5,
one bug (a spot-the-bug drill's file, or a bug-or-not question) and one predict question. A slot the
chosen tracks cannot fill is drawn from the rest of the course, and the interview says so.

While it runs (until it is finished or its clock runs out) the learner gets no hints, no solutions
and no cloze drill (``Practice`` refuses them with the interview's reason). A choice is final once
made; a file may be submitted again until the end (the last submission counts), as one would run
one's code in an interview. Nothing is judged in front of the learner while the clock runs except
whether a submitted file passes; the report at the end gives every item's verdict, its feedback,
the misconceptions shown, the time spent on it, and what to review next.

Every answer is also recorded where the same answer outside an interview would be (quiz answers,
attempts), so it counts toward progress and enters spaced review the same way: a wrong answer's
item comes back the next day (``practice.review``).

State lives in the learner's settings (``interview/current`` and ``interview/<id>``), so it is kept
with the rest of their progress, exported, imported and seen by the teacher; a teacher's class
interviews (seed, minutes, track, due) live in the class's own table (``class_info``).

Why one long module: the draw, the report and the class results are pure functions of the same
interview state, and the use cases that change that state are the mixin at the end; keeping them
together keeps the state's format in one place.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from alignlings.practice.errors import UsageError

if TYPE_CHECKING:
    from alignlings.content.exercise import Exercise
    from alignlings.content.pack import Pack

BANK = "bank:"  # an item's ``exercise`` for a track's interview question: ``bank:PACK/TRACK`` (questionbank.BANK)
CURRENT_KEY = "interview/current"
KEY_PREFIX = "interview/iv-"
CLASS_PREFIX = "interview/"
SLOTS = ("concept", "write", "bug", "predict")
"""What an item asks: a concept question, an exercise to write, a bug to find, a run to predict."""
DEFAULT_PLAN = ("concept", "write", "bug", "predict", "concept", "concept")
"""The default set, in the order it is asked: mixed, so that ``items=3`` still asks three kinds."""
DEFAULT_MINUTES = 45
MAX_MINUTES = 240
MAX_ITEMS = 12
LEVELS = (4, 5)


def InterviewError(argument: str, message: str, *, missing: bool = False) -> ValueError:
    """Bad input to an interview: the session's ``UsageError`` naming ``argument``."""
    return UsageError(argument, message, missing=missing)


@dataclass(frozen=True)
class Spec:
    """What an interview is drawn from: ``seed``, ``minutes``, ``track`` (a track key or None for the
    learner's tracks), ``items`` (how many, from the default plan) and ``level`` (4 or 5, or None:
    drawn)."""

    seed: int
    minutes: int = DEFAULT_MINUTES
    track: str | None = None
    items: int = len(DEFAULT_PLAN)
    level: int | None = None

    @staticmethod
    def checked(seed: Any = None, minutes: Any = DEFAULT_MINUTES, track: Any = None, items: Any = None,
                level: Any = None) -> Spec:
        if seed is None:
            seed = secrets.randbelow(2**31)
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
            raise InterviewError("seed", f"expected a non-negative integer, got {seed!r}")
        if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= MAX_MINUTES:
            raise InterviewError("minutes", f"expected a whole number of minutes from 1 to {MAX_MINUTES}, "
                                            f"got {minutes!r}")
        if items is None:
            items = len(DEFAULT_PLAN)
        if isinstance(items, bool) or not isinstance(items, int) or not 1 <= items <= MAX_ITEMS:
            raise InterviewError("items", f"expected 1 to {MAX_ITEMS}, got {items!r}")
        if level is not None and level not in LEVELS:
            raise InterviewError("level", f"expected 4 or 5, got {level!r}")
        if track is not None and (not isinstance(track, str) or not track.strip()):
            raise InterviewError("track", f"expected a track id, got {track!r}")
        return Spec(seed, minutes, track or None, items, level)


def _plan(n: int) -> list[str]:
    """``n`` slots: the default plan, repeated past its end."""
    return [DEFAULT_PLAN[i % len(DEFAULT_PLAN)] for i in range(n)]


def writable(ex: Exercise) -> bool:
    """An exercise that can be asked at levels 4 and 5: a fill-in exercise whose reference has a
    function to write (a toy training run is a task, not an interview question)."""
    from alignlings.grading import levels

    return levels.has_levels(ex) and ex.timeout <= 15


def _candidates(slot: str, course: Pack, keys: list[str]) -> list[tuple[str, str | None]]:
    """(exercise key or ``BANK`` + track key, question id or None) that can fill ``slot``, in course order."""
    from alignlings.content import questionbank

    out: list[tuple[str, str | None]] = []
    if slot == "concept":  # the track's interview questions first, then the concept quizzes'
        in_keys = set(keys)
        for track in course.tracks:
            questions = questionbank.course_banks(course).get(track.key, ("", (), {}))[1]
            if in_keys.intersection(track.exercises) or (not track.exercises and track.key in in_keys):
                out += [(BANK + track.key, q.id) for q in questions]
    for key in keys:
        ex = course.exercises[key]
        spec = ex.kind_spec
        if slot == "concept" and spec.on_quiz_page:
            out += [(key, q.id) for q in ex.quiz]
        elif slot == "write" and writable(ex):
            out.append((key, None))
        elif slot == "bug" and spec.starts_from_buggy_file:
            out.append((key, None))
        elif slot == "bug" and spec.answered_by_choice and not spec.on_quiz_page and not spec.first_answer_counts:
            out += [(key, q.id) for q in ex.quiz]  # bug-or-not: is there a bug, and why
        elif slot == "predict" and spec.first_answer_counts:
            out += [(key, q.id) for q in ex.predict]
    return out


def track_keys(course: Pack, track: str | None, open_tracks: set[str] | None = None) -> list[str]:
    """The exercise keys an interview draws from first: one track (by key ``pack/id`` or id), else the
    tracks open to this learner (every track where ``open_tracks`` is None)."""
    if track is not None:
        found = [t for t in course.tracks if track in (t.key, t.id)]
        if not found:
            ids = ", ".join(t.key for t in course.tracks)
            raise InterviewError("track", f"no track {track!r} in this course (tracks: {ids})")
        return list(found[0].exercises)
    return [k for t in course.tracks if open_tracks is None or t.key in open_tracks for k in t.exercises]


def draw(course: Pack, spec: Spec, open_tracks: set[str] | None = None) -> list[dict]:
    """The items of an interview: each ``{"slot", "exercise", "question", "level", "from_track"}``.

    Reproducible: the same course, spec and open tracks give the same items. No item is asked twice.
    ``from_track`` is False where the slot was filled from outside the chosen tracks."""
    rng = random.Random(spec.seed)
    first = track_keys(course, spec.track, open_tracks)
    rest = [k for k in track_keys(course, None, open_tracks) if k not in first]
    taken: set[tuple[str, str | None]] = set()
    items = []
    for slot in _plan(spec.items):
        for pool, inside in ((first, True), (rest, False)):
            options = [c for c in _candidates(slot, course, pool) if c not in taken]
            if options:
                key, qid = options[rng.randrange(len(options))]
                taken.add((key, qid))
                level = (spec.level or rng.choice(LEVELS)) if slot == "write" else None
                items.append({"slot": slot, "exercise": key, "question": qid, "level": level, "from_track": inside})
                break
    if not items:
        raise InterviewError("track", "nothing in this course can be asked in an interview")
    return items


# -- state -------------------------------------------------------------------------------------------

def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="seconds")


def parse(ts: str) -> datetime:
    dt = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def new_state(spec: Spec, items: list[dict], *, assignment: str | None, started: datetime) -> dict:
    return {"id": f"iv-{secrets.token_hex(6)}", "seed": spec.seed, "minutes": spec.minutes, "track": spec.track,
            "level": spec.level, "n_items": spec.items, "assignment": assignment, "items": items,
            "started_at": iso(started), "deadline": iso(started + timedelta(minutes=spec.minutes)),
            "finished_at": None, "answers": {}}


def seconds_left(state: dict, now: datetime) -> int:
    if state.get("finished_at"):
        return 0
    return max(0, int((parse(state["deadline"]) - now).total_seconds()))


def running(state: dict | None, now: datetime) -> bool:
    if not state or state.get("finished_at"):
        return False
    return seconds_left(state, now) > 0


def time_spent(state: dict) -> dict[int, int]:
    """Item index -> seconds: from the previous answer (or the start) to this item's last answer."""
    marks = sorted((parse(a["answered_at"]), int(i)) for i, a in state["answers"].items())
    out, last = {}, parse(state["started_at"])
    for at, i in marks:
        out[i] = max(0, int((at - last).total_seconds()))
        last = max(last, at)
    return out


def question_of(course: Pack, item: dict) -> tuple[str, Any]:
    """(pack id, the question) of a question item: a track's interview question or an exercise's."""
    from alignlings.content import questionbank

    key, qid = item["exercise"], item["question"]
    if key.startswith(BANK):
        try:
            return questionbank.bank_question(course, key, qid)
        except KeyError:
            raise InterviewError("question", f"{key!r} has no question {qid!r}") from None
    else:
        ex = course.exercises[key]
        pack_id, questions = ex.pack, (ex.predict if ex.kind_spec.first_answer_counts else ex.quiz)
    for q in questions:
        if q.id == qid:
            return pack_id, q
    raise InterviewError("question", f"{key!r} has no question {qid!r}")


def review_key(item: dict, course: Pack) -> str | None:
    """The spaced-review item an interview item feeds (``practice.review``'s keys)."""
    if item["exercise"].startswith(BANK):
        return f"quiz/{item['question']}"
    ex = course.exercises.get(item["exercise"])
    if ex is None:
        return None
    if item["question"]:
        return f"{'predict' if ex.kind_spec.first_answer_counts else 'quiz'}/{item['question']}"
    if item["slot"] == "bug":
        return f"bug/{ex.id}"
    return f"level/{ex.id}" if item["level"] else f"exercise/{ex.id}"


def practise_command(item: dict, course: Pack) -> str:
    """The command that practises an item again outside an interview."""
    key = item["exercise"]
    if key.startswith(BANK):
        return f"alignlings interview --track {key.removeprefix(BANK)}"
    ex = course.exercises.get(key)
    if ex is None:
        return "alignlings list"
    if item["level"]:
        return f"alignlings start {ex.key} --level {item['level']}"
    if item["question"]:
        return f"alignlings predict {ex.key}" if ex.kind_spec.first_answer_counts else f"alignlings quiz {ex.key}"
    return f"alignlings start {ex.key}"


def report(state: dict, course: Pack, lang: str, met: set[tuple[str, str]] | None = None) -> dict:
    """The interview's report: each item with its verdict, feedback, misconceptions and time; the
    score; what is now in the learner's spaced review (``review_next``: the items answered wrong or
    left unanswered that have a schedule; ``met`` says which, None: all) and what to practise again
    (``practise_next``: the others, each with its command)."""
    spent = time_spent(state)
    rows = []
    for i, item in enumerate(state["items"]):
        answer = state["answers"].get(str(i))
        rows.append({
            "index": i, "slot": item["slot"], "exercise": item["exercise"], "question": item["question"],
            "level": item["level"], "title": item_title(item, course, lang), "file": not item["question"],
            "answered": answer is not None, "correct": bool(answer and answer.get("correct")),
            "feedback": (answer or {}).get("feedback", {}).get(lang) or (answer or {}).get("feedback", {}).get("en", ""),
            "misconceptions": list((answer or {}).get("misconceptions", [])),
            "seconds": spent.get(i), "review": review_key(item, course),
        })
    right = sum(1 for r in rows if r["correct"])
    to_review, to_practise = [], []
    for item, r in zip(state["items"], rows, strict=True):
        if r["correct"]:
            continue
        if r["review"] and (met is None or (_pack_of(item, course), r["review"]) in met):
            to_review.append(r["review"])
        else:
            to_practise.append(practise_command(item, course))
    return {"id": state["id"], "seed": state["seed"], "minutes": state["minutes"], "track": state["track"],
            "assignment": state.get("assignment"), "started_at": state["started_at"],
            "finished_at": state.get("finished_at"), "items": rows, "right": right, "total": len(rows),
            "review_next": list(dict.fromkeys(to_review)), "practise_next": list(dict.fromkeys(to_practise))}


def _pack_of(item: dict, course: Pack) -> str:
    if item["question"]:
        try:
            return question_of(course, item)[0]
        except ValueError:
            return ""
    ex = course.exercises.get(item["exercise"])
    return ex.pack if ex else ""


def item_title(item: dict, course: Pack, lang: str) -> str:
    """What the item asks, in a line: the question's text, or the exercise's title."""
    if item["question"]:
        try:
            q = question_of(course, item)[1]
        except (KeyError, ValueError):  # no longer in the loaded packs
            return item["question"]
        return q.question.get(lang) or q.question.get("en", q.id)
    ex = course.exercises.get(item["exercise"])
    return (ex.title.get(lang) or ex.title.get("en", ex.id)) if ex else item["exercise"]


# -- the learner's use cases (mixed into ``practice.session.Practice``) ---------------------------------

_TEXT = {
    "en": {"running": "an interview is running ({left} left): hints, solutions and the cloze drill come back "
                      "when it ends (`alignlings interview --stop` ends it now)",
           "no_interview": "no interview is running: start one with `alignlings interview`",
           "time_up": "the interview's time is up",
           "choice_final": "item {n} was already answered: a choice is final",
           "answer_kind": "item {n} is answered with {what}",
           "an_option": "an option number", "a_file": "a file (code)",
           "chosen": "You chose: {option}", "right_was": "The right answer: {option}",
           "passed": "Every case passes.", "failed": "{n} of {total} cases fail: {names}"},
    "zh": {"running": "模拟面试进行中（剩余 {left}）：提示、参考答案和完形填空在面试结束后恢复"
                      "（`alignlings interview --stop` 可立即结束）",
           "no_interview": "当前没有进行中的面试：用 `alignlings interview` 开始一场",
           "time_up": "面试时间已到",
           "choice_final": "第 {n} 题已作答：选择一经提交不可更改",
           "answer_kind": "第 {n} 题的作答方式是{what}",
           "an_option": "选项编号", "a_file": "提交文件（代码）",
           "chosen": "你的选择：{option}", "right_was": "正确答案：{option}",
           "passed": "全部用例通过。", "failed": "{total} 个用例中 {n} 个未通过：{names}"},
}


def text(lang: str, key: str, **kw: Any) -> str:
    table = _TEXT.get(lang, _TEXT["en"])
    return table[key].format(**kw)


def clock(seconds: int) -> str:
    """``mm:ss`` (``h:mm:ss`` past an hour)."""
    h, rest = divmod(max(0, seconds), 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class InterviewMixin:
    """The interview's use cases on ``Practice`` (who: the store's learner; may they: an interview
    runs, its clock has not run out, the item takes this kind of answer; act: grade; record: the
    interview's state and the answer where it always goes)."""

    store: Any
    course: Pack
    source: str
    if TYPE_CHECKING:  # what Practice gives the mixin
        def _safely(self, what: str, fn: Any) -> bool: ...
        def track_locks(self, lang: str = "en") -> dict[str, str]: ...
        def check(self, ex: Exercise, *, code: str | None = None, fills: list[str] | None = None,
                  lang: str = "en", run_main: bool = True, level: int | None = None) -> Any: ...
        def review(self) -> Any: ...

    # -- state ---------------------------------------------------------------------------------------
    def _interview_now(self) -> datetime:
        return now_utc()

    def _interview_load(self, interview_id: str) -> dict | None:
        value = self.store.get_setting(f"interview/{interview_id}")
        return value if isinstance(value, dict) else None

    def _interview_save(self, state: dict) -> None:
        self.store.set_setting(f"interview/{state['id']}", state)

    def interview_current(self) -> dict | None:
        """The learner's interview that is running, or None. One whose clock ran out is finished
        here (at its deadline), so every interface sees the same end."""
        current = self.store.get_setting(CURRENT_KEY)
        state = self._interview_load(current) if isinstance(current, str) else None
        if state is None or state.get("finished_at"):
            return None
        if not running(state, self._interview_now()):
            state["finished_at"] = state["deadline"]
            self._interview_save(state)
            return None
        return state

    def interview_refusal(self, lang: str = "en") -> str | None:
        """Why hints, solutions and the cloze drill are refused now (an interview runs), or None."""
        state = self.interview_current()
        if state is None:
            return None
        return text(lang, "running", left=clock(seconds_left(state, self._interview_now())))

    def interview_start(self, *, seed: Any = None, minutes: Any = DEFAULT_MINUTES, track: Any = None,
                        items: Any = None, level: Any = None, assignment: str | None = None,
                        lang: str = "en") -> dict:
        """Draw and start an interview (a class interview by its ``assignment`` id takes the teacher's
        seed, minutes, track and size). One runs at a time: a running one is returned as it is."""
        running_now = self.interview_current()
        if running_now is not None:
            return self.interview_view(lang)
        if assignment is not None:
            given = next((a for a in self.class_interviews() if a["id"] == assignment), None)
            if given is None:
                raise InterviewError("assignment", f"no class interview {assignment!r}", missing=True)
            seed, minutes, track, items, level = (given["seed"], given["minutes"], given["track"], given["items"],
                                                  given.get("level"))
        spec = Spec.checked(seed, minutes, track, items, level)
        open_tracks: set[str] | None = None  # a class interview: the same items for everyone
        if assignment is None:
            locks = self.track_locks(lang)
            open_tracks = {t.key for t in self.course.tracks if t.key not in locks}
        drawn = draw(self.course, spec, open_tracks)
        state = new_state(spec, drawn, assignment=assignment, started=self._interview_now())
        self._interview_save(state)
        self.store.set_setting(CURRENT_KEY, state["id"])
        return self.interview_view(lang)

    def interview_view(self, lang: str = "en", interview_id: str | None = None) -> dict:
        """What the learner sees while it runs: the clock and each item as asked (the question and its
        options, or the file to start from), whether it was answered, and for a file whether its last
        submission passed. Nothing of a choice's correctness before the end."""
        state = self._interview_load(interview_id) if interview_id else self.interview_current()
        if state is None:
            raise InterviewError("interview", text(lang, "no_interview"))
        now = self._interview_now()
        out = []
        for i, item in enumerate(state["items"]):
            answer = state["answers"].get(str(i))
            row: dict[str, Any] = {"index": i, "slot": item["slot"], "exercise": item["exercise"],
                                   "question": item["question"], "level": item["level"],
                                   "title": item_title(item, self.course, lang), "answered": answer is not None}
            if item["question"]:
                q = question_of(self.course, item)[1]
                ex = self.course.exercises.get(item["exercise"])
                predict = ex is not None and ex.kind_spec.first_answer_counts
                row.update(kind="choice", prompt=q.question.get(lang) or q.question.get("en", ""),
                           options=[o.text.get(lang) or o.text.get("en", "") for o in q.options],
                           statement=ex.texts(lang).statement if predict else "",  # type: ignore[union-attr]
                           chosen=answer.get("answer") if answer else None)
            else:
                ex = self.course.exercises[item["exercise"]]
                row.update(kind="file", statement=ex.texts(lang).statement,
                           start=interview_file(ex, item, lang),
                           code=answer.get("answer") if answer else None,
                           passed=bool(answer.get("correct")) if answer else None,
                           summary=(answer.get("summary", {}).get(lang, "") if answer else ""))
            out.append(row)
        return {"id": state["id"], "seed": state["seed"], "minutes": state["minutes"], "track": state["track"],
                "assignment": state.get("assignment"), "started_at": state["started_at"],
                "deadline": state["deadline"], "seconds_left": seconds_left(state, now),
                "finished": bool(state.get("finished_at")), "items": out}

    def interview_answer(self, index: Any, *, choice: Any = None, code: Any = None, lang: str = "en") -> dict:
        """Answer item ``index``: an option's index for a question (final), or the file's code
        (graded in the sandbox; may be sent again until the end). Returns the item as now seen."""
        state = self.interview_current()
        if state is None:
            raise InterviewError("interview", text(lang, "no_interview"))
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(state["items"]):
            raise InterviewError("item", f"expected an item number 1..{len(state['items'])}, got {index!r}")
        item = state["items"][index]
        key = str(index)
        if item["question"]:
            if code is not None or choice is None:
                raise InterviewError("choice", text(lang, "answer_kind", n=index + 1, what=text(lang, "an_option")))
            if key in state["answers"]:
                raise InterviewError("item", text(lang, "choice_final", n=index + 1))
            pack_id, q = question_of(self.course, item)
            # the exercise that asks it ('' for a track's interview question: its id is unique in the pack)
            asker = "" if item["exercise"].startswith(BANK) else self.course.exercises[item["exercise"]].id
            if isinstance(choice, bool) or not isinstance(choice, int) or not 0 <= choice < len(q.options):
                raise InterviewError("choice", f"expected 0..{len(q.options) - 1}, got {choice!r}")
            correct = choice == q.answer
            self._safely(f"an interview answer to {q.id}",
                         lambda: self.store.record_quiz_answer(q.id, choice, correct, pack=pack_id, exercise=asker))
            feedback = {lg: _choice_feedback(q, choice, lg) for lg in _TEXT}
            misconceptions = [] if correct else [q.options[choice].why.get("en", "")]
            entry = {"answer": choice, "correct": correct, "feedback": feedback, "misconceptions": misconceptions}
        else:
            if choice is not None or not isinstance(code, str):
                raise InterviewError("code", text(lang, "answer_kind", n=index + 1, what=text(lang, "a_file")))
            ex = self.course.exercises[item["exercise"]]
            level = item["level"] if not ex.kind_spec.starts_from_buggy_file else None
            checked = self.check(ex, code=code, lang=lang, level=level)
            verdict = checked.verdict
            entry = {"answer": code, "correct": bool(verdict["passed"]),
                     "feedback": {lg: _verdict_feedback(verdict, lg) for lg in _TEXT},
                     "summary": {lg: _verdict_summary(verdict, lg) for lg in _TEXT},
                     "misconceptions": _verdict_misconceptions(ex, verdict)}
        entry["answered_at"] = iso(self._interview_now())
        state = self._interview_load(state["id"]) or state  # a file's check takes seconds: re-read
        state["answers"][key] = entry
        self._interview_save(state)
        return self.interview_view(lang, state["id"])["items"][index]

    def interview_finish(self, lang: str = "en") -> dict:
        """End the running interview now and return its report."""
        state = self.interview_current()
        if state is None:
            last = self.store.get_setting(CURRENT_KEY)
            state = self._interview_load(last) if isinstance(last, str) else None
            if state is None:
                raise InterviewError("interview", text(lang, "no_interview"))
            return report(state, self.course, lang, self._interview_met())
        state["finished_at"] = iso(self._interview_now())
        self._interview_save(state)
        return report(state, self.course, lang, self._interview_met())

    def interview_report(self, interview_id: str | None = None, lang: str = "en") -> dict:
        """The report of one interview (default: the latest); an interview still running has none."""
        if interview_id is None:
            interview_id = self.store.get_setting(CURRENT_KEY)
        state = self._interview_load(interview_id) if isinstance(interview_id, str) else None
        if state is None:
            raise InterviewError("interview", text(lang, "no_interview"))
        if not state.get("finished_at") and running(state, self._interview_now()):
            raise InterviewError("interview", text(lang, "running",
                                                   left=clock(seconds_left(state, self._interview_now()))))
        if not state.get("finished_at"):
            state["finished_at"] = state["deadline"]
            self._interview_save(state)
        return report(state, self.course, lang, self._interview_met())

    def _interview_met(self) -> set[tuple[str, str]]:
        """(pack, review item) of every item in this learner's review schedule, brought up to date."""
        self.review().sync()
        return {(part.id, key) for part in self.course.packs
                for key in (self.store.review_states(pack=part.id) or {})}

    def interview_history(self, lang: str = "en") -> list[dict]:
        """Every finished interview of this learner, newest first, as reports."""
        self.interview_current()  # finishes one whose clock ran out
        met = self._interview_met()
        return [report(s, self.course, lang, met) for s in self._own_interviews() if s.get("finished_at")]

    def _own_interviews(self) -> list[dict]:
        me = getattr(self.store, "learner", "")
        rows = [v for who, v in self.store.settings_of_everyone(KEY_PREFIX) if who == me and isinstance(v, dict)]
        return sorted(rows, key=lambda s: s["started_at"], reverse=True)

    # -- the class's interviews --------------------------------------------------------------------
    def class_interviews(self) -> list[dict]:
        reader = getattr(self.store, "class_interviews", None)
        return list(reader()) if reader else []


def _choice_feedback(q: Any, choice: int, lang: str) -> str:
    chosen, right = q.options[choice], q.options[q.answer]
    parts = [text(lang, "chosen", option=chosen.text.get(lang) or chosen.text.get("en", "")),
             chosen.why.get(lang) or chosen.why.get("en", "")]
    if choice != q.answer:
        parts += [text(lang, "right_was", option=right.text.get(lang) or right.text.get("en", "")),
                  right.why.get(lang) or right.why.get("en", "")]
    explanation = getattr(q, "explanation", None)
    if isinstance(explanation, dict):
        parts.append(explanation.get(lang) or explanation.get("en", ""))
    return "\n\n".join(p for p in parts if p)


def _verdict_summary(verdict: dict, lang: str) -> str:
    cases = verdict.get("cases") or []
    failed = [c for c in cases if not c.get("passed")]
    if verdict.get("passed"):
        return text(lang, "passed")
    if verdict.get("error"):
        return str(verdict["error"].get("message", ""))
    return text(lang, "failed", n=len(failed), total=len(cases), names=", ".join(_label(c, lang) for c in failed[:4]))


def _label(case: dict, lang: str) -> str:
    """A case's label in ``lang`` (labels are per language, or one string), else its name."""
    label = case.get("label")
    if isinstance(label, dict):  # the case's name per language; its ``name`` is the English one
        label = label.get(lang) or (None if lang == "en" else label.get("en"))
    return str(label or case.get("name", ""))


def _verdict_feedback(verdict: dict, lang: str) -> str:
    lines = [_verdict_summary(verdict, lang)]
    whole = verdict.get("misconception")
    if isinstance(whole, dict) and whole.get("message"):
        lines.append(str(whole["message"]))
    for b in verdict.get("blanks") or []:
        if not b.get("passed") and b.get("message"):
            lines.append(str(b["message"]))
    for c in verdict.get("cases") or []:
        if not c.get("passed") and c.get("message"):
            lines.append(f"{_label(c, lang)}: {c['message']}")
    return "\n".join(dict.fromkeys(lines))


def _verdict_misconceptions(ex: Exercise, verdict: dict) -> list[str]:
    named = [str(b["misconception"]) for b in verdict.get("blanks") or [] if b.get("misconception")]
    named += [str(c["misconception"]) for c in verdict.get("cases") or [] if c.get("misconception")]
    whole = verdict.get("misconception")  # a level-4/5 file whose outputs match a known mistake
    if isinstance(whole, dict) and whole.get("id"):
        named.append(str(whole["id"]))
    return list(dict.fromkeys(named))


def interview_file(ex: Exercise, item: dict, lang: str) -> str:
    """The file a file item starts from: the exercise at its level, or a bug drill's buggy file."""
    if ex.kind_spec.starts_from_buggy_file:
        return ex.kind_spec.learner_file(ex, lang)
    from alignlings.grading import levels

    return levels.level_file(ex, int(item["level"] or 4), lang)


# -- the teacher's side ------------------------------------------------------------------------------

def new_class_interview(course: Pack, *, title: Any, seed: Any, minutes: Any, track: Any, items: Any,
                        level: Any, due: str) -> dict:
    """A class interview's row, checked (the store keeps it): everyone draws the same items."""
    if not isinstance(title, str) or not " ".join(title.split()) or len(title) > 120:
        raise InterviewError("title", f"expected 1 to 120 characters, got {title!r}")
    spec = Spec.checked(seed if seed is not None else secrets.randbelow(2**31), minutes, track, items, level)
    draw(course, spec, None)  # a track that cannot be drawn from fails now, not for each learner
    return {"id": f"ci-{secrets.token_hex(5)}", "title": " ".join(title.split()), "seed": spec.seed,
            "minutes": spec.minutes, "track": spec.track, "items": spec.items, "level": spec.level, "due": due}


def class_results(store: Any, course: Pack, assignment: dict, lang: str) -> dict:
    """A class interview's results: per learner (their latest interview of it: score, time, on time)
    and per item (how many answered it, how many right), from the learners' own records."""
    spec = Spec.checked(assignment["seed"], assignment["minutes"], assignment["track"], assignment["items"],
                        assignment.get("level"))
    items = draw(course, spec, None)
    names = {lr["id"]: lr["name"] for lr in store.learners()}
    latest: dict[str, dict] = {}
    for learner, state in store.settings_of_everyone(KEY_PREFIX):
        if isinstance(state, dict) and state.get("assignment") == assignment["id"] and learner in names:
            if learner not in latest or state["started_at"] > latest[learner]["started_at"]:
                latest[learner] = state
    learners = []
    per_item = [{"index": i, "slot": it["slot"], "exercise": it["exercise"], "question": it["question"],
                 "title": item_title(it, course, lang), "answered": 0, "right": 0}
                for i, it in enumerate(items)]
    now = now_utc()
    for learner, name in names.items():
        state = latest.get(learner)
        if state is None:
            learners.append({"learner": learner, "name": name, "status": "not_started", "right": None,
                             "total": len(items), "started_at": None, "finished_at": None, "on_time": None,
                             "seconds": None, "items": []})
            continue
        finished = state.get("finished_at") or (None if running(state, now) else state["deadline"])
        rep = report({**state, "finished_at": finished}, course, lang)
        if finished:
            for r, row in zip(rep["items"], per_item, strict=False):
                row["answered"] += int(r["answered"])
                row["right"] += int(r["correct"])
        seconds = int((parse(finished) - parse(state["started_at"])).total_seconds()) if finished else None
        learners.append({"learner": learner, "name": name, "status": "finished" if finished else "running",
                         "right": rep["right"] if finished else None, "total": rep["total"],
                         "started_at": state["started_at"], "finished_at": finished,
                         "on_time": bool(finished and finished <= assignment["due"]), "seconds": seconds,
                         "items": [{"index": r["index"], "answered": r["answered"], "correct": r["correct"],
                                    "seconds": r["seconds"], "misconceptions": r["misconceptions"]}
                                   for r in rep["items"]] if finished else []})
    learners.sort(key=lambda r: r["name"].lower())
    return {**assignment, "learners": learners, "per_item": per_item}
