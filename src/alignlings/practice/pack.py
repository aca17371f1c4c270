"""Exercise packs as data: load a pack folder (pack.toml + one folder per exercise).

The format is documented in docs/pack-format.md. This module only reads files; it imports
neither torch nor the learner's code, so listing exercises stays fast.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path

LANGS = ("en", "zh")


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


@dataclass
class Exercise:
    """One exercise folder. Texts, solution and misconceptions are read lazily."""

    id: str
    path: Path
    kind: str
    level: int
    title: dict[str, str]
    timeout: float
    cloze: bool
    entry: tuple[str, ...]
    meta: dict

    @property
    def is_code(self) -> bool:
        return self.kind == "code"

    def texts(self, lang: str = "en") -> Texts:
        if lang not in LANGS:
            raise PackError(f"lang: expected one of {', '.join(LANGS)}, got {lang!r}")
        return self._texts[lang]

    @cached_property
    def _texts(self) -> dict[str, Texts]:
        out = {}
        for lang in LANGS:
            path = self.path / "texts" / f"{lang}.toml"
            data = _read_toml(path)
            try:
                out[lang] = Texts(
                    statement=str(data["statement"]),
                    blanks=tuple(map(str, data.get("blanks", ()))),
                    hints=tuple(map(str, data.get("hints", ()))),
                    explanation=str(data.get("explanation", "")),
                    comments={str(k): str(v) for k, v in data.get("comments", {}).items()},
                )
            except KeyError as exc:
                raise PackError(f"{path}: missing field {exc.args[0]!r}") from None
        return out

    @cached_property
    def solution_source(self) -> str:
        if not self.is_code:
            raise PackError(f"exercise {self.id!r} is a {self.kind}, it has no solution.py")
        path = self.path / "solution.py"
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise PackError(f"{path}: file missing") from None

    @cached_property
    def misconceptions(self) -> tuple[Misconception, ...]:
        path = self.path / "misconceptions.toml"
        if not path.exists():
            return ()
        items = []
        for i, m in enumerate(_read_toml(path).get("misconception", [])):
            where = f"{path}: misconception #{i + 1}"
            try:
                items.append(Misconception(
                    id=str(m.get("id", f"m{i + 1}")), blank=int(m["blank"]), fill=str(m["fill"]),
                    feedback=_lang_dict(m["feedback"], where + " feedback"),
                ))
            except KeyError as exc:
                raise PackError(f"{where}: missing field {exc.args[0]!r}") from None
        return tuple(items)

    @cached_property
    def quiz(self) -> tuple[QuizQuestion, ...]:
        path = self.path / "quiz.toml"
        questions = []
        for i, q in enumerate(_read_toml(path).get("question", [])):
            where = f"{path}: question #{i + 1}"
            try:
                options = tuple(
                    QuizOption(text=_lang_dict(o["text"], where + " option"), why=_lang_dict(o["why"], where + " why"))
                    for o in q["option"]
                )
                answer = int(q["answer"])
            except KeyError as exc:
                raise PackError(f"{where}: missing field {exc.args[0]!r}") from None
            if not 0 <= answer < len(options):
                raise PackError(f"{where}: answer {answer} is not an option index 0..{len(options) - 1}")
            questions.append(QuizQuestion(id=str(q.get("id", f"q{i + 1}")),
                                          question=_lang_dict(q["question"], where), options=options, answer=answer))
        return tuple(questions)


@dataclass
class Pack:
    id: str
    path: Path
    title: dict[str, str]
    exercises: dict[str, Exercise]

    def get(self, exercise_id: str) -> Exercise:
        try:
            return self.exercises[exercise_id]
        except KeyError:
            known = ", ".join(self.exercises)
            raise PackError(f"exercise: unknown id {exercise_id!r}; expected one of {known}") from None

    def __iter__(self):
        return iter(self.exercises.values())

    def code_exercises(self) -> list[Exercise]:
        return [e for e in self if e.is_code]


def load_exercise(path: Path) -> Exercise:
    meta = _read_toml(path / "exercise.toml")
    where = f"{path / 'exercise.toml'}"
    kind = meta.get("kind", "code")
    if kind not in ("code", "quiz"):
        raise PackError(f"{where}: kind must be 'code' or 'quiz', got {kind!r}")
    return Exercise(
        id=str(meta.get("id", path.name)),
        path=path,
        kind=kind,
        level=int(meta.get("level", 1)),
        title=_lang_dict(meta.get("title", path.name), where + " title"),
        timeout=float(meta.get("timeout", 10)),
        cloze=bool(meta.get("cloze", False)),
        entry=tuple(meta.get("entry", ())),
        meta=meta,
    )


def load_pack(path: str | Path | None = None) -> Pack:
    """Load a pack folder; None loads the built-in pack shipped with alignlings."""
    root = Path(path) if path is not None else builtin_pack_path()
    if not root.is_dir():
        raise PackError(f"pack: {root} is not a folder")
    meta = _read_toml(root / "pack.toml").get("pack", {})
    order = list(meta.get("order", []))
    found = sorted(p.name for p in root.iterdir() if (p / "exercise.toml").is_file())
    order += [name for name in found if name not in order]
    exercises = {}
    for name in order:
        if not (root / name / "exercise.toml").is_file():
            raise PackError(f"{root / 'pack.toml'}: order lists {name!r} but {root / name}/exercise.toml is missing")
        ex = load_exercise(root / name)
        exercises[ex.id] = ex
    return Pack(id=str(meta.get("id", root.name)), path=root,
                title=_lang_dict(meta.get("title", root.name), "pack title"), exercises=exercises)


def builtin_pack_path() -> Path:
    return Path(str(resources.files("alignlings") / "packs" / "dpo-grpo"))
