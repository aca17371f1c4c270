"""The teacher's report of a class: who is stuck where (issue 24 §2).

Read-only queries over the progress store's tables for every learner of the class at once (one
query per table, not one per learner and exercise), so the teacher page and the session layer's
``class_report`` share them:

- :func:`learner_rows`: per learner, last activity, time on task, exercises solved and when (levels 4
  and 5 apart: ``levels``, the highest level passed per exercise), the
  blanks they are failing now, their misconceptions by name, their wrong quiz, bug-or-not and
  predict choices, the predictions they made and how many were right, hints (both kinds: the
  exercise's hints and per-blank hints), solutions revealed and their last submission's code.
- :func:`exercise_rows`: per exercise, how many solved, how many are stuck (attempted, not solved),
  median attempts and time to solve, the misconceptions hit (names, learners), the blanks most
  often wrong and, per question answered by choosing (quiz, bug-or-not, predict), how many learners
  answered it, how many were right and which wrong options they chose.

Questions answered by choosing are the kind's ``recorded_questions``; a quiz question is judged by
the learner's latest answer, a predict question by their first (``Kind.first_answer_counts``): the
prediction committed before the run was seen, which is what a teacher wants to know; an answer
after seeing the run only repeats it. Such an exercise is solved or stuck by its answers alone (its
rounds' attempts would count the same learner twice), as the learner's own progress counts it:
every question answered and each latest answer right.

Both take ``pack`` and ``track`` filters (a pack id; a track as ``id`` or ``pack/id``). History is
read whole: a learner's reset (start over) does not hide it from the teacher.

Time on task: the sum of the gaps between a learner's consecutive actions (attempts, hints,
answers, reviews), each gap counted up to :data:`IDLE_GAP_S` (a longer one is a break), plus one
minute per session for the first action's reading time.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from datetime import datetime
from typing import Any

IDLE_GAP_S = 15 * 60
SESSION_START_S = 60


def _ts(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


def selected(course, pack: str | None = None, track: str | None = None) -> list:
    """The exercises of ``course`` in the pack and track asked for (all when None); ValueError names
    the filter when it matches nothing loaded."""
    if pack is not None and pack not in {p.id for p in course.packs}:
        raise ValueError(f"pack: expected one of {', '.join(p.id for p in course.packs)}, got {pack!r}")
    keys = None
    if track is not None:
        found = [t for t in course.tracks if track in (t.key, t.id)]
        if len(found) != 1:
            raise ValueError(f"track: expected one of {', '.join(t.key for t in course.tracks)}, got {track!r}")
        keys = set(found[0].exercises)
    return [ex for ex in course if (pack is None or ex.pack == pack) and (keys is None or ex.key in keys)]


def track_of(course, ex) -> str:
    t = course.track_of(ex.key)
    return t.key if t is not None else ""


def _history(store) -> dict[str, Any]:
    """Every learner's rows, read once per table."""
    attempts = [{k: r[k] for k in ("learner", "pack", "exercise", "passed", "created_at", "code", "verdict", "level")}
                for r in store._read(
        "SELECT learner, pack, exercise, passed, created_at, code, verdict, level FROM attempts WHERE learner != '' "
        "ORDER BY created_at, id")]
    events = [{k: r[k] for k in ("learner", "pack", "exercise", "kind", "created_at")} for r in store._read(
        "SELECT learner, pack, exercise, kind, created_at FROM events WHERE learner != '' ORDER BY created_at, id")]
    quiz = [{k: r[k] for k in ("learner", "pack", "exercise", "question_id", "choice", "correct", "created_at")}
            for r in store._read("SELECT learner, pack, exercise, question_id, choice, correct, created_at "
                                 "FROM quiz_answers WHERE learner != '' ORDER BY created_at, id")]
    reviews = [{k: r[k] for k in ("learner", "reviewed_at")}
               for r in store._read("SELECT learner, reviewed_at FROM review_log WHERE learner != ''")]
    return {"attempts": attempts, "events": events, "quiz": quiz, "reviews": reviews}


def _failed_blanks(verdict: dict) -> list[int]:
    return sorted(b["index"] for b in verdict.get("blanks") or []
                  if isinstance(b, dict) and isinstance(b.get("index"), int) and b.get("passed") is not True)


def _misconceptions(verdict: dict) -> list[tuple[str, int | None]]:
    return [(str(b["misconception"]), b.get("index")) for b in verdict.get("blanks") or []
            if isinstance(b, dict) and b.get("misconception") and b.get("passed") is not True]


def time_on_task(times: list[float]) -> int:
    """Seconds on task from the timestamps of a learner's actions (see the module docstring)."""
    if not times:
        return 0
    times = sorted(times)
    total: float = SESSION_START_S
    for a, b in zip(times, times[1:]):
        gap = b - a
        total += gap if gap <= IDLE_GAP_S else SESSION_START_S
    return int(total)


