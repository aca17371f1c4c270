"""One exercise as loaded from its folder: the ``Exercise`` record, texts, solution and
misconceptions read lazily. A leaf of ``alignlings.content``: the loader (``pack``) makes it and the
kinds registry (``kinds``) describes it; neither is imported by the other through it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from alignlings.i18n import LANGS
from alignlings.content import kinds
from alignlings.content.packdata import PackError, _read_toml, _lang_dict, Misconception, Equivalent, WrongFix, QuizQuestion, Texts


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
    pack: str = ""  # id of the pack the exercise comes from (progress is keyed by pack and id)
    key: str = ""  # its name in a course: the id, or "pack/id" where two packs share the id

    def __post_init__(self):
        self.key = self.key or self.id

    @property
    def kind_spec(self) -> kinds.Kind:
        """What this exercise's kind says (``practice.kinds``): grading, dev check, page, label."""
        return kinds.of(self)

    @cached_property
    def buggy_source(self) -> str:
        """A ``bug`` drill's buggy.py: the learner's starting file."""
        if not self.kind_spec.starts_from_buggy_file:
            raise PackError(f"exercise {self.id!r} is a {self.kind}, it has no buggy.py")
        path = self.path / "buggy.py"
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise PackError(f"{path}: file missing") from None

    @cached_property
    def wrong_fixes(self) -> tuple[WrongFix, ...]:
        """``[[wrong_fix]]`` tables of a ``bug`` drill's misconceptions.toml."""
        path = self.path / "misconceptions.toml"
        if not self.kind_spec.starts_from_buggy_file or not path.exists():
            return ()
        items = []
        for i, w in enumerate(_read_toml(path).get("wrong_fix", [])):
            where = f"{path}: wrong_fix #{i + 1}"
            try:
                fix = WrongFix(id=str(w["id"]), feedback=_lang_dict(w["feedback"], where + " feedback"),
                               find=str(w.get("find", "")), replace=str(w.get("replace", "")),
                               file=str(w.get("file", "")))
            except KeyError as exc:
                raise PackError(f"{where}: missing field {exc.args[0]!r}") from None
            if bool(fix.find) == bool(fix.file):
                raise PackError(f"{where}: give either find/replace or file, expected exactly one")
            items.append(fix)
        return tuple(items)

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
                    blank_hints=self._blank_hints(data.get("blank_hints", []), path),
                    story=str(data.get("story", "")),
                )
            except KeyError as exc:
                raise PackError(f"{path}: missing field {exc.args[0]!r}") from None
        return out

    def _blank_hints(self, value, path: Path) -> tuple[tuple[str, ...], ...]:
        """``blank_hints``: one non-empty list of strings per blank of solution.py (or none at all)."""
        if not isinstance(value, list) or not all(
                isinstance(h, list) and h and all(isinstance(x, str) and x.strip() for x in h) for h in value):
            raise PackError(f"{path}: blank_hints must be a list with one non-empty list of strings per blank")
        if value and self.kind_spec.graded_as_file:
            n = len(self.kind_spec.blanks(self))
            if len(value) != n:
                raise PackError(f"{path}: blank_hints has {len(value)} lists, expected one per blank ({n})")
        return tuple(tuple(h) for h in value)

    @cached_property
    def solution_source(self) -> str:
        if not self.kind_spec.graded_as_file:
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
    def equivalents(self) -> tuple[Equivalent, ...]:
        """``[[equivalent]]`` tables of misconceptions.toml: ``blank``, ``fill``."""
        path = self.path / "misconceptions.toml"
        if not path.exists():
            return ()
        items = []
        for i, e in enumerate(_read_toml(path).get("equivalent", [])):
            try:
                items.append(Equivalent(blank=int(e["blank"]), fill=str(e["fill"])))
            except KeyError as exc:
                raise PackError(f"{path}: equivalent #{i + 1}: missing field {exc.args[0]!r}") from None
        return tuple(items)

    @cached_property
    def quiz(self) -> tuple[QuizQuestion, ...]:
        """The questions a learner answers by choosing (quiz.toml; a kind may make them otherwise)."""
        return self.kind_spec.questions(self)

    @cached_property
    def predict(self) -> tuple[Any, ...]:
        """A ``predict`` item's questions (``practice.predict.PredictQuestion``) from predict.toml: the kind's."""
        return tuple(self.kind_spec.predictions(self))
