"""Levels 4 and 5 of a fill-in exercise: write the body, or write it from the statement.

Level 4 ("write the body") keeps each function that holds a blank with its signature, its docstring
and the reference's step comments (the ``# TODO n:`` lines and the body's own comment lines); the
body itself is gone. Level 5 ("from the statement") keeps the signature alone, and the statement is
written at the top of the file. Both files are generated from solution.py like the fill-in template
(nothing is stored per exercise); ``texts/<lang>.toml`` may add ``statement_level4`` or
``statement_level5`` where the exercise's statement is not enough on its own. Functions without
blanks (given helpers), module code and the test section under ``if __name__ == "__main__":`` stay.

Grading is the fill-in exercise's whole-file grading (``Grader``): the learner's file runs alone in
a sandboxed job on every visible, hidden, edge and gradient case, and its values are compared here
with the reference's. There are no blanks to splice, so a known misconception is recognised by its
outputs: each misconception's variant (the reference with the misconception's fill, computed in a
trusted job once per pack version) is compared with the learner's values on the cases, and a file
that behaves exactly like one is told that misconception's feedback by name.

The learner's file states its level in its first line (``# alignlings: level 4 ...``), so
``alignlings check`` and ``watch`` grade it at that level (``level_of``).
"""

from __future__ import annotations

import ast
import functools
import io
import re
import textwrap
import tokenize
from dataclasses import dataclass
from typing import Any

from alignlings import i18n
from alignlings.content import blanks as bl
from alignlings.content.packdata import _read_toml

LEVELS = (4, 5)
"""The levels generated from a fill-in exercise's reference (its own level is the fill-in, 1-3)."""
WEIGHT = {4: 2.0, 5: 3.0}
"""How much a pass at a level counts toward a concept's mastery, against 1 for a fill-in pass."""
_HEADER = re.compile(r"^#\s*alignlings:\s*level\s+(\d+)\b", re.I)
MSG = i18n.table("practice.levels")  # strings: locales/{en,zh}.toml [practice.levels]

__all__ = ["LEVELS", "WEIGHT", "LevelError", "check_level", "has_levels", "level_file", "level_of",
           "level_statement", "misconception_at", "misconception_match", "parse_level", "prove",
           "reference_at"]


class LevelError(ValueError):
    """A level that the exercise does not have, or a file that cannot be generated for it."""


def has_levels(ex: Any) -> bool:
    """Whether the exercise has levels 4 and 5: every fill-in exercise does (its reference is the
    body to write); quizzes, drills and predict items do not."""
    return bool(getattr(ex.kind_spec, "has_blanks", False))


def parse_level(level: Any, ex: Any | None = None) -> int:
    """``level`` as an int in ``LEVELS``; a clear error naming the argument otherwise."""
    if isinstance(level, str) and level.strip().isdigit():
        level = int(level.strip())
    if isinstance(level, bool) or not isinstance(level, int) or level not in LEVELS:
        raise LevelError(f"level: expected one of {', '.join(map(str, LEVELS))}, got {level!r}")
    if ex is not None and not has_levels(ex):
        raise LevelError(f"level: {ex.key!r} is not a fill-in exercise; only fill-in exercises have levels "
                         f"{' and '.join(map(str, LEVELS))}")
    return level


def level_of(code: str) -> int | None:
    """The level a learner's file states in its header comment (one of its first three lines), or None."""
    for line in code.splitlines()[:3]:
        m = _HEADER.match(line.strip())
        if m:
            return int(m.group(1))
    return None


# -- generating the files ------------------------------------------------------------------------

@dataclass(frozen=True)
class _Body:
    """A function whose body the learner writes: where its body starts and ends (1-based lines)."""

    name: str
    first: int  # the first line after the signature's colon (or after the docstring at level 4)
    after_doc: int  # the first line after the docstring (== first when there is none)
    last: int
    indent: str


