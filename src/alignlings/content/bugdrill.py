"""Spot-the-bug drills: the ``bug`` and ``bug-or-not`` exercise kinds (docs/pack-format.md).

``kind = "bug"``: the learner starts from ``buggy.py`` (complete code with one real bug) and edits it
until it behaves like ``solution.py`` (the fixed code, the reference) on every case of ``check.py``.
The grader grades the whole file as usual (no blanks); :func:`annotate` then adds a ``bug`` entry to
the verdict: which lines the learner changed (difflib against buggy.py), which cases still fail, a
hint toward the region of the bug (``region = [first, last]`` in exercise.toml, worded as "look
near ..." without naming the line), the known wrong fix the file behaves like (``[[wrong_fix]]`` in
misconceptions.toml, matched by behaviour against the trusted run of each wrong fix) and, once it
passes, the story of the real bug (``story`` in texts/<lang>.toml).

Integrity is the grader's: the learner's file runs in a sandboxed job that returns case values only;
buggy.py and the wrong fixes run in the trusted job beside the reference (pack code only); every
comparison happens here, in the caller's process.

``kind = "bug-or-not"``: ``bugornot.toml`` holds code, an observation that looks wrong, the answer
("bug" or "expected") and reasons, each explained. It is asked through the quiz machinery as two
questions (:func:`bug_or_not_questions`): bug or expected, then why.
"""

from __future__ import annotations

import ast
import difflib
from typing import TYPE_CHECKING, Any

from alignlings import i18n
from alignlings.content.packdata import PackError, QuizOption, QuizQuestion, WrongFix, _lang_dict, _read_toml

if TYPE_CHECKING:
    from alignlings.content.exercise import Exercise

MIN_WRONG_FIXES = 2
MIN_REASONS = 3
ANSWERS = ("bug", "expected")

MESSAGES = i18n.table("practice.bugdrill")  # strings: locales/{en,zh}.toml [practice.bugdrill]


def msg(key: str, lang: str, **kw) -> str:
    table = MESSAGES[key]
    return table.get(lang, table["en"]).format(**kw)


# -- bug drills: the variants the trusted job runs ---------------------------------------------------
def apply_wrong_fix(ex: Exercise, fix: WrongFix) -> str:
    """buggy.py with the wrong fix applied: ``find`` (which must occur exactly once) replaced by
    ``replace``, or the whole file ``file`` of the exercise folder."""
    if fix.file:
        path = ex.path / fix.file
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise PackError(f"{ex.path / 'misconceptions.toml'}: wrong_fix {fix.id!r}: file {path} missing") from None
    buggy = ex.buggy_source
    count = buggy.count(fix.find)
    if count != 1:
        raise PackError(f"{ex.path / 'misconceptions.toml'}: wrong_fix {fix.id!r}: find occurs {count} times in "
                        "buggy.py, expected exactly once")
    return buggy.replace(fix.find, fix.replace, 1)


def trusted_variants(ex: Exercise) -> dict[str, str]:
    """The pack-code variants of a bug drill the trusted job runs beside the reference: the buggy
    file ("buggy") and each known wrong fix ("w:<id>")."""
    out = {"buggy": ex.buggy_source}
    for fix in ex.wrong_fixes:
        out[f"w:{fix.id}"] = apply_wrong_fix(ex, fix)
    return out


# -- what the learner changed ---------------------------------------------------------------------
def changes(buggy: str, code: str) -> list[dict]:
    """The learner's edits as hunks: ``old`` (first, last) lines of buggy.py, ``new`` (first, last)
    lines of the learner's file (1-based, inclusive; None where a side is empty), and the text."""
    a, b = buggy.splitlines(), code.splitlines()
    hunks = []
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        hunks.append({"old": [i1 + 1, i2] if i2 > i1 else None, "new": [j1 + 1, j2] if j2 > j1 else None,
                      "removed": a[i1:i2], "added": b[j1:j2], "at_old": i1 + 1})
    return hunks


def unified_diff(buggy: str, code: str) -> str:
    return "".join(difflib.unified_diff(buggy.splitlines(keepends=True), code.splitlines(keepends=True),
                                        fromfile="buggy.py", tofile="yours.py", n=2))