def rows(store, course, *, lang: str = "en", pack: str | None = None, track: str | None = None) -> dict[str, list]:
    """Both reports, ``learners`` and ``exercises``, from one read of the class's history."""
    h = _history(store)
    return {"learners": learner_rows(store, course, lang=lang, pack=pack, track=track, history=h),
            "exercises": exercise_rows(store, course, lang=lang, pack=pack, track=track, history=h)}


def learner_rows(store, course, *, lang: str = "en", pack: str | None = None, track: str | None = None,
                 history: dict[str, Any] | None = None) -> list[dict]:
    """One row per learner of the class (see the module docstring); ``last_submission`` holds the
    code of their latest attempt at one of the selected exercises. ``history``: already read."""
    exercises = selected(course, pack, track)
    by_key = {(ex.pack, ex.id): ex for ex in exercises}
    questions = _question_index(exercises)
    h = history if history is not None else _history(store)
    rows = []
    for learner in store.learners():
        lid = learner["id"]
        mine = [a for a in h["attempts"] if a["learner"] == lid and (a["pack"], a["exercise"]) in by_key]
        events = [e for e in h["events"] if e["learner"] == lid and (e["pack"], e["exercise"]) in by_key]
        answers = [q for q in _keyed(h["quiz"], questions) if q["learner"] == lid]
        stamps = [a["created_at"] for a in mine] + [e["created_at"] for e in events] + \
                 [q["created_at"] for q in answers] + [r["reviewed_at"] for r in h["reviews"] if r["learner"] == lid]
        solved: dict[str, str] = {}
        last: dict[str, dict] = {}
        misconceptions: dict[str, int] = defaultdict(int)
        levels: dict[str, int] = {}  # exercise -> the highest of levels 4 and 5 passed (practice.levels)
        for a in mine:
            ex = by_key[(a["pack"], a["exercise"])]
            verdict = json.loads(a["verdict"]) if isinstance(a["verdict"], str) else (a["verdict"] or {})
            if a.get("level"):  # a level is solved on its own: never the fill-in's solve or its failing blanks
                if a["passed"]:
                    levels[ex.key] = max(levels.get(ex.key, 0), int(a["level"]))
                if (verdict.get("misconception") or {}).get("id"):
                    misconceptions[f"{ex.key}: {verdict['misconception']['id']}"] += 1
                continue
            if a["passed"] and ex.key not in solved:
                solved[ex.key] = a["created_at"]
            last[ex.key] = {"verdict": verdict, "attempt": a}
            for mid, _ in _misconceptions(verdict):
                misconceptions[f"{ex.key}: {mid}"] += 1
        failing = {key: _failed_blanks(v["verdict"]) for key, v in last.items()
                   if key not in solved and _failed_blanks(v["verdict"])}
        wrong = []
        predictions = {"made": 0, "right": 0}
        for key, q in _judged_answers(answers, questions).items():
            ex, question = questions[key]
            qid = question.id
            if ex.kind_spec.first_answer_counts:
                predictions["made"] += 1
                predictions["right"] += bool(q["correct"])
            if not q["correct"]:
                wrong.append({"exercise": ex.key, "question": qid, "kind": ex.kind_spec.name,
                              "question_text": question.question.get(lang) or question.question.get("en", ""),
                              "label": ex.kind_spec.label.get(lang) or ex.kind_spec.name,
                              "choice": _option_text(question, q["choice"], lang)})
        hints = sum(1 for e in events if e["kind"] == "hint")  # both kinds: each hint is one event
        revealed = sorted({by_key[(e["pack"], e["exercise"])].key for e in events if e["kind"] == "reveal"})
        # the last code the learner wrote: a quiz, bug-or-not or predict round is recorded with no code
        latest = next((a for a in reversed(mine) if (a["code"] or "").strip()), None)
        rows.append({
            "id": lid, "name": learner["name"],
            "last_activity": max(stamps) if stamps else None,
            "time_on_task_s": time_on_task([_ts(s) for s in stamps]),
            "solved": [{"exercise": k, "at": v} for k, v in solved.items()],
            "failing_blanks": failing,
            "misconceptions": sorted(misconceptions.items(), key=lambda kv: (-kv[1], kv[0])),
            "wrong_choices": wrong,
            "predictions": predictions["made"], "predictions_right": predictions["right"],
            "hints": hints,
            "revealed": revealed,
            "levels": [{"exercise": k, "level": v} for k, v in levels.items()],
            "last_submission": ({"exercise": by_key[(latest["pack"], latest["exercise"])].key,
                                 "at": latest["created_at"], "passed": bool(latest["passed"]), "code": latest["code"]}
                                if latest else None),
        })
    return rows