def _signature_end(source: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The line of the colon that ends ``node``'s signature (the tokenizer, so annotations and
    default values with colons or brackets are skipped)."""
    lines = source.splitlines(keepends=True)
    text = "".join(lines[node.lineno - 1:])
    depth = 0
    seen_def = False
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.NAME and tok.string == "def":
            seen_def = True
        if not seen_def or tok.type != tokenize.OP:
            continue
        if tok.string in "([{":
            depth += 1
        elif tok.string in ")]}":
            depth -= 1
        elif tok.string == ":" and depth == 0:
            return node.lineno + tok.start[0] - 1
    raise LevelError(f"solution.py line {node.lineno}: cannot find the end of {node.name}'s signature")


def _bodies(source: str) -> list[_Body]:
    """The functions (or methods) that hold a blank, outermost first, in reading order."""
    tree = ast.parse(source)
    blank_lines = [b.line for b in bl.find_blanks(source)]
    found: list[_Body] = []

    def visit(parent: ast.AST) -> None:
        for node in ast.iter_child_nodes(parent):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                end = node.end_lineno or node.lineno
                if any(node.lineno <= line <= end for line in blank_lines):
                    first = _signature_end(source, node) + 1
                    body0 = node.body[0]
                    doc = (isinstance(body0, ast.Expr) and isinstance(body0.value, ast.Constant)
                           and isinstance(body0.value.value, str))
                    after_doc = (body0.end_lineno or body0.lineno) + 1 if doc else first
                    if node.body[0].lineno < first:
                        raise LevelError(f"solution.py line {node.lineno}: {node.name}'s body must start on "
                                         "the line after its signature")
                    line = source.splitlines()[body0.lineno - 1]
                    found.append(_Body(node.name, first, after_doc, end, line[: len(line) - len(line.lstrip())]))
            elif isinstance(node, ast.ClassDef):
                visit(node)
    visit(tree)
    outside = [line for line in blank_lines if not any(b.first <= line <= b.last for b in found)]
    if outside:
        raise LevelError(f"solution.py line {outside[0]}: a blank outside any function cannot be given at "
                         "levels 4 and 5 (the learner writes function bodies)")
    return found


def _full_line_comments(source: str) -> dict[int, str]:
    """Line -> the text of a comment that is alone on its line."""
    lines = source.splitlines()
    out = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and not lines[tok.start[0] - 1][: tok.start[1]].strip():
            out[tok.start[0]] = tok.string
    return out


@functools.lru_cache(maxsize=128)
def _generate(source: str, level: int, todos: tuple[str, ...]) -> str:
    blanks = {b.line: b for b in bl.find_blanks(source)}
    comments = _full_line_comments(source)
    lines = source.splitlines()
    drop: dict[int, list[str] | None] = {}  # line -> replacement lines (None: removed)
    for body in _bodies(source):
        keep_from = body.after_doc if level == 4 else body.first
        new: list[str] = []
        if level == 4:
            for n in range(body.after_doc, body.last + 1):
                if n in blanks:
                    b = blanks[n]
                    desc = todos[b.index - 1] if b.index - 1 < len(todos) else ""
                    new.append(f"{body.indent}# TODO {b.index}: {desc}".rstrip())
                elif n in comments and "BLANK" not in comments[n]:
                    new.append(f"{body.indent}{comments[n]}")
        new.append(f"{body.indent}raise NotImplementedError")
        for n in range(keep_from, body.last + 1):
            drop[n] = None
        drop[keep_from] = new
    out: list[str] = []
    for n, line in enumerate(lines, start=1):
        if n not in drop:
            out.append(line)
        elif drop[n] is not None:
            out.extend(drop[n] or [])
    text = "\n".join(out) + "\n"
    if "# BLANK" in text or bl.PLACEHOLDER in text:
        raise LevelError("solution.py: a blank marker survived the level file's generation")
    return text


def level_statement(ex: Any, level: int, lang: str = "en") -> str:
    """The statement shown at ``level``: ``statement_level<N>`` of texts/<lang>.toml where the pack
    gives one, else the exercise's statement."""
    level = parse_level(level, ex)
    extra = _level_texts(ex.path, lang).get(f"statement_level{level}")
    return str(extra).strip() if extra else ex.texts(lang).statement.strip()


def _level_texts(path: Any, lang: str) -> dict:
    try:
        return dict(_read_toml(path / "texts" / f"{lang}.toml"))
    except Exception:  # noqa: BLE001 - the texts' own loading reports a broken file
        return {}