def _span(a: int, b: int, lang: str) -> str:
    return msg("line", lang, n=a) if a == b else msg("lines", lang, a=a, b=b)


def describe_changes(hunks: list[dict], lang: str) -> str:
    if not hunks:
        return msg("unchanged", lang)
    parts = []
    for h in hunks:
        if h["new"]:
            parts.append(_span(*h["new"], lang))
        else:
            parts.append(msg("removed", lang, what=_span(*h["old"], lang)))
    return msg("changed", lang, lines=msg("join", lang).join(parts))


def region(ex: Exercise) -> tuple[int, int]:
    """``region = [first, last]`` of exercise.toml: the lines of buggy.py where the bug lives."""
    value = ex.meta.get("region")
    n = len(ex.buggy_source.splitlines())
    if value is None:
        return 1, n
    if (not isinstance(value, list) or len(value) != 2 or not all(isinstance(v, int) for v in value)
            or not 1 <= value[0] <= value[1] <= n):
        raise PackError(f"{ex.path / 'exercise.toml'}: region must be [first, last] lines of buggy.py "
                        f"(1..{n}), got {value!r}")
    return value[0], value[1]


def _enclosing_function(source: str, line: int) -> tuple[str, int, int] | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    found = [(n.lineno, n.end_lineno or n.lineno, n.name) for n in ast.walk(tree)
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.lineno <= line <= (n.end_lineno or n.lineno)]
    if not found:
        return None
    start, end, name = max(found)  # the innermost
    return name, start, end


def where(ex: Exercise, lang: str) -> str:
    """The bug's neighbourhood, wide enough not to give the line away: the region widened by four
    lines each side (kept inside its function), and the function's name."""
    first, last = region(ex)
    source = ex.buggy_source
    func = _enclosing_function(source, first)
    lo, hi = max(1, first - 4), min(len(source.splitlines()), last + 4)
    if func:
        lo, hi = max(lo, func[1]), min(hi, func[2])
    name = msg("where_func", lang, name=func[0]) if func else ""
    return msg("where", lang, a=lo, b=hi, func=name)


def touches_region(ex: Exercise, hunks: list[dict]) -> bool:
    """Whether any edit lies within the bug's region of buggy.py (an insertion counts where it lands)."""
    first, last = region(ex)
    for h in hunks:
        lo, hi = h["old"] if h["old"] else (h["at_old"] - 1, h["at_old"])
        if lo <= last and hi >= first:
            return True
    return False


# -- the verdict ------------------------------------------------------------------------------------
def annotate(ex: Exercise, trusted, learner, code: str, verdict: dict, lang: str, names: list[str]) -> dict:
    """Add ``verdict["bug"]``: ``changed`` (hunks), ``changes`` (one sentence), ``diff`` (unified),
    ``failing`` (case names), ``hint`` (toward the region, when it fails), ``wrong_fix`` (the id of
    the known wrong fix it behaves like) and ``message`` (its feedback), ``story`` (once passed)."""
    from alignlings.grading.feedback import case_name
    from alignlings.grading.behaviour import _decode_cases, _same_behaviour

    hunks = changes(ex.buggy_source, code)
    info: dict[str, Any] = {"changed": hunks, "changes": describe_changes(hunks, lang),
                            "changed_lines": sorted({n for h in hunks if h["new"] for n in range(h["new"][0], h["new"][1] + 1)}),
                            "diff": unified_diff(ex.buggy_source, code), "failing": [], "hint": None,
                            "wrong_fix": None, "message": None, "like_buggy": False, "story": None}
    verdict["bug"] = info
    texts = ex.texts(lang)
    if verdict["passed"]:
        info["message"] = msg("fixed", lang)
        info["story"] = texts.story
        return verdict
    info["failing"] = [case_name(c, lang) for c in verdict["cases"] if not c["passed"]]
    got = None
    value = getattr(learner, "value", None)
    if getattr(learner, "ok", False) and isinstance(value, dict) and not value.get("load_error"):
        decoded, problem = _decode_cases(value.get("cases"), names)
        got = None if problem else decoded
    if got is not None:
        buggy = trusted.variants.get("buggy")
        if buggy is not None and _same_behaviour(got, buggy, names):
            info["like_buggy"] = True
            info["message"] = msg("unchanged", lang) if not hunks else msg("same_as_buggy", lang)
        else:
            for fix in ex.wrong_fixes:
                behaviour = trusted.variants.get(f"w:{fix.id}")
                if behaviour is not None and _same_behaviour(got, behaviour, names):
                    info["wrong_fix"] = fix.id
                    info["message"] = fix.feedback.get(lang) or fix.feedback.get("en", "")
                    break
    if hunks:
        key = "inside" if touches_region(ex, hunks) else "outside"
        info["hint"] = msg(key, lang, where=where(ex, lang))
    return verdict


