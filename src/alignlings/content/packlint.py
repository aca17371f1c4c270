"""Structural proofs of a pack (``alignlings dev check``, before anything is graded).

Every problem is one line that names a file and a line, never a traceback:

- ``pack.toml``: every exercise folder is in ``order``; ``include`` and tracks load (the loader's
  own checks: every track's exercises are in ``order``, ``requires`` names a loaded track).
- ``exercise.toml``: the ``id`` is the folder's name; ``level`` in 1..5; ``timeout`` in 1..120 s;
  ``entry`` lists names that solution.py defines at the top level, and covers every name the cases
  call on the module (``m.dpo_loss(...)`` in check.py).
- ``misconceptions.toml``: each ``blank`` is a blank number of solution.py.
- ``texts/<lang>.toml``: every key of ``[comments]`` is the text of a comment in solution.py.
- anywhere (pack.toml and the pack's own texts included): no ``TODO(author)`` placeholder left
  from ``alignlings dev new``.
- ``misconceptions.toml``: no two misconceptions (or wrong fixes) share an ``id``.
- concept tags (exercise.toml, misconceptions.toml, quiz.toml): each is named in ``[concepts]`` of
  some loaded pack's ``texts/<lang>.toml``, in every language (with ``course``).
- with a grader, :func:`check_determinism`: every case gives the same value on two runs of the
  reference (an unseeded random case would fail learners at random).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from alignlings.content.pack import LANGS, Pack, PackError
from alignlings.content.exercise import Exercise
from alignlings.content.packdata import PLACEHOLDER  # noqa: F401 - re-exported

LEVELS = range(1, 6)  # 1 (warm-up) .. 5 (research-level)
TIMEOUT_SECONDS = (1.0, 120.0)


@dataclass(frozen=True)
class Problem:
    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def line_of(path: Path, pattern: str, start: int = 1) -> int:
    """The first line (1-based, from ``start``) matching the regex ``pattern``; ``start`` when none does."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return start
    rx = re.compile(pattern)
    for i in range(max(start, 1) - 1, len(lines)):
        if rx.search(lines[i]):
            return i + 1
    return start


# -- pack.toml -----------------------------------------------------------------------------------

def lint_pack(pack: Pack, course: Pack | None = None) -> list[Problem]:
    """Problems of one pack folder (not its includes) and of each of its exercises. ``course``: the
    loaded packs whose ``[concepts]`` may name a tag (default: ``pack`` alone)."""
    problems: list[Problem] = []
    toml = pack.path / "pack.toml"
    for path in [toml, *sorted((pack.path / "texts").glob("*.toml"))]:
        problems += _placeholders_in(path)
    folders = sorted(p.name for p in pack.path.iterdir() if (p / "exercise.toml").is_file())
    for name in folders:
        if name not in pack.order:
            problems.append(Problem(toml, line_of(toml, r"^\s*order\s*=") if pack.order else
                                    line_of(toml, r"^\s*\[pack\]"),
                                    f"exercise folder {name!r} is missing from [pack] order"))
    names = _concept_names(course or pack)
    problems += _question_ids(pack)
    for ex in pack:
        problems += lint_exercise(ex)
        problems += _concept_tags(ex, names)
    return problems + _bank_problems(pack)


def _bank_problems(pack: Pack) -> list[Problem]:
    """The pack's interview questions (``interview/<track>.toml``, practice.questionbank), each problem at
    its question's ``id`` line."""
    from alignlings.content import questionbank

    out: list[Problem] = []
    if not questionbank.bank_files(pack):
        return out
    for text in questionbank.bank_problems(pack):
        where, _, message = text.partition(": ")
        path = Path(where)
        named = re.search(r"question '([^']+)'", message)
        line = line_of(path, rf'^\s*id\s*=\s*"{re.escape(named.group(1))}"') if named else 1
        out.append(Problem(path, line, message))
    return out


def _concept_names(course: Pack) -> dict[str, dict[str, str]]:
    from alignlings.practice.review import concept_names

    out: dict[str, dict[str, str]] = {}
    for lang in LANGS:
        try:
            out[lang] = concept_names(course, lang)
        except Exception:  # noqa: BLE001 - a broken texts file is reported by the loader's own checks
            out[lang] = {}
    return out


