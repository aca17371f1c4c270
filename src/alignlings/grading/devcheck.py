"""Proofs a pack must pass (``alignlings dev check`` and CI): every template fails as shipped,
every reference solution passes, every case is reproducible (two runs of the reference agree), every
blank is graded (a wrong value of the same type in it fails a case), every misconception is rejected
on its own blank with its own feedback, every listed equivalent right answer passes, the reference
passes at levels 4 and 5 and every misconception is rejected there (``practice.levels``), and every
exercise has all its texts in both languages (per-blank hints, where given, from a nudge to the
answer: at least two per blank).

Every problem names the file at fault and a line in it (``FILE:LINE: message``, :func:`locate`): a
misconception's problems its ``id`` line in misconceptions.toml, a text's problems its key in
``texts/<lang>.toml`` of that language, a template or reference problem solution.py, and so on."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from alignlings.content import blanks as bl
from alignlings.content import kinds
from alignlings.content.kinds.fill import MIN_BLANK_HINTS, MIN_MISCONCEPTIONS, given_blank_hints  # noqa: F401
from alignlings.content.pack import LANGS, Pack
from alignlings.content.exercise import Exercise

MIN_HINTS = 3


@dataclass
class Report:
    exercise: str
    problems: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_texts(ex: Exercise) -> list[str]:
    problems = []
    for lang in LANGS:
        try:
            texts = ex.texts(lang)
        except Exception as exc:  # noqa: BLE001 - report every broken file, not only the first
            text = str(exc)
            # an error naming its own file (the other language's, loaded together) is that file's
            problems.append(text if text.startswith(f"{ex.path}/") else f"texts/{lang}.toml: {text}")
            continue
        keys = _toml_keys(ex.path / "texts" / f"{lang}.toml")
        for key in ("statement", "explanation"):
            if key == "explanation" and not kinds.of(ex).texts_need_hints:
                continue
            if key not in keys:
                problems.append(f"texts/{lang}.toml: {key} is missing: add {key} = \"\"\"...\"\"\" in {lang}")
            elif not getattr(texts, key).strip():
                problems.append(f"texts/{lang}.toml: empty {key}")
        if kinds.of(ex).texts_need_hints and len(texts.hints) < MIN_HINTS:
            problems.append(f"texts/{lang}.toml: {len(texts.hints)} hints, expected at least {MIN_HINTS}")
        if lang not in ex.title:
            problems.append(f"exercise.toml: title has no {lang!r}")
    problems += kinds.of(ex).text_problems(ex)  # blanks and misconceptions, questions: the kind's own
    return problems


def _toml_keys(path: Path) -> set[str]:
    import tomllib

    try:
        with path.open("rb") as f:
            return set(tomllib.load(f))
    except (OSError, tomllib.TOMLDecodeError):
        return set()


def check_exercise(ex: Exercise, grader) -> Report:
    """Prove one exercise; every problem of the report reads ``FILE:LINE: message``."""
    report = _check_exercise(ex, grader)
    report.problems = list(dict.fromkeys(locate(ex, p) for p in report.problems))  # each problem once
    return report


def _check_exercise(ex: Exercise, grader) -> Report:
    report = Report(ex.id)
    report.problems += check_texts(ex)
    report.checked.append("texts en+zh")
    own = kinds.of(ex).dev_check(ex, grader)  # drills and quizzes prove themselves (practice.kinds)
    if own is not None:
        problems, checked = own
        report.problems += problems
        report.checked += checked
        return report
    from alignlings.grading.grader import template_for

    blanks = bl.find_blanks(ex.solution_source)
    unreproducible = grader.reference_reproducible(ex)
    for name in unreproducible:
        report.problems.append(f"case {name!r} is unreproducible: its values change between two runs of the "
                               "reference (seed its random inputs, e.g. torch.Generator().manual_seed(...))")
    if unreproducible:  # the reference itself cannot be judged on such a case: name it, and stop there
        return report
    report.checked.append("cases reproducible")
    ref = grader.check(ex.key, fills=[b.answer for b in blanks], run_main=False, variant=0)
    if not ref["passed"]:
        failing = [c["message"] for c in ref["cases"] if not c["passed"]] or [str(ref["error"])]
        report.problems.append(f"the reference solution fails: {failing[0]}")
    report.checked.append("reference passes")
    for lang in LANGS:
        tmpl = grader.check(ex.key, template_for(ex, lang), lang=lang, run_main=False, quick=True, variant=0)
        if tmpl["passed"]:
            report.problems.append(f"the {lang} template passes as shipped")
    report.checked.append("templates fail")
    report.problems += check_blanks_graded(ex, grader, blanks)
    report.checked.append("every blank graded")
    alone = check_blanks_judged_alone(ex, grader, blanks)
    # said, not failed: whether a scope can be rebuilt is decided by one trusted run, which a loaded
    # machine can cut short; tests/test_trusted_judging.py holds every built-in blank to it
    report.checked += alone or ["every blank judged on its own"]
    for m in ex.misconceptions:
        if not 1 <= m.blank <= len(blanks):
            continue  # packlint reports the blank out of range at its line; there is nothing to grade
        fills = [m.fill if b.index == m.blank else b.answer for b in blanks]
        v = grader.check(ex.key, fills=fills, run_main=False, quick=True, variant=0)  # per-blank cases decide
        entry = next((b for b in v["blanks"] if b["index"] == m.blank), None)
        if v["passed"]:
            report.problems.append(f"misconception {m.id} (blank {m.blank}) is accepted")
        elif entry is None or entry["misconception"] != m.id:
            got = entry["misconception"] or entry["message"] if entry else "no such blank"
            report.problems.append(f"misconception {m.id} (blank {m.blank}) is rejected without its feedback: {got}")
        others = [b["index"] for b in v["blanks"] if b["index"] != m.blank and b["passed"] is not True]
        if others:
            report.problems.append(f"misconception {m.id} also marks blanks {others} wrong")
    report.checked.append(f"{len(ex.misconceptions)} misconceptions rejected")
    report.problems += check_equivalents(ex, grader, blanks)
    if ex.equivalents:
        report.checked.append(f"{len(ex.equivalents)} equivalent answers pass")
    report.problems += check_levels(ex, grader, report)
    return report


def check_levels(ex: Exercise, grader, report: Report) -> list[str]:
    """Levels 4 and 5 (``practice.levels``): the files generate, the reference handed in at each level
    passes, and each misconception's file is rejected there; one whose outputs equal another's (or
    that leaves no outputs to match) is named per blank only, which ``checked`` says."""
    from alignlings.grading import levels

    if not levels.has_levels(ex):
        return []
    try:
        for level in levels.LEVELS:
            for lang in LANGS:
                levels.level_file(ex, level, lang)
    except levels.LevelError as exc:
        return [str(exc)]
    problems, notes = levels.prove(grader, ex, misconception_levels=(4,))  # level 5's file: the same code
    # a misconception the per-blank check already found accepted is one problem, not two
    said = {p.split(" (blank", 1)[0] for p in report.problems if p.startswith("misconception ") and "is accepted" in p}
    problems = [p for p in problems if p.split(" (blank", 1)[0] not in said]
    report.checked.append(f"levels 4 and 5: reference passes, {len(ex.misconceptions)} misconceptions rejected")
    per_blank = sorted({n.split(" ", 2)[1] for n in notes})
    report.checked += [f"levels 4 and 5: {m} named per blank only" for m in per_blank]
    return problems


# -- where a problem is ----------------------------------------------------------------------------
_FILES = ("texts/en.toml", "texts/zh.toml", "misconceptions.toml", "exercise.toml", "bugornot.toml", "quiz.toml",
          "solution.py", "buggy.py", "check.py")
_LOCATED = re.compile(r"^[^\n]*?\.(toml|py):\d+: ")


def _line(path: Path, pattern: str, start: int = 1) -> int:
    from alignlings.content.packlint import line_of

    return line_of(path, pattern, start)


def _id_line(path: Path, ident: str) -> int:
    return _line(path, rf"^\s*id\s*=\s*[\"']{re.escape(ident)}[\"']")


def _key_line(path: Path, message: str) -> int:
    """The line of the first TOML key the message names (``empty statement`` -> ``statement = ...``)."""
    for word in re.findall(r"[a-z_]+", message):
        line = _line(path, rf"^\s*{word}(\.[a-z]+)?\s*=", 0)
        if line:
            return line
    return 1


def locate(ex: Exercise, problem: str) -> str:
    """``problem`` as ``FILE:LINE: message``, FILE being the file of ``ex`` at fault."""
    if _LOCATED.match(problem):
        return problem
    text = problem
    root = f"{ex.path}/"
    if text.startswith(root):  # a PackError naming the file: "/abs/ex/misconceptions.toml: ..."
        text = text[len(root):]
    for rel in _FILES:
        if text.startswith(rel + ": "):
            rest = text[len(rel) + 2:]
            path = ex.path / rel
            rest = rest.removeprefix(f"{path}: ")  # a loader error that names the file again
            at = re.search(r"at line (\d+)", rest)  # a TOML syntax error says where
            if at:
                return f"{path}:{at.group(1)}: {rest}"
            if rel == "bugornot.toml":
                reason = re.match(r"reason (\d+)", rest)
                found = re.search(r"\(line (\d+)\)", rest)
                if reason:
                    line = _nth_line(path, r"^\s*\[\[reason\]\]", int(reason.group(1)))
                elif found:
                    line = _line(path, r"^\s*code\s*=") + int(found.group(1)) - 1
                else:
                    line = _key_line(path, rest)
            elif rel in ("misconceptions.toml", "quiz.toml"):
                named = re.search(r"(?:misconception|wrong_fix|question) (?:#\d+ )?['\"]?([\w-]+)['\"]?", rest)
                line = _id_line(path, named.group(1)) if named else 1
                line = line or 1
            elif rel.endswith(".toml"):
                line = _key_line(path, rest)
            else:
                line = _line(path, r"BLANK") if rel == "solution.py" else 1
            return f"{path}:{line}: {rest}"
    case = re.match(r"case (['\"])(.*?)\1", text)
    if case and (ex.path / "check.py").is_file():  # a case's problem: the line of check.py that names it
        check = ex.path / "check.py"
        named_line = _line(check, r"[\"']" + re.escape(repr(case.group(2))[1:-1]) + r"[\"']")
        return f"{check}:{named_line}: {text}"
    misc = ex.path / "misconceptions.toml"
    named = re.match(r"(misconception|wrong_fix) ([\w-]+)", text)
    if named:
        return f"{misc}:{_id_line(misc, named.group(2)) or 1}: {text}"
    drill = re.match(r"quiz [\w-]+:(verdict|reason)(?: option (\d+))?", text)
    if drill and kinds.of(ex).questions_file == "bugornot.toml":  # its two questions come from there
        path = ex.path / "bugornot.toml"
        if drill.group(1) == "reason" and drill.group(2):
            line = _nth_line(path, r"^\s*\[\[reason\]\]", int(drill.group(2)) + 1)
        else:
            line = _line(path, r"^\s*(observation|why)\b")
        return f"{path}:{line}: {text}"
    option = re.match(r"quiz ([\w:-]+) option (\d+): no \w+ (text|why)", text)
    if option and kinds.of(ex).questions_file == "quiz.toml":  # the option's own text or why
        from alignlings.content.predictions import option_line

        path = ex.path / "quiz.toml"
        index = next((i for i, q in enumerate(ex.quiz) if q.id == option.group(1)), 0)
        return f"{path}:{option_line(path, index, int(option.group(2)), option.group(3))}: {text}"
    quiz = re.match(r"quiz ([\w-]+)", text)
    if quiz:
        path = ex.path / kinds.of(ex).questions_file
        return f"{path}:{_id_line(path, quiz.group(1)) or 1}: {text}"
    equivalent = re.match(r"equivalent (['\"])(.*?)\1", text)
    if equivalent:
        return f"{misc}:{_line(misc, re.escape(equivalent.group(2)))}: {text}"
    if text.startswith("blank_hints given in"):
        missing = [lang for lang in LANGS if not given_blank_hints(ex, lang)]
        path = ex.path / "texts" / f"{missing[0] if missing else 'en'}.toml"
        return f"{path}:1: {text}"
    if "region" in text and text.startswith("the fix"):
        meta = ex.path / "exercise.toml"
        line = _line(meta, r"^\s*region\s*=")
        return f"{meta}:{line}: {text}"
    if text.startswith(("buggy.py", "a file made of equivalent")):
        path = ex.path / ("buggy.py" if text.startswith("buggy.py") else "misconceptions.toml")
        first = ex.meta.get("region", [1])[0] if isinstance(ex.meta.get("region"), list) and ex.meta.get("region") else 1
        return f"{path}:{first if text.startswith('buggy.py') else 1}: {text}"
    if text.startswith(("the reference solution", "the fixed solution.py")) or "template passes" in text:
        solution = ex.path / "solution.py"
        return f"{solution}:{_line(solution, 'BLANK') if kinds.of(ex).has_blanks else 1}: {text}"
    return f"{ex.path / 'exercise.toml'}:1: {text}"


def _nth_line(path: Path, pattern: str, n: int) -> int:
    line = 0
    for _ in range(n):
        line = _line(path, pattern, line + 1)
    return line


PERTURB = '__import__("alignlings.grading.casejob", fromlist=["perturb"]).perturb({}, {})'


def wrong_fills(blank: bl.Blank) -> list[str]:
    """Wrong values of the same type for ``blank``: its answer through ``casejob.perturb``, once
    keeping the order of its numbers and once reversing it (scaled and shifted, ints moved by one,
    bools negated, a module's parameters changed), or ``pass`` for a whole-statement blank (the
    statement left out)."""
    if blank.target == "statement":
        return ["pass"]
    return [PERTURB.format(blank.answer, how) for how in (0, 1)]


def check_blanks_graded(ex: Exercise, grader, blanks) -> list[str]:
    """``FILE:LINE: blank N is never graded`` for each blank whose wrong values (``wrong_fills``)
    all still pass every case: the per-blank cases first (one job per wrong value, in parallel),
    then, for the blanks they miss, the whole-file cases too."""
    source = ex.solution_source
    mutants = {f"{b.index}/{k}": bl.splice(source, blanks, b.index, fill)
               for b in blanks for k, fill in enumerate(wrong_fills(b))}
    if not mutants:
        return []
    alike = grader.behaves_like_reference(ex.key, mutants)
    problems = []
    for b in blanks:
        keys = [key for key in mutants if key.split("/")[0] == str(b.index)]
        if not all(alike.get(key) for key in keys):
            continue
        graded = False
        for key in keys:
            v = grader.check(ex.key, mutants[key], run_main=False, variant=0)
            graded = graded or bool(v["error"]) or not all(c["passed"] for c in v["cases"]) or not v["cases"]
        if not graded:
            problems.append(f"{ex.path / 'solution.py'}:{b.line}: blank {b.index} is never graded "
                            f"(with a wrong value in it, every case still passes)")
    return problems


def check_blanks_judged_alone(ex: Exercise, grader, blanks) -> list[str]:
    """``FILE:LINE: blank N cannot be judged on its own`` for each blank that recording cannot judge:
    its reference fill, evaluated on the reference's own recorded scopes, does not give back the
    recorded values (``Grader._self_check``; e.g. it calls a method of a class the file defines).
    Such a blank would be judged by the file's cases alone: no case or misconception of its own."""
    alone = grader.trusted(ex).recorded
    return [f"{ex.path / 'solution.py'}:{b.line}: blank {b.index} cannot be judged on its own (its reference "
            f"fill, run on the values recorded in its scope, does not give the reference's value: a method of "
            f"a class the file defines?); only the cases would judge it" for b in blanks if b.index not in alone]