QuestionKey = tuple[str, str, str]  # (pack, exercise id, question id)


def _question_index(exercises: list) -> dict[QuestionKey, tuple[Any, Any]]:
    """(pack, exercise id, question id) -> (exercise, question) of every question answered by
    choosing: an answer counts for the exercise it was given to, even where another exercise of the
    pack repeats the question id (``dev check`` rejects that, but a store must not mix them)."""
    out = {}
    for ex in exercises:
        try:
            for q in ex.kind_spec.recorded_questions(ex):
                out[(ex.pack, ex.id, q.id)] = (ex, q)
        except Exception:  # noqa: BLE001 - a broken quiz or predict file is dev check's to report
            continue
    return out


def _keyed(rows: list[dict], questions: dict[QuestionKey, tuple[Any, Any]]) -> list[dict]:
    """The answers to selected questions, each with ``key`` (a key of ``questions``). An answer
    recorded before answers named their exercise (``exercise = ''``, schema < 9) goes to the first
    selected exercise of its pack that asks that question id."""
    legacy: dict[tuple[str, str], QuestionKey] = {}
    for known in questions:
        legacy.setdefault((known[0], known[2]), known)
    out = []
    for r in rows:
        key = ((r["pack"], r["exercise"], r["question_id"]) if r.get("exercise")
               else legacy.get((r["pack"], r["question_id"])))
        if key is not None and key in questions:
            out.append({**r, "key": key})
    return out


def _judged_answers(answers: list[dict], questions: dict) -> dict[QuestionKey, dict]:
    """(pack, exercise, question) -> the one answer of a learner that judges the question: the latest
    for a quiz question, the first (the prediction) for a predict question. ``answers`` (from
    :func:`_keyed`) in time order."""
    out: dict[QuestionKey, dict] = {}
    for q in answers:
        key = q["key"]
        if key not in out or not questions[key][0].kind_spec.first_answer_counts:
            out[key] = q
    return out


def _option_text(question, choice: int, lang: str) -> str:
    option = question.options[choice] if 0 <= choice < len(question.options) else None
    return (option.text.get(lang) or option.text.get("en", "")) if option else str(choice)


LETTERS = "ABCDEFGH"


def _question_rows(ex, questions: dict, answers: list[dict], lang: str) -> list[dict]:
    """Per question of ``ex`` answered by choosing: ``answered`` and ``right`` (learners, by the
    judging answer), and ``wrong_options`` (each wrong option chosen: letter, text, learners)."""
    judged: dict[QuestionKey, dict[str, dict]] = defaultdict(dict)  # question -> learner -> judging answer
    for learner, mine in _by_learner(answers).items():
        for key, q in _judged_answers(mine, questions).items():
            judged[key][learner] = q
    rows = []
    for key, (e, question) in questions.items():
        if e is not ex:
            continue
        qid = question.id
        got = judged.get(key, {})
        chosen: dict[int, int] = defaultdict(int)
        for q in got.values():
            if not q["correct"]:
                chosen[q["choice"]] += 1
        rows.append({"question": qid, "text": question.question.get(lang) or question.question.get("en", ""),
                     "answered": len(got), "right": sum(1 for q in got.values() if q["correct"]),
                     "wrong_options": [{"option": LETTERS[c] if 0 <= c < len(LETTERS) else str(c),
                                        "text": _option_text(question, c, lang), "learners": n}
                                       for c, n in sorted(chosen.items(), key=lambda cn: (-cn[1], cn[0]))]})
    return rows