def _concept_tags(ex: Exercise, names: dict[str, dict[str, str]]) -> list[Problem]:
    """Every tag an exercise uses is named in ``[concepts]`` of a loaded pack, in every language."""
    from alignlings.practice import review

    where: list[tuple[Path, str]] = []
    try:
        for tags in review.blank_concepts(ex).values():
            where += [(ex.path / "exercise.toml", t) for t in tags]
        where += [(ex.path / "exercise.toml", t) for t in review.drill_concepts(ex)]
        if ex.kind_spec.has_blanks:
            raw = {m.get("id"): m for m in _toml_tables(ex.path / "misconceptions.toml", "misconception")}
            for m in ex.misconceptions:
                where += [(ex.path / "misconceptions.toml", t) for t in (raw.get(m.id, {}).get("concepts") or ())]
        if ex.kind_spec.answered_by_choice and ex.kind_spec.questions_file == "quiz.toml":
            # tags per question (bugornot.toml's are the drill's; a predict item has no quiz.toml)
            where += [(ex.path / "quiz.toml", t) for tags in review.question_concepts(ex).values() for t in tags]
        where += [(ex.path / "predict.toml", t) for q in ex.predict for t in q.concepts]  # predict items
    except PackError as exc:
        return [problem_of(ex, str(exc))]
    out, seen = [], set()
    for path, tag in where:
        missing = [lang for lang in LANGS if tag not in names.get(lang, {})]
        if missing and (path, tag) not in seen:
            seen.add((path, tag))
            out.append(Problem(path, line_of(path, rf"[\"']{re.escape(tag)}[\"']"),
                               f"unknown concept tag {tag!r}: name it in [concepts] of the pack's "
                               f"texts/{missing[0]}.toml (e.g. {tag} = \"...\")"))
    return out


def problem_of(ex: Exercise, text: str) -> Problem:
    """A loader's error (``/abs/ex/FILE:LINE: message``, ``/abs/ex/FILE: message`` or a bare message)
    as a :class:`Problem` of ``ex``'s file at fault (exercise.toml when it names none)."""
    found = re.match(r"^(/[^\n]*?\.(?:toml|py))(?::(\d+))?: (.*)$", text, re.S)
    if found and found.group(1).startswith(str(ex.path)):
        return Problem(Path(found.group(1)), int(found.group(2) or _line_in(found.group(3))), found.group(3))
    return Problem(ex.path / "exercise.toml", _line_in(text), text)


def _question_ids(pack: Pack) -> list[Problem]:
    """A question id (quiz, bug-or-not, predict) is unique in the pack: answers are recorded per pack
    and question, so two exercises asking one id would share a learner's answers. Each repeat is
    reported at its own line, naming where the id is first asked."""
    first: dict[str, tuple[Exercise, Path, int]] = {}
    out = []
    for ex in pack:
        spec = ex.kind_spec
        try:
            ids = spec.question_ids(ex)
        except PackError:
            continue  # the file's own problem is reported where it is
        authored = "predict.toml" if (spec.name == "predict") else spec.questions_file
        for qid in ids:
            if authored in ("quiz.toml", "predict.toml"):
                path = ex.path / authored
                line = line_of(path, rf"^\s*id\s*=\s*[\"']{re.escape(qid)}[\"']")
            else:  # bug-or-not: its ids ("DRILL:verdict", "DRILL:reason") come from the exercise id
                path = ex.path / "exercise.toml"
                line = line_of(path, r"^\s*id\s*=")
            if qid in first:
                other, other_path, other_line = first[qid]
                out.append(Problem(path, line, f"question id {qid!r} is already used by {other.id!r} "
                                               f"({other_path.relative_to(pack.path)}:{other_line}): question ids "
                                               "are unique in the pack across quiz, bug-or-not and predict items"))
            else:
                first[qid] = (ex, path, line)
    return out


def _toml_tables(path: Path, name: str) -> list[dict]:
    import tomllib

    try:
        with path.open("rb") as f:
            return [t for t in tomllib.load(f).get(name, []) if isinstance(t, dict)]
    except (OSError, tomllib.TOMLDecodeError):
        return []


# -- one exercise --------------------------------------------------------------------------------