def verdict_lines(verdict: dict, lang: str) -> list[str]:
    """The bug entry of a verdict as plain lines (terminal and notebook)."""
    info = verdict.get("bug")
    if not info:
        return []
    lines = [info["changes"]]
    if info.get("message") and info["message"] != info["changes"]:  # "not changed yet" once, not twice
        lines.append(info["message"])
    if info.get("failing"):
        lines.append(msg("still_failing", lang, cases=msg("join", lang).join(info["failing"][:4])))
    if info.get("hint"):
        lines.append(info["hint"])
    return lines


def render_verdict(verdict: dict, lang: str, console) -> None:
    """The terminal's bug section: what changed, the diff, the wrong fix, the hint, the story."""
    from rich.markdown import Markdown
    from rich.markup import escape
    from rich.panel import Panel
    from rich.syntax import Syntax

    info = verdict.get("bug")
    if not info:
        return
    if info.get("diff"):
        console.print(Syntax(info["diff"].rstrip(), "diff", line_numbers=False))
    for line in verdict_lines(verdict, lang):
        console.print(escape(line))
    if info.get("story"):
        console.print(Panel(Markdown(info["story"]), title=msg("story_title", lang),
                            expand=False))


# -- bug-or-not -------------------------------------------------------------------------------------
def bug_or_not_data(ex: Exercise) -> dict:
    """bugornot.toml, checked: ``code``, ``observation`` (en/zh), ``answer`` ("bug" or "expected"),
    ``why`` (en/zh: why that answer), at least three ``[[reason]]`` (``text``, ``why``, one with
    ``correct = true``)."""
    path = ex.path / "bugornot.toml"
    data = _read_toml(path)
    try:
        code = str(data["code"]).strip("\n")
        observation = _lang_dict(data["observation"], f"{path}: observation")
        answer = str(data["answer"])
        why = _lang_dict(data["why"], f"{path}: why")
        reasons = [(_lang_dict(r["text"], f"{path}: reason text"), _lang_dict(r["why"], f"{path}: reason why"),
                    bool(r.get("correct", False))) for r in data["reason"]]
    except KeyError as exc:
        raise PackError(f"{path}: missing field {exc.args[0]!r}") from None
    if answer not in ANSWERS:
        raise PackError(f"{path}: answer must be 'bug' or 'expected', got {answer!r}")
    if len(reasons) < MIN_REASONS or sum(r[2] for r in reasons) != 1:
        raise PackError(f"{path}: expected at least {MIN_REASONS} [[reason]] tables, exactly one with correct = true")
    return {"code": code, "observation": observation, "answer": answer, "why": why, "reasons": reasons}


def bug_or_not_questions(ex: Exercise) -> tuple[QuizQuestion, ...]:
    """The drill as two quiz questions: bug or expected (both options explained by ``why``), then
    the reason (each option explained)."""
    d = bug_or_not_data(ex)
    langs = ("en", "zh")
    q1 = QuizQuestion(
        id=f"{ex.id}:verdict",
        question={lang: msg("verdict_q", lang, observation=d["observation"][lang], code=d["code"]) for lang in langs},
        options=tuple(QuizOption(text={lang: msg(a, lang) for lang in langs}, why=dict(d["why"])) for a in ANSWERS),
        answer=ANSWERS.index(d["answer"]))
    q2 = QuizQuestion(
        id=f"{ex.id}:reason",
        question={lang: msg("reason_q", lang, observation=d["observation"][lang]) for lang in langs},
        options=tuple(QuizOption(text=t, why=w) for t, w, _ in d["reasons"]),
        answer=next(i for i, r in enumerate(d["reasons"]) if r[2]))
    return (q1, q2)