def level_file(ex: Any, level: int, lang: str = "en") -> str:
    """The learner's file at ``level`` (4 or 5), in ``lang``: generated from solution.py."""
    level = parse_level(level, ex)
    texts = ex.texts(lang)
    code = _generate(ex.solution_source, level, tuple(texts.blanks))
    if lang != "en":
        code = bl.translate_comments(code, texts.comments)
    names = ", ".join(b.name for b in _bodies(ex.solution_source))
    head = [f"# alignlings: level {level} · {ex.key} · " + MSG[f"header{level}"].get(lang, MSG[f"header{level}"]["en"])
            .format(functions=names)]
    if level == 5:
        head.append("#")
        for i, para in enumerate(re.split(r"\n\s*\n", level_statement(ex, level, lang))):
            lines = para.strip().splitlines()
            if i:
                head.append("#")
            if lines and (lines[0].lstrip().startswith(("$$", "```", "|", "- ", "* ")) or len(lines) == 1
                          and len(lines[0]) <= 100):
                head += [f"# {line}".rstrip() for line in lines]  # display math, code, tables, lists: as written
                continue
            if lang == "zh":
                head += [f"# {w}".rstrip() for w in _wrap_cjk("".join(line.strip() for line in lines))]
                continue
            text = " ".join(line.strip() for line in lines)
            head += [f"# {w}".rstrip() for w in textwrap.wrap(text, 96, break_long_words=False,
                                                              break_on_hyphens=False) or [""]]
    return "\n".join(head) + "\n" + code


def _wrap_cjk(text: str, soft: int = 40, hard: int = 60) -> list[str]:
    """Chinese text in lines of about ``soft`` to ``hard`` characters, broken after punctuation where
    one comes (Chinese has no spaces to break at)."""
    out, line, code, dollars, pending = [], "", False, False, False
    for ch in text:
        if pending and ch not in "，。；：、）":  # a line never starts with closing punctuation
            out.append(line)
            line, pending = "", False
        line += ch
        code ^= ch == "`"
        dollars ^= ch == "$" and not code
        if not (code or dollars):  # never inside `code` or $math$
            pending = (len(line) >= soft and ch in "。；，：、）") or len(line) >= hard and ch in " ，。；" \
                or len(line) >= hard + 40
    return out + [line] if line else out or [""]


# -- grading ------------------------------------------------------------------------------------

def misconception_match(ex: Any, trusted: Any, got: dict, names: list[str]) -> Any | None:
    """The misconception whose variant (the reference with its fill) gave exactly the learner's
    values on ``names``, or None. A misconception whose variant did not load cannot be matched."""
    from alignlings.grading.behaviour import _same_behaviour

    usable = [n for n in names if n in got]
    if not usable:
        return None
    for m in ex.misconceptions:
        behaviour = trusted.misconceptions.get(m.id)
        if behaviour is not None and all(n in behaviour for n in usable) and \
                _same_behaviour(got, behaviour, usable):
            return m
    return None


def _misconception_entry(ex: Any, m: Any, lang: str) -> dict:
    blank = next((b for b in bl.find_blanks(ex.solution_source) if b.index == m.blank), None)
    feedback = m.feedback.get(lang) or m.feedback.get("en", "")
    target = blank.name if blank is not None else "?"
    return {"id": m.id, "blank": m.blank, "target": target,
            "message": MSG["misconception"].get(lang, MSG["misconception"]["en"]).format(
                target=target, feedback=feedback)}