def lint_exercise(ex: Exercise) -> list[Problem]:
    problems: list[Problem] = []
    meta = ex.path / "exercise.toml"
    if ex.id != ex.path.name:
        problems.append(Problem(meta, line_of(meta, r"^\s*id\s*="),
                                f"id {ex.id!r} differs from its folder {ex.path.name!r} (the id is the folder's name)"))
    level = ex.meta.get("level", 1)
    if isinstance(level, bool) or not isinstance(level, int) or level not in LEVELS:
        problems.append(Problem(meta, line_of(meta, r"^\s*level\s*="),
                                f"level must be an integer from {LEVELS.start} to {LEVELS.stop - 1}, got {level!r}"))
    timeout = ex.meta.get("timeout", 10)
    lo, hi = TIMEOUT_SECONDS
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not lo <= timeout <= hi:
        problems.append(Problem(meta, line_of(meta, r"^\s*timeout\s*="),
                                f"timeout must be a number of seconds from {lo:g} to {hi:g}, got {timeout!r}"))
    problems += _placeholders(ex)
    if not ex.kind_spec.graded_as_file:
        return problems
    solution = ex.path / "solution.py"
    try:
        source = ex.solution_source
        tree = ast.parse(source)
    except (PackError, SyntaxError) as exc:
        line = getattr(exc, "lineno", None) or 1
        return problems + [Problem(solution, line, f"cannot read solution.py: {getattr(exc, 'msg', exc)}")]
    problems += _entry(ex, tree, meta)
    problems += _misconception_blanks(ex, source)
    problems += _comment_keys(ex, source)
    return problems


def _placeholders(ex: Exercise) -> list[Problem]:
    out = []
    for path in sorted(ex.path.rglob("*")):
        if path.suffix in (".toml", ".py") and path.is_file():
            out += _placeholders_in(path)
    return out


def _placeholders_in(path: Path) -> list[Problem]:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    return [Problem(path, i, f"{PLACEHOLDER} placeholder from `dev new`: write the real text")
            for i, line in enumerate(lines, start=1) if PLACEHOLDER in line]


