"""Exercise packs as data: load a pack folder (pack.toml + one folder per exercise).

The format is documented in docs/pack-format.md. This module only reads files; it imports
neither torch nor the learner's code, so listing exercises stays fast.
"""

from __future__ import annotations

import difflib
import re

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from alignlings.i18n import LANGS  # noqa: E402,F401 - the one list of languages
from alignlings.content import kinds
from alignlings.content.packdata import (  # noqa: F401 - re-exported, the pack's data types
    PackError, _read_toml, _lang_dict, Misconception, Equivalent, WrongFix, QuizOption, QuizQuestion, Texts, ExerciseTexts,
)
from alignlings.content.exercise import Exercise


@dataclass(frozen=True)
class Track:
    """An ordered group of exercises in a pack (``[[track]]`` in pack.toml); a course lists packs
    then tracks. ``requires`` names tracks to finish first ("id" or "pack/id")."""

    id: str
    pack: str
    title: dict[str, str]
    requires: tuple[str, ...]
    exercises: tuple[str, ...]  # keys into Pack.exercises, in order
    implicit: bool = False  # made up by the loader: the pack declares no tracks, or these are left over

    @property
    def key(self) -> str:
        return f"{self.pack}/{self.id}"


INCLUDE_HELP = ("add a pack with --pack DIR (repeatable), ALIGNLINGS_PACK=DIR1{sep}DIR2, "
                "or include = [\"DIR\"] in your pack.toml")