def check_level(grader: Any, exercise_id: str, code: str, level: int, *, lang: str = "en",
                run_main: bool = True, variant: int | None = None) -> dict:
    """Grade a learner's whole file at ``level``: every case of the exercise, judged like the fill-in
    exercise's whole file, plus the misconception the file's outputs match (``misconception``:
    ``id``, ``blank``, ``target``, ``message``; None). ``blanks`` is empty: there are none to splice.
    The verdict's ``level`` says at which level it was graded."""
    import random

    from alignlings.grading.casejob import NOT_RUN  # noqa: F401 - the job's markers, read by _judge_learner
    from alignlings.content.checks import MAX_VARIANTS
    from alignlings.grading.grader import RUN_CASES, fold_variant

    if not isinstance(code, str):
        raise ValueError(f"code: expected the file's text (a str), got {type(code).__name__}")
    if variant is not None and (not isinstance(variant, int) or isinstance(variant, bool) or variant < 0):
        raise ValueError(f"variant: expected an int >= 0, got {variant!r}")
    ex = grader.pack.get(exercise_id)
    level = parse_level(level, ex)
    check = grader._check_source(ex)
    if variant is None:
        fresh = grader.fresh_inputs and "fresh(" in check
        variant = random.randrange(MAX_VARIANTS) if fresh else 0
    variant = fold_variant(variant)
    import time

    started = time.perf_counter()
    with grader._session(ex):
        trusted = grader.trusted(ex, variant)
        names = trusted.names
        result = grader._run(RUN_CASES, {"check": check, "code": code, "cases": names, "run_main": run_main,
                                         "variant": variant}, ex)
        verdict = grader._judge_learner(ex, trusted, result, check, lang, names, variant)
    got = verdict.pop("_values", {})
    verdict["blanks"] = []
    verdict["level"] = level
    verdict["variant"] = variant
    verdict["misconception"] = None
    if not verdict["passed"] and got:
        m = misconception_match(ex, trusted, got, names)
        if m is not None:
            verdict["misconception"] = _misconception_entry(ex, m, lang)
    verdict["seconds"] = round(time.perf_counter() - started, 4)
    return verdict


def reference_at(ex: Any, level: int) -> str:
    """The reference as a learner would hand it in at ``level``: the level's header, then the
    reference solution (every removed body written as the reference writes it)."""
    level = parse_level(level, ex)
    return level_file(ex, level).splitlines()[0] + "\n" + bl.reference(ex.solution_source, bl.find_blanks(ex.solution_source))


def misconception_at(ex: Any, level: int, m: Any) -> str:
    """A file with misconception ``m`` handed in at ``level``: the reference with ``m``'s fill."""
    blanks = bl.find_blanks(ex.solution_source)
    return level_file(ex, level).splitlines()[0] + "\n" + bl.splice(ex.solution_source, blanks, m.blank, m.fill)


def prove(grader: Any, ex: Any, *, levels: tuple[int, ...] = LEVELS,
          misconception_levels: tuple[int, ...] | None = None) -> tuple[list[str], list[str]]:
    """``dev check`` at levels 4 and 5, by grading: the reference handed in at each level passes, and
    each misconception's file is rejected and named as itself by its outputs. Returns (problems,
    notes): a misconception rejected but named as another one (the same outputs: only a per-blank
    check tells them apart) or not named at all (its file does not load, so there are no outputs to
    match) is a note, not a problem. ``misconception_levels`` (default: ``levels``): where the
    misconceptions are graded; a misconception's file differs between levels 4 and 5 by its header
    line alone, so ``dev check`` grades it once, at level 4."""
    problems: list[str] = []
    notes: list[str] = []
    for level in levels:
        v = check_level(grader, ex.key, reference_at(ex, level), level, run_main=False, variant=0)
        if not v["passed"]:
            failed = [c["name"] for c in v["cases"] if not c["passed"]] or [(v.get("error") or {}).get("message", "")]
            problems.append(f"the reference fails at level {level}: {', '.join(map(str, failed))[:300]}")
    for m in ex.misconceptions:
        for level in (levels if misconception_levels is None else misconception_levels):
            v = check_level(grader, ex.key, misconception_at(ex, level, m), level, run_main=False, variant=0)
            named = (v.get("misconception") or {}).get("id")
            if v["passed"]:
                problems.append(f"misconception {m.id} (blank {m.blank}) is accepted at level {level}")
            elif named != m.id:
                notes.append(f"misconception {m.id} (blank {m.blank}) is rejected at level {level} but "
                             + (f"its outputs equal {named}'s" if named else "has no outputs to match (its file fails to load or run)")
                             + ": only the per-blank check names it")
    return problems, notes
