"""The teacher's report of a class: who is stuck where (issue 24 §2).

Read-only queries over the progress store's tables for every learner of the class at once (one
query per table, not one per learner and exercise), so the teacher page and the session layer's
``class_report`` share them:

- :func:`learner_rows`: per learner, last activity, time on task, exercises solved and when, the
  blanks they are failing now, their misconceptions by name, their wrong quiz and bug-or-not
  choices, hints (both kinds: the exercise's hints and per-blank hints), solutions revealed and
  their last submission's code.
- :func:`exercise_rows`: per exercise, how many solved, how many are stuck (attempted, not solved),
  median attempts and time to solve, the misconceptions hit (names, learners) and the blanks most
  often wrong.

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
    attempts = [{k: r[k] for k in ("learner", "pack", "exercise", "passed", "created_at", "code", "verdict")}
                for r in store._read(
        "SELECT learner, pack, exercise, passed, created_at, code, verdict FROM attempts WHERE learner != '' "
        "ORDER BY created_at, id")]
    events = [{k: r[k] for k in ("learner", "pack", "exercise", "kind", "created_at")} for r in store._read(
        "SELECT learner, pack, exercise, kind, created_at FROM events WHERE learner != '' ORDER BY created_at, id")]
    quiz = [{k: r[k] for k in ("learner", "pack", "question_id", "choice", "correct", "created_at")}
            for r in store._read("SELECT learner, pack, question_id, choice, correct, created_at FROM quiz_answers "
                                 "WHERE learner != '' ORDER BY created_at, id")]
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


def learner_rows(store, course, *, lang: str = "en", pack: str | None = None, track: str | None = None) -> list[dict]:
    """One row per learner of the class (see the module docstring); ``last_submission`` holds the
    code of their latest attempt at one of the selected exercises."""
    exercises = selected(course, pack, track)
    by_key = {(ex.pack, ex.id): ex for ex in exercises}
    questions = _question_index(exercises)
    h = _history(store)
    rows = []
    for learner in store.learners():
        lid = learner["id"]
        mine = [a for a in h["attempts"] if a["learner"] == lid and (a["pack"], a["exercise"]) in by_key]
        events = [e for e in h["events"] if e["learner"] == lid and (e["pack"], e["exercise"]) in by_key]
        answers = [q for q in h["quiz"] if q["learner"] == lid and (q["pack"], q["question_id"]) in questions]
        stamps = [a["created_at"] for a in mine] + [e["created_at"] for e in events] + \
                 [q["created_at"] for q in answers] + [r["reviewed_at"] for r in h["reviews"] if r["learner"] == lid]
        solved: dict[str, str] = {}
        last: dict[str, dict] = {}
        misconceptions: dict[str, int] = defaultdict(int)
        for a in mine:
            ex = by_key[(a["pack"], a["exercise"])]
            verdict = json.loads(a["verdict"]) if isinstance(a["verdict"], str) else (a["verdict"] or {})
            if a["passed"] and ex.key not in solved:
                solved[ex.key] = a["created_at"]
            last[ex.key] = {"verdict": verdict, "attempt": a}
            for mid, _ in _misconceptions(verdict):
                misconceptions[f"{ex.key}: {mid}"] += 1
        failing = {key: _failed_blanks(v["verdict"]) for key, v in last.items()
                   if key not in solved and _failed_blanks(v["verdict"])}
        wrong = []
        latest_answer: dict[tuple[str, str], dict] = {}
        for q in answers:
            latest_answer[(q["pack"], q["question_id"])] = q
        for (pk, qid), q in latest_answer.items():
            if not q["correct"]:
                ex, question = questions[(pk, qid)]
                option = question.options[q["choice"]] if 0 <= q["choice"] < len(question.options) else None
                wrong.append({"exercise": ex.key, "question": qid,
                              "choice": (option.text.get(lang) or option.text.get("en", "")) if option else str(q["choice"])})
        hints = sum(1 for e in events if e["kind"] == "hint")  # both kinds: each hint is one event
        revealed = sorted({by_key[(e["pack"], e["exercise"])].key for e in events if e["kind"] == "reveal"})
        latest = mine[-1] if mine else None
        rows.append({
            "id": lid, "name": learner["name"],
            "last_activity": max(stamps) if stamps else None,
            "time_on_task_s": time_on_task([_ts(s) for s in stamps]),
            "solved": [{"exercise": k, "at": v} for k, v in solved.items()],
            "failing_blanks": failing,
            "misconceptions": sorted(misconceptions.items(), key=lambda kv: (-kv[1], kv[0])),
            "wrong_choices": wrong,
            "hints": hints,
            "revealed": revealed,
            "last_submission": ({"exercise": by_key[(latest["pack"], latest["exercise"])].key,
                                 "at": latest["created_at"], "passed": bool(latest["passed"]), "code": latest["code"]}
                                if latest else None),
        })
    return rows


def _question_index(exercises: list) -> dict[tuple[str, str], tuple[Any, Any]]:
    out = {}
    for ex in exercises:
        if ex.kind_spec.answered_by_choice:
            try:
                for q in ex.quiz:
                    out[(ex.pack, q.id)] = (ex, q)
            except Exception:  # noqa: BLE001 - a broken quiz file is dev check's to report
                continue
    return out


def exercise_rows(store, course, *, lang: str = "en", pack: str | None = None, track: str | None = None) -> list[dict]:
    """One row per selected exercise (see the module docstring)."""
    exercises = selected(course, pack, track)
    h = _history(store)
    learners = {lr["id"] for lr in store.learners()}
    by_ex: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for a in h["attempts"]:
        if a["learner"] in learners:
            by_ex[(a["pack"], a["exercise"])].append(a)
    answered: dict[tuple[str, str], list[dict]] = defaultdict(list)
    questions = _question_index(exercises)
    for q in h["quiz"]:
        if q["learner"] in learners and (q["pack"], q["question_id"]) in questions:
            ex, _ = questions[(q["pack"], q["question_id"])]
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
        for lid, rows_ in per_learner.items():
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
        if ex.kind_spec.answered_by_choice:  # answered, and every question's latest answer right
            by_learner: dict[str, dict[str, bool]] = defaultdict(dict)
            for q in answered.get((ex.pack, ex.id), []):
                by_learner[q["learner"]][q["question_id"]] = bool(q["correct"])
            n_questions = sum(1 for (pk, _qid), (e, _) in questions.items() if e is ex)
            for latest in by_learner.values():
                if len(latest) == n_questions and all(latest.values()):
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