# -- dev check ---------------------------------------------------------------------------------------
def check_bug_drill(ex: Exercise, grader) -> tuple[list[str], list[str]]:
    """``dev check`` for a bug drill: (problems, what was checked). buggy.py fails and the fixed
    solution.py passes; the fix lies within ``region``; each known wrong fix is rejected with its
    own feedback; the story exists in every language."""
    problems, checked = [], []
    try:
        trusted_variants(ex)  # every wrong fix applies to buggy.py
    except PackError as exc:
        return [str(exc)], checked
    for lang in ("en", "zh"):
        if not ex.texts(lang).story.strip():
            problems.append(f"texts/{lang}.toml: empty story (the real bug: repository, issue/PR, symptom, fix)")
    first, last = region(ex)
    fix_hunks = changes(ex.buggy_source, ex.solution_source)
    if not fix_hunks:
        problems.append("buggy.py and solution.py are the same")
    elif not all(touches_region(ex, [h]) for h in fix_hunks):
        problems.append(f"the fix (buggy.py -> solution.py) changes lines outside region [{first}, {last}]")
    checked.append("region holds the fix")
    unreproducible = grader.reference_reproducible(ex)
    if unreproducible:  # nothing can be matched by behaviour on a case that changes: say that, once
        for name in unreproducible:
            problems.append(f"case {name!r} is unreproducible: its values change between two runs of the "
                            "reference (seed its random inputs, e.g. torch.Generator().manual_seed(...))")
        return problems, checked  # buggy.py and the wrong fixes are proven once every case is
    checked.append("cases reproducible")
    ref = grader.check(ex.key, ex.solution_source, run_main=False)
    if not ref["passed"]:
        failing = [c["message"] for c in ref["cases"] if not c["passed"]] or [str(ref["error"])]
        problems.append(f"the fixed solution.py fails: {failing[0]}")
    checked.append("fixed version passes")
    buggy = grader.check(ex.key, ex.buggy_source, run_main=False)
    if buggy["passed"]:
        problems.append("buggy.py passes every case: no case shows the symptom")
    elif buggy.get("error"):
        problems.append(f"buggy.py does not run: {buggy['error']['message']}")
    elif not (buggy.get("bug") or {}).get("like_buggy"):
        problems.append("buggy.py is not recognised as the buggy code")
    checked.append(f"buggy version fails {sum(not c['passed'] for c in buggy['cases'])} case(s)")
    if len(ex.wrong_fixes) < MIN_WRONG_FIXES:
        problems.append(f"misconceptions.toml: {len(ex.wrong_fixes)} [[wrong_fix]], expected at least {MIN_WRONG_FIXES}")
    for fix in ex.wrong_fixes:
        for lang in ("en", "zh"):
            if not fix.feedback.get(lang, "").strip():
                problems.append(f"wrong_fix {fix.id}: no {lang} feedback")
        v = grader.check(ex.key, apply_wrong_fix(ex, fix), run_main=False)
        got = (v.get("bug") or {}).get("wrong_fix")
        if v["passed"]:
            problems.append(f"wrong_fix {fix.id} is accepted")
        elif got != fix.id:
            other = "behaves like buggy.py" if (v.get("bug") or {}).get("like_buggy") else (got or "no known wrong fix")
            problems.append(f"wrong_fix {fix.id} is rejected without its own feedback (matched: {other})")
    checked.append(f"{len(ex.wrong_fixes)} wrong fixes rejected with their feedback")
    return problems, checked


def check_bug_or_not(ex: Exercise) -> tuple[list[str], list[str]]:
    problems = []
    try:
        d = bug_or_not_data(ex)
    except PackError as exc:
        return [str(exc)], []
    for lang in ("en", "zh"):
        if not d["observation"].get(lang) or not d["why"].get(lang):
            problems.append(f"bugornot.toml: observation or why has no {lang} text")
        for i, (text, why, _) in enumerate(d["reasons"]):
            if not text.get(lang) or not why.get(lang):
                problems.append(f"bugornot.toml: reason {i + 1} has no {lang} text or why")
    try:
        compile(d["code"], "bugornot.toml", "exec")
    except SyntaxError as exc:
        problems.append(f"bugornot.toml: code does not parse: {exc.msg} (line {exc.lineno})")
    return problems, ["answer, reasons and code"]