def defined_names(tree: ast.Module) -> set[str]:
    """Names a module defines at its top level (functions, classes, assignments, imports)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def called_names(check_source: str) -> dict[str, int]:
    """Names the cases call on the module under test (``m.name(...)``), with the line of the first call.

    The module is the first parameter of every function (or lambda) that a ``Case(...)`` runs:
    named directly, built by a factory that returns an inner function, or a lambda; helpers it is
    passed to are followed. Attributes the check assigns on the module itself are left out.
    """
    tree = ast.parse(check_source)
    defs: dict[str, ast.FunctionDef] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs.setdefault(node.name, node)

    def runner(expr, depth=0):
        if depth > 4 or expr is None:
            return None
        if isinstance(expr, ast.Lambda):
            return expr
        if isinstance(expr, ast.Name) and expr.id in defs:
            return defs[expr.id]
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in defs:
            factory = defs[expr.func.id]  # a factory: follow what it returns
            returned = [n.value for n in ast.walk(factory) if isinstance(n, ast.Return)]
            return next((r for r in (runner(v, depth + 1) for v in returned) if r is not None), None)
        return None

    # what the check itself sets on the module (m.policy = ...) is not the learner's to define
    stored = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)}
    todo: list[tuple[ast.AST, str]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Case"):
            continue
        fn = node.args[2] if len(node.args) > 2 else next((k.value for k in node.keywords if k.arg == "run"), None)
        target = runner(fn)
        if target is not None and target.args.args:
            todo.append((target, target.args.args[0].arg))
    used: dict[str, int] = {}
    seen: set[tuple[int, str]] = set()
    while todo:  # the runners, and the helpers they pass the module to (build(m) -> m.RewardModel(...))
        fn, module = todo.pop()
        if (id(fn), module) in seen:
            continue
        seen.add((id(fn), module))
        for sub in ast.walk(fn):
            if not isinstance(sub, ast.Call):
                continue
            f = sub.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == module \
                    and f.attr not in stored:
                used[f.attr] = min(used.get(f.attr, sub.lineno), sub.lineno)
            elif isinstance(f, ast.Name) and f.id in defs:
                helper = defs[f.id]
                for i, arg in enumerate(sub.args):
                    if isinstance(arg, ast.Name) and arg.id == module and i < len(helper.args.args):
                        todo.append((helper, helper.args.args[i].arg))
    return used


def _entry(ex: Exercise, tree: ast.Module, meta: Path) -> list[Problem]:
    out = []
    defined = defined_names(tree)
    entry_line = line_of(meta, r"^\s*entry\s*=")
    if not ex.entry:
        out.append(Problem(meta, entry_line if entry_line > 1 else 1,
                           "entry is empty: list the names a learner's file must define, e.g. entry = [\"dpo_loss\"]"))
    for name in ex.entry:
        if name not in defined:
            out.append(Problem(meta, entry_line, f"entry names {name!r}, which solution.py does not define "
                                                 "at the top level"))
    check = ex.path / "check.py"
    try:
        used = called_names(check.read_text(encoding="utf-8"))
    except (OSError, SyntaxError) as exc:
        return out + [Problem(check, getattr(exc, "lineno", None) or 1, f"cannot read check.py: {exc}")]
    for name, line in sorted(used.items(), key=lambda kv: kv[1]):
        if name not in defined:
            out.append(Problem(check, line, f"the cases call {name!r}, which solution.py does not define"))
        elif ex.entry and name not in ex.entry:
            out.append(Problem(meta, entry_line, f"entry does not list {name!r}, which the cases call "
                                                 f"(check.py line {line})"))
    return out


def _misconception_blanks(ex: Exercise, source: str) -> list[Problem]:
    from alignlings.content import blanks as bl

    path = ex.path / "misconceptions.toml"
    try:
        n = len(bl.find_blanks(source))
    except bl.BlankError as exc:
        return [Problem(ex.path / "solution.py", _line_in(str(exc)), str(exc).removeprefix("solution.py "))]
    try:
        miscs = ex.misconceptions
    except PackError as exc:
        return [Problem(path, 1, str(exc).removeprefix(f"{path}: "))]
    out, start, seen = [], 1, set()
    for m in miscs:
        header = line_of(path, r"^\s*\[\[misconception\]\]", start)
        start = header + 1
        if m.id in seen:
            out.append(Problem(path, line_of(path, r"^\s*id\s*=", start),
                               f"misconception id {m.id!r} is used twice: every misconception needs its own id"))
        seen.add(m.id)
        if not 1 <= m.blank <= n:
            out.append(Problem(path, line_of(path, r"^\s*blank\s*=", start),
                               f"misconception {m.id!r}: blank {m.blank} is out of range: solution.py has "
                               f"blanks 1 to {n}"))
    return out


def _line_in(message: str) -> int:
    found = re.search(r"line (\d+)", message)
    return int(found.group(1)) if found else 1


def _comment_keys(ex: Exercise, source: str) -> list[Problem]:
    from alignlings.content import blanks as bl

    comments = {text[1:].strip() for _, _, text in bl._comments(source)}
    out = []
    for lang in LANGS:
        path = ex.path / "texts" / f"{lang}.toml"
        try:
            keys = ex.texts(lang).comments
        except PackError as exc:
            text = str(exc)
            named = re.match(r"(\S+\.toml): ", text)  # both languages load together: the error names the file
            at = Path(named.group(1)) if named else path
            out.append(Problem(at, _line_in(text), text.removeprefix(f"{at}: ")))
            break  # one report is enough
        for key in keys:
            if key not in comments:
                out.append(Problem(path, line_of(path, re.escape(key)),
                                   f"[comments] key {key!r} matches no comment in solution.py"))
    return out


# -- with the grader -----------------------------------------------------------------------------

def check_determinism(ex: Exercise, grader) -> list[Problem]:
    """Run the reference against itself: a case whose value differs between the two runs is unseeded."""
    from alignlings.content import blanks as bl

    blanks = bl.find_blanks(ex.solution_source)
    verdict = grader.check(ex.key, fills=[b.answer for b in blanks], run_main=False)
    if verdict.get("error"):
        return []  # the reference does not run: dev check reports that itself
    check = ex.path / "check.py"
    judged = _expect_cases(check)  # judged by a predicate (training outcomes), not against the reference
    out = []
    for case in verdict["cases"]:
        if not case["passed"] and "raised" not in case["message"] and case["name"] not in judged:
            out.append(Problem(check, line_of(check, re.escape(repr(case["name"])[1:-1])),
                               f"case {case['name']!r} gives different values on two runs of the reference: "
                               f"seed it (torch.Generator().manual_seed(...)); {case['message']}"))
    return out


def _expect_cases(check: Path) -> set[str]:
    """Names (string literals) of the cases that have ``expect=``."""
    try:
        tree = ast.parse(check.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return set()
    return {node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Case"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
            and any(k.arg == "expect" for k in node.keywords)}