@dataclass
class Pack:
    """One pack folder, or a course: several packs loaded together (``parts``, in order).

    ``exercises`` maps each exercise's key to it: the id, or ``pack/id`` where two packs of a course
    share an id. ``tracks`` lists every track of every part, in order.
    """

    id: str
    path: Path
    title: dict[str, str]
    exercises: dict[str, Exercise]
    tracks: list[Track] = field(default_factory=list)
    parts: list[Pack] = field(default_factory=list)  # the packs of a course; empty for one folder
    include: tuple[str, ...] = ()
    order: tuple[str, ...] = ()
    builtin: bool = False

    @property
    def packs(self) -> list[Pack]:
        return self.parts or [self]

    def describe(self) -> str:
        """The loaded packs, e.g. ``dpo-grpo (built-in), ipo (/home/t/ipo)``."""
        return ", ".join(f"{p.id} ({'built-in' if p.builtin else p.path})" for p in self.packs)

    def get(self, exercise_id: str) -> Exercise:
        """An exercise by key, by ``pack/id``, or by id when only one loaded pack has it."""
        if exercise_id in self.exercises:
            return self.exercises[exercise_id]
        pack_id, sep, ex_id = str(exercise_id).partition("/")
        if sep:
            for ex in self:
                if ex.pack == pack_id and ex.id == ex_id:
                    return ex
        same = [ex.key for ex in self if ex.id == exercise_id]
        if len(same) > 1:
            raise PackError(f"exercise: {exercise_id!r} is in several packs ({', '.join(same)}); "
                            "name one as PACK/ID")
        import os

        import difflib

        known = ", ".join(self.exercises)
        ids = sorted({*self.exercises, *(ex.id for ex in self)})
        close = difflib.get_close_matches(str(exercise_id), ids, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise PackError(f"exercise: unknown id {exercise_id!r}; {hint}expected one of {known}. "
                        f"Loaded packs: {self.describe()}; " + INCLUDE_HELP.format(sep=os.pathsep)) from None

    def track(self, name: str) -> Track:
        """A track by ``pack/id`` or by id when only one loaded pack has it."""
        found = [t for t in self.tracks if name in (t.key, t.id)]
        if len(found) != 1:
            what = "is in several packs; name it as PACK/ID" if found else "is not a track of the loaded packs"
            raise PackError(f"track: {name!r} {what}")
        return found[0]

    def track_of(self, key: str) -> Track | None:
        return next((t for t in self.tracks if key in t.exercises), None)

    def __iter__(self):
        return iter(self.exercises.values())

    def intro(self, lang: str = "en") -> str:
        """The pack's introduction (prerequisites, core formulas): ``intro`` in texts/<lang>.toml of
        the pack folder, or of each part of a course; "" where there is none."""
        if lang not in LANGS:
            raise PackError(f"lang: expected one of {', '.join(LANGS)}, got {lang!r}")
        texts = []
        for p in self.packs:
            path = p.path / "texts" / f"{lang}.toml"
            if path.is_file():
                texts.append(str(_read_toml(path).get("intro", "")).strip())
        return "\n\n".join(t for t in texts if t)

    def fill_exercises(self) -> list[Exercise]:
        """The fill-in coding exercises (kind "code"; ``bug`` drills are graded files too, without blanks)."""
        return [e for e in self if e.kind_spec.has_blanks]


def load_exercise(path: Path) -> Exercise:
    meta = _read_toml(path / "exercise.toml")
    where = f"{path / 'exercise.toml'}"
    kind = meta.get("kind", "code")
    if kind not in kinds.REGISTRY:  # the one list: the registry (practice.kinds), built-in kinds first
        raise PackError(f"{where}: kind must be one of {', '.join(map(repr, kinds.names()))}, got {kind!r}")
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


BUILTIN_PACK_ID = "dpo-grpo"
PackPaths = str | Path | Pack | list | tuple | None


DEFAULT_COURSE = ("dpo-grpo", "bug-drills")
"""What ``load_pack()`` loads with no path: the built-in fill-in pack, then the spot-the-bug drills."""


def load_pack(path: PackPaths = None) -> Pack:
    """Load a pack folder, or several as one course.

    ``path``: a folder, the name of a built-in pack (``"dpo-grpo"``), a list of them (a course, in
    that order), or None for the built-in course (``DEFAULT_COURSE``). A pack's ``include`` list in pack.toml comes before
    it; each folder is loaded once. Paths are made absolute here, so whatever later reads the
    exercises (the grader's sandbox, which runs in its own folder) sees absolute paths.
    """
    if isinstance(path, Pack):
        return path
    specs = list(path) if isinstance(path, (list, tuple)) else [path]
    if not specs or specs == [None]:
        specs = list(DEFAULT_COURSE)
    loaded: dict[Path, Pack] = {}
    for spec in specs:
        _expand(spec, Path.cwd(), loaded, ())
    parts = list(loaded.values())
    first = loaded[_find_folder(specs[0], Path.cwd(), "pack")]
    ids: dict[str, Path] = {}
    for p in parts:
        if p.id in ids:
            raise PackError(f"pack: two loaded packs have the id {p.id!r} ({ids[p.id]} and {p.path}); "
                            "change [pack] id in one pack.toml")
        ids[p.id] = p.path
    if len(parts) == 1:
        _link_tracks(first, parts)
        return first
    counts: dict[str, int] = {}
    for p in parts:
        for ex in p:
            counts[ex.id] = counts.get(ex.id, 0) + 1
    exercises: dict[str, Exercise] = {}
    for p in parts:
        for ex in p:
            ex.key = ex.id if counts[ex.id] == 1 else f"{p.id}/{ex.id}"
            exercises[ex.key] = ex
    course = Pack(id=first.id, path=first.path, title=first.title, exercises=exercises, parts=parts,
                  include=first.include, order=first.order, builtin=first.builtin)
    _link_tracks(course, parts)
    return course


def _find_folder(spec, base: Path, where: str) -> Path:
    """The absolute folder of a pack spec (a path relative to ``base``, or a built-in pack's name)."""
    if spec is None:
        return builtin_pack_path().resolve()
    text = str(spec)
    if not text.strip():
        raise PackError(f"{where}: expected a pack folder or a built-in pack name, got an empty string")
    candidate = (base / Path(text).expanduser()).resolve()
    if candidate.is_dir():
        return candidate
    builtin = builtin_pack_path().parent / text
    if "/" not in text and (builtin / "pack.toml").is_file():
        return builtin.resolve()
    raise PackError(f"{where}: {candidate} is not a folder (nor the name of a built-in pack: "
                    f"{', '.join(builtin_pack_names())})")


def _expand(spec, base: Path, loaded: dict[Path, Pack], stack: tuple[Path, ...], where: str = "pack") -> None:
    root = _find_folder(spec, base, where)
    if root in stack:
        chain = " -> ".join(str(p / "pack.toml") for p in (*stack, root))
        raise PackError(f"{root / 'pack.toml'}: include makes a cycle: {chain}")
    if root in loaded:
        return
    pack = _load_folder(root)
    for name in pack.include:
        _expand(name, root, loaded, (*stack, root), where=f"{root / 'pack.toml'}: include {name!r}")
    loaded[root] = pack


def _load_folder(root: Path) -> Pack:
    toml = root / "pack.toml"
    data = _read_toml(toml)
    meta = data.get("pack", {})
    if not isinstance(meta, dict):
        raise PackError(f"{toml}: [pack] must be a table")
    pack_id = str(meta.get("id", root.name))
    declared = meta.get("order", [])
    include = meta.get("include", [])
    for name, value in (("order", declared), ("include", include)):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise PackError(f"{toml}: [pack] {name} must be a list of strings")
    order = list(declared)
    found = sorted(p.name for p in root.iterdir() if (p / "exercise.toml").is_file())
    order += [name for name in found if name not in order]
    exercises = {}
    for name in order:
        if not (root / name / "exercise.toml").is_file():
            raise PackError(f"{toml}:{_toml_line(toml, name, r'order')}: order lists {name!r} but "
                            f"{root / name}/exercise.toml is missing{_did_you_mean(name, found)}")
        ex = load_exercise(root / name)
        ex.pack, ex.key = pack_id, ex.id
        exercises[ex.id] = ex
    folder_to_id = {ex.path.name: ex.id for ex in exercises.values()}
    title = _lang_dict(meta.get("title", root.name), f"{toml}: pack title")
    tracks = _read_tracks(data.get("track", []), toml, pack_id, title, declared, folder_to_id)
    return Pack(id=pack_id, path=root, title=title, exercises=exercises, tracks=tracks, include=tuple(include),
                order=tuple(declared), builtin=root.parent == builtin_pack_path().parent.resolve())


def _read_tracks(items, toml: Path, pack_id: str, title: dict[str, str], order: list[str],
                 folder_to_id: dict[str, str]) -> list[Track]:
    """``[[track]]`` tables; without any, one implicit track holds the whole ``order``."""
    if not isinstance(items, list):
        raise PackError(f"{toml}: track must be an array of tables ([[track]])")
    tracks, seen, placed = [], set(), {}
    for i, t in enumerate(items):
        where = f"{toml}: track #{i + 1}"
        if not isinstance(t, dict) or not isinstance(t.get("id"), str) or not t["id"].strip():
            raise PackError(f"{where}: missing field 'id' (a non-empty string)")
        where = f"{toml}: track {t['id']!r}"
        if t["id"] in seen:
            raise PackError(f"{where}: a second track with this id")
        seen.add(t["id"])
        names, requires = t.get("exercises"), t.get("requires", [])
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise PackError(f"{where}: exercises must be a non-empty list of exercise folder names")
        if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
            raise PackError(f"{where}: requires must be a list of track ids")
        for name in names:
            if name not in order:
                line = _toml_line(toml, name, r"exercises", after=rf"^\s*id\s*=\s*[\"']{re.escape(t['id'])}[\"']")
                raise PackError(f"{toml}:{line}: track {t['id']!r}: exercise {name!r} is not in [pack] order "
                                f"(order lists: {', '.join(order) or 'nothing'}){_did_you_mean(name, order)}")
            if name in placed:
                raise PackError(f"{where}: exercise {name!r} is already in track {placed[name]!r}")
            placed[name] = t["id"]
        tracks.append(Track(id=t["id"], pack=pack_id, title=_lang_dict(t.get("title", t["id"]), where + " title"),
                            requires=tuple(requires), exercises=tuple(folder_to_id[n] for n in names)))
    rest = tuple(folder_to_id[n] for n in folder_to_id if n not in placed)
    if rest and not tracks:
        tracks.append(Track(id=pack_id, pack=pack_id, title=dict(title), requires=(), exercises=rest, implicit=True))
    elif rest:
        tracks.append(Track(id="more", pack=pack_id, title={"en": "More exercises", "zh": "更多练习"},
                            requires=(), exercises=rest, implicit=True))
    return tracks


def _link_tracks(course: Pack, parts: list[Pack]) -> None:
    """The course's tracks in pack order, exercise ids turned into course keys, requires checked."""
    tracks = []
    for p in parts:
        key_of = {ex.id: ex.key for ex in p}
        tracks += [Track(id=t.id, pack=t.pack, title=t.title, requires=t.requires,
                         exercises=tuple(key_of[e] for e in t.exercises), implicit=t.implicit) for t in p.tracks]
    course.tracks = tracks
    folder = {p.id: p.path for p in parts}
    for t in tracks:
        for r in t.requires:
            found = [u for u in tracks if r in (u.key, u.id)]
            if len(found) != 1:
                if found:
                    what = "names tracks in several packs; write PACK/TRACK"
                else:
                    known = [u.key for u in tracks if u.key != t.key] + [u.id for u in tracks if u.key != t.key]
                    close = difflib.get_close_matches(r, known, n=1, cutoff=0.6)
                    what = "names no track of the loaded packs" + (  # a typo, or a pack not loaded
                        f"; did you mean {close[0]!r}?" if close else
                        " (add its pack to include, or load it with another --pack)")
                toml = folder[t.pack] / "pack.toml"
                line = _toml_line(toml, r, r"requires", after=rf"^\s*id\s*=\s*[\"']{re.escape(t.id)}[\"']")
                raise PackError(f"{toml}:{line}: track {t.id!r}: requires {r!r} {what}")


def _did_you_mean(name: str, known) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _toml_line(toml: Path, value: str, key: str, after: str = "") -> int:
    """The line of pack.toml where ``key = [...]`` lists ``value`` (after the first line matching
    ``after``: a track's own table), else the key's line, else 1."""
    try:
        lines = toml.read_text(encoding="utf-8").splitlines()
    except OSError:
        return 1
    start = next((i for i, line in enumerate(lines) if after and re.search(after, line)), 0)
    quoted = re.compile(rf"[\"']{re.escape(value)}[\"']")
    depth, key_line = 0, 0
    for i in range(start, len(lines)):
        code = lines[i].split("#", 1)[0]
        if depth <= 0 and re.match(rf"^\s*{key}\s*=", code):
            key_line = key_line or i + 1
            code = code.split("=", 1)[1]
            depth = 0
        elif depth <= 0:
            continue
        if quoted.search(code):
            return i + 1
        depth += code.count("[") - code.count("]")
    return key_line or 1


def builtin_pack_names() -> list[str]:
    root = builtin_pack_path().parent
    return sorted(p.name for p in root.iterdir() if (p / "pack.toml").is_file())


def default_pack_paths() -> list[str] | None:
    """``$ALIGNLINGS_PACK`` as a list of folders (``os.pathsep``-separated), or None when unset."""
    import os

    value = os.environ.get("ALIGNLINGS_PACK", "")
    paths = [p for p in value.split(os.pathsep) if p.strip()]
    return paths or None


def builtin_pack_path() -> Path:
    return Path(str(resources.files("alignlings") / "packs" / "dpo-grpo"))
