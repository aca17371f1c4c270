"""Concept questions per track that no exercise asks: material for a mock interview (issue 32 §2).

A pack may hold ``interview/<track-id>.toml`` beside pack.toml, in quiz.toml's format (``[[question]]``
with ``id``, ``answer``, optional ``concepts``, ``question.en/zh`` and ``[[question.option]]`` with
``text`` and ``why`` per language; docs/pack-format.md). The questions are not part of any exercise, so
the course and its progress are unchanged; an interview draws from them by track.

:func:`load_bank` reads them; :func:`bank_problems` lists what is wrong with them, one line per problem
naming the file: an unknown track, a question id that another question of the pack already uses (quiz,
bug-or-not and predict ids, and the bank's own), a missing language, an option without an explanation,
an unknown concept tag.
"""

from __future__ import annotations

import tomllib
import weakref
from pathlib import Path
from typing import Any

from alignlings.i18n import LANGS
from alignlings.content.packdata import QuizQuestion, read_quiz_questions

#: the folder of a pack that holds the bank
FOLDER = "interview"


def _parts(pack) -> list:
    return list(pack.parts) or [pack]


def bank_files(pack) -> dict[str, Path]:
    """track id -> its question file, for every part of a pack (a course: each pack's own tracks)."""
    out = {}
    for part in _parts(pack):
        folder = Path(part.path) / FOLDER
        if folder.is_dir():
            out.update({p.stem: p for p in sorted(folder.glob("*.toml"))})
    return out


def load_bank(pack) -> dict[str, tuple[QuizQuestion, ...]]:
    """track id -> its questions, in file order. Raises PackError for a file that does not parse."""
    return {track: read_quiz_questions(path) for track, path in bank_files(pack).items()}


def concepts_of(path: Path) -> dict[str, list[str]]:
    """question id -> its ``concepts`` tags (quiz.toml's optional field)."""
    raw = tomllib.loads(path.read_text(encoding="utf-8")).get("question", [])
    return {str(q.get("id")): list(q.get("concepts", [])) for q in raw}


def _pack_question_ids(pack) -> dict[str, str]:
    """question id -> the exercise that asks it (quiz, bug-or-not and predict items)."""
    from alignlings.content.packdata import PackError

    ids = {}
    for key, ex in pack.exercises.items():
        try:
            questions = ex.predict if ex.kind_spec.name == "predict" else ex.kind_spec.recorded_questions(ex)
        except PackError:  # an exercise whose questions do not load: dev check reports it on its own
            continue
        for q in questions:
            ids[q.id] = key
    return ids


def _known_concepts(pack) -> set[str]:
    known: set[str] = set()
    for part in _parts(pack):
        path = Path(part.path) / "texts" / "en.toml"
        if path.is_file():
            known |= set(tomllib.loads(path.read_text(encoding="utf-8")).get("concepts", {}))
    return known


def bank_problems(pack) -> list[str]:
    """Everything wrong with a pack's question bank, one line per problem naming the file; [] when sound."""
    problems: list[str] = []
    tracks = {t.id for t in pack.tracks}
    taken = _pack_question_ids(pack)
    known = _known_concepts(pack)
    for track, path in bank_files(pack).items():
        if track not in tracks:
            problems.append(f"{path}: no track {track!r} in the pack (tracks: {', '.join(sorted(tracks))})")
        try:
            questions = read_quiz_questions(path)
        except Exception as exc:  # noqa: BLE001 - reported, not raised: one line per problem
            problems.append(f"{path}: {exc}")
            continue
        for q in questions:
            if q.id in taken:
                problems.append(f"{path}: question {q.id!r}: id already used by {taken[q.id]}")
            taken[q.id] = f"{FOLDER}/{path.name}"
            if len(q.options) < 3:
                problems.append(f"{path}: question {q.id!r}: {len(q.options)} options, expected at least 3")
            for lang in LANGS:
                if not q.question.get(lang, "").strip():
                    problems.append(f"{path}: question {q.id!r}: no question text in {lang}")
                for n, o in enumerate(q.options):
                    if not o.text.get(lang, "").strip() or not o.why.get(lang, "").strip():
                        problems.append(f"{path}: question {q.id!r}: option {n} lacks its text or why in {lang}")
        for qid, tags in concepts_of(path).items():
            problems += [f"{path}: question {qid!r}: unknown concept {tag!r}" for tag in tags if tag not in known]
    return problems


# -- a loaded course's banks (the interview draws from them; review asks their questions again) --------

BANK = "bank:"
"""What stands for a bank's track where an exercise key would: ``bank:PACK/TRACK`` (an interview item's
``exercise``, a review item's ``exercise``)."""

_banks: dict[int, tuple[Any, dict]] = {}  # id(course) -> (a weak reference to it, its banks): read once


def course_banks(course) -> dict[str, tuple[str, tuple[QuizQuestion, ...], dict[str, list[str]]]]:
    """Track key (``PACK/TRACK``) -> (pack id, its questions, question id -> concept tags), for every
    pack of a loaded course; computed once per course object."""
    hit = _banks.get(id(course))
    if hit is not None and hit[0]() is course:
        return hit[1]
    out = {}
    for part in _parts(course):
        for track_id, path in bank_files(part).items():
            out[f"{part.id}/{track_id}"] = (part.id, read_quiz_questions(path), concepts_of(path))
    _banks[id(course)] = (weakref.ref(course), out)
    return out


def bank_question(course, anchor: str, question_id: str) -> tuple[str, QuizQuestion]:
    """(pack id, the question) of a bank question by its anchor ``bank:PACK/TRACK`` and id."""
    pack_id, questions, _ = course_banks(course).get(anchor.removeprefix(BANK), ("", (), {}))
    for q in questions:
        if q.id == question_id:
            return pack_id, q
    raise KeyError(f"{anchor}: no question {question_id!r}")


def course_question_ids(course) -> set[str]:
    """Every bank question id of a loaded course (answers to them are recorded as quiz answers)."""
    return {q.id for _, questions, _ in course_banks(course).values() for q in questions}