def check_equivalents(ex: Exercise, grader, blanks) -> list[str]:
    """Every ``[[equivalent]]`` fill passes on its blank, and a file made of them passes.

    They are graded in rounds, the k-th equivalent of every blank together: the grader still judges
    each blank alone (from the recorded run), and a round costs one grading run.
    """
    problems = []
    by_blank: dict[int, list[str]] = {}
    for e in ex.equivalents:
        if not 1 <= e.blank <= len(blanks):
            problems.append(f"equivalent {e.fill!r}: blank {e.blank} is not a blank 1..{len(blanks)}")
            continue
        by_blank.setdefault(e.blank, []).append(e.fill)
    for k in range(max(map(len, by_blank.values()), default=0)):
        round_ = {i: fills[k] for i, fills in by_blank.items() if k < len(fills)}
        fills = [round_.get(b.index, b.answer) for b in blanks]
        v = grader.check(ex.key, fills=fills, run_main=False, quick=True, variant=0)
        for b in v["blanks"]:
            if b["index"] in round_ and b["passed"] is not True:
                problems.append(f"equivalent {round_[b['index']]!r} (blank {b['index']}) is rejected: "
                                f"{b['message'] or b['misconception']}")
        if not v["passed"] and not problems:
            failing = [c["message"] for c in v["cases"] if not c["passed"]] or [str(v["error"])]
            problems.append(f"a file made of equivalent answers {sorted(round_.items())} fails: {failing[0]}")
    return problems


def check_pack(pack: Pack, grader) -> list[Report]:
    return [check_exercise(ex, grader) for ex in pack]