def _by_learner(answers: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for q in answers:
        out[q["learner"]].append(q)
    return out


def exercise_rows(store, course, *, lang: str = "en", pack: str | None = None, track: str | None = None,
                  history: dict[str, Any] | None = None) -> list[dict]:
    """One row per selected exercise (see the module docstring). ``history``: already read."""
    exercises = selected(course, pack, track)
    h = history if history is not None else _history(store)
    learners = {lr["id"] for lr in store.learners()}
    by_ex: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for a in h["attempts"]:
        if a["learner"] in learners:
            by_ex[(a["pack"], a["exercise"])].append(a)
    answered: dict[tuple[str, str], list[dict]] = defaultdict(list)
    questions = _question_index(exercises)
    for q in _keyed(h["quiz"], questions):
        if q["learner"] in learners:
            ex, _ = questions[q["key"]]
            answered[(ex.pack, ex.id)].append(q)
    rows = []
    for ex in exercises:
        per_learner: dict[str, list[dict]] = defaultdict(list)
        for a in by_ex.get((ex.pack, ex.id), []):
            per_learner[a["learner"]].append(a)
        solved = stuck = 0
        attempts_to_solve, seconds_to_solve = [], []
        hits: dict[str, set[str]] = defaultdict(set)
        wrong_blanks: dict[int, int] = defaultdict(int)
        choice_kind = any(e is ex for e, _ in questions.values())  # solved by its answers, not its rounds
        for lid, rows_ in per_learner.items():
            if choice_kind:
                break
            first_pass = next((i for i, a in enumerate(rows_) if a["passed"]), None)
            if first_pass is None:
                stuck += 1
            else:
                solved += 1
                attempts_to_solve.append(first_pass + 1)
                seconds_to_solve.append(_ts(rows_[first_pass]["created_at"]) - _ts(rows_[0]["created_at"]))
            for a in rows_:
                verdict = json.loads(a["verdict"]) if isinstance(a["verdict"], str) else (a["verdict"] or {})
                for mid, _ in _misconceptions(verdict):
                    hits[mid].add(lid)
                for b in _failed_blanks(verdict):
                    wrong_blanks[b] += 1
        question_rows = _question_rows(ex, questions, answered.get((ex.pack, ex.id), []), lang)
        if choice_kind:  # solved as the learner sees it: every question answered, each latest answer right
            by_learner: dict[str, dict[str, bool]] = defaultdict(dict)
            for q in answered.get((ex.pack, ex.id), []):
                by_learner[q["learner"]][q["question_id"]] = bool(q["correct"])
            for latest in by_learner.values():
                if len(latest) == len(question_rows) and all(latest.values()):
                    solved += 1
                else:
                    stuck += 1
        names = {m.id: m for m in ex.misconceptions} if ex.kind_spec.has_blanks else {}
        rows.append({
            "exercise": ex.key, "pack": ex.pack, "track": track_of(course, ex),
            "title": ex.title.get(lang) or ex.title.get("en") or ex.id,
            "solved": solved, "stuck": stuck,
            "median_attempts": statistics.median(attempts_to_solve) if attempts_to_solve else None,
            "median_seconds": int(statistics.median(seconds_to_solve)) if seconds_to_solve else None,
            "misconceptions": [{"id": mid, "learners": len(who),
                                "feedback": (names[mid].feedback.get(lang) or names[mid].feedback.get("en", ""))
                                if mid in names else ""}
                               for mid, who in sorted(hits.items(), key=lambda kv: (-len(kv[1]), kv[0]))],
            "blanks_wrong": [{"blank": b, "times": n}
                             for b, n in sorted(wrong_blanks.items(), key=lambda bn: (-bn[1], bn[0]))],
            "kind": ex.kind_spec.name, "predict": ex.kind_spec.first_answer_counts,
            "questions": question_rows,
            "answered": sum(r["answered"] for r in question_rows),
            "answered_right": sum(r["right"] for r in question_rows),
        })
    return rows


def solved_at(store) -> dict[tuple[str, str, str], str]:
    """(learner, pack, exercise id) -> when the learner first solved it (a passing attempt; a quiz
    round all right is one), for every learner at once; a reset does not undo it."""
    out: dict[tuple[str, str, str], str] = {}
    for r in store._read("SELECT learner, pack, exercise, MIN(created_at) AS at FROM attempts "
                         "WHERE learner != '' AND passed = 1 GROUP BY learner, pack, exercise"):
        out[(r["learner"], r["pack"], r["exercise"])] = r["at"]
    return out


def assignment_rows(store, course, assignment: dict) -> list[dict]:
    """Per learner of the class, where they stand on ``assignment`` (``store.assignment``):
    ``solved`` (``[{exercise, at}]``, in the assignment's order), ``missing`` (keys not solved yet),
    ``finished_at`` (when the last of its exercises was solved; None until all are) and
    ``on_time`` (finished at or before ``due``). Exercises no longer in the loaded course count as
    missing: nobody can solve them, and the teacher should see that."""
    solved = solved_at(store)
    due = _ts(assignment["due"])
    rows = []
    for learner in store.learners():
        done, missing = [], []
        for key in assignment["exercises"]:
            ex = course.exercises.get(key)
            at = solved.get((learner["id"], ex.pack, ex.id)) if ex is not None else None
            if at is None:
                missing.append(key)
            else:
                done.append({"exercise": key, "at": at})
        finished = max((d["at"] for d in done), key=_ts) if done and not missing else None
        rows.append({"id": learner["id"], "name": learner["name"], "solved": done, "missing": missing,
                     "finished_at": finished, "on_time": finished is not None and _ts(finished) <= due})
    return rows


def solved_by(store, learner: str) -> set[tuple[str, str]]:
    """(pack, exercise id) of every exercise ``learner`` has solved (ever: a reset does not undo it)."""
    return {(r["pack"], r["exercise"]) for r in store._read(
        "SELECT DISTINCT pack, exercise FROM attempts WHERE learner = ? AND passed = 1", (learner,))}
