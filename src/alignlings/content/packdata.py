"""The plain data an exercise is made of (misconceptions, quiz questions, texts) and the two
TOML helpers, apart from ``pack.py`` so that modules the pack loader calls back into
(``bugdrill``) can use them without importing the loader: no import circle."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from alignlings.i18n import LANGS


PLACEHOLDER = "TODO(author)"  # what `alignlings dev new` writes where a teacher must write; `dev check` reports it


class PackError(ValueError):
    """A pack or exercise folder is malformed; the message names the file and the field."""


def _read_toml(path: Path) -> dict:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise PackError(f"{path}: file missing") from None
    except tomllib.TOMLDecodeError as exc:
        raise PackError(f"{path}: invalid TOML: {exc}") from None


def _lang_dict(value, where: str) -> dict[str, str]:
    if isinstance(value, str):
        return {lang: value for lang in LANGS}
    if not isinstance(value, dict):
        raise PackError(f"{where}: expected a table with 'en' and 'zh', got {type(value).__name__}")
    return {str(k): str(v) for k, v in value.items()}


@dataclass(frozen=True)
class Misconception:
    id: str
    blank: int
    fill: str
    feedback: dict[str, str]


@dataclass(frozen=True)
class Equivalent:
    """A right answer written differently from the reference; ``dev check`` proves it passes."""

    blank: int
    fill: str


@dataclass(frozen=True)
class WrongFix:
    """A known wrong fix of a ``bug`` drill (``[[wrong_fix]]`` in misconceptions.toml): buggy.py with
    ``find`` replaced by ``replace`` (or the whole ``file``), and the feedback it earns."""

    id: str
    feedback: dict[str, str]
    find: str = ""
    replace: str = ""
    file: str = ""


@dataclass(frozen=True)
class QuizOption:
    text: dict[str, str]
    why: dict[str, str]


@dataclass(frozen=True)
class QuizQuestion:
    id: str
    question: dict[str, str]
    options: tuple[QuizOption, ...]
    answer: int


@dataclass(frozen=True)
class Texts:
    statement: str
    blanks: tuple[str, ...]
    hints: tuple[str, ...]
    explanation: str
    comments: dict[str, str] = field(default_factory=dict)
    # per blank, hints from a nudge to the answer (``alignlings hint ID --blank N``, the web's hint button)
    blank_hints: tuple[tuple[str, ...], ...] = ()
    story: str = ""  # ``bug`` drills: the real bug (repository, issue/PR, what users saw, the fix), shown once solved


ExerciseTexts = Texts


# -- where a [[question]] table's fields are (quiz.toml, bugornot.toml, predict.toml: one layout) ------------

def _question_lines(text: str) -> list[tuple[int, int]]:
    """(first, last) line of each ``[[question]]`` table, 1-based; a table runs to the next one."""
    starts = [i + 1 for i, line in enumerate(text.splitlines()) if line.strip().startswith("[[question]]")]
    ends = [s - 1 for s in starts[1:]] + [len(text.splitlines())]
    return list(zip(starts, ends, strict=True))


def field_line(path: Path, index: int, name: str) -> int:
    """The line of field ``name`` (``answer``, ``question.en``, ``chart``...) in the ``index``-th
    ``[[question]]`` table of ``path``: the line that names it, else the table's first line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return 1
    spans = _question_lines(text)
    if not spans:
        return 1
    first, last = spans[min(index, len(spans) - 1)]
    lines = text.splitlines()
    head = name.split(".")[0]
    pattern = re.compile(rf"^\s*(\[+\s*question\.)?{re.escape(name)}\b|^\s*(\[+\s*question\.)?{re.escape(head)}\b")
    for n in range(first, last + 1):
        if pattern.match(lines[n - 1]):
            return n
    return first


def option_line(path: Path, index: int, option: int, name: str = "") -> int:
    """The line of field ``name`` (``text``, ``why``; '' for the table itself) of the ``option``-th
    ``[[question.option]]`` table of the ``index``-th question (0-based): the line that names it,
    else the option's table line (else the question's first line)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return 1
    spans = _question_lines("\n".join(lines))
    if not spans:
        return 1
    first, last = spans[min(index, len(spans) - 1)]
    heads = [n for n in range(first, last + 1) if re.match(r"^\s*\[\[\s*question\.option\s*\]\]", lines[n - 1])]
    if option >= len(heads):
        return first
    start = heads[option]
    end = heads[option + 1] - 1 if option + 1 < len(heads) else last
    if name:
        for n in range(start + 1, end + 1):
            if re.match(rf"^\s*{re.escape(name)}\b", lines[n - 1]):
                return n
    return start


def read_quiz_questions(path: Path) -> tuple[QuizQuestion, ...]:
    """The ``[[question]]`` tables of a quiz.toml, each with its options and the right one's index."""
    questions = []
    for i, q in enumerate(_read_toml(path).get("question", [])):
        where = f"{path}:{field_line(path, i, 'id')}: question #{i + 1}"
        try:
            options = tuple(
                QuizOption(text=_lang_dict(o["text"], f"{path}:{option_line(path, i, k, 'text')}: question #{i + 1} "
                                                      f"option #{k + 1} text"),
                           why=_lang_dict(o["why"], f"{path}:{option_line(path, i, k, 'why')}: question #{i + 1} "
                                                    f"option #{k + 1} why"))
                for k, o in enumerate(q["option"])
            )
            answer = int(q["answer"])
        except KeyError as exc:
            raise PackError(f"{where}: missing field {exc.args[0]!r}") from None
        if not 0 <= answer < len(options):
            raise PackError(f"{path}:{field_line(path, i, 'answer')}: question #{i + 1}: answer {answer} is not an "
                            f"option index 0..{len(options) - 1}")
        questions.append(QuizQuestion(id=str(q.get("id", f"q{i + 1}")),
                                      question=_lang_dict(q["question"], where), options=options, answer=answer))
    return tuple(questions)
