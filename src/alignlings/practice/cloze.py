"""The MLM cloze drill: random tokens of a reference snippet are masked; the learner fills them in.

Like BERT's masked-language-model pretraining (about 15% of tokens masked), but for code: the
maskable positions are identifiers, attribute names, numeric literals and operators inside
function and class bodies, found with Python's own tokenizer, so keywords, brackets, commas,
strings and comments are never masked and comments stay readable in the chosen language.

An answer is right when it is the exact token, or when the snippet with that answer alone
substituted (every other position correct) behaves like the reference on the exercise's cases:
``mean`` -> ``nanmean`` is as good as the original there. Positions a learner gets wrong come
back more often: :func:`draw` samples by the weights the progress store keeps
(:func:`alignlings.practice.store.sqlite.cloze_due`).

A position's key is ``"line:col"`` in the snippet; the snippet keeps the reference file's line
numbers and comments only follow code, so keys are the same in every language and in the full
reference file (which the grader runs).
"""

from __future__ import annotations

import ast
import io
import keyword
import math
import random
import tokenize
from dataclasses import dataclass
from typing import TYPE_CHECKING

from alignlings import i18n
from alignlings.practice.store.sqlite import cloze_due

if TYPE_CHECKING:
    from alignlings.grading.grader import Grader
    from alignlings.content.exercise import Exercise
    from alignlings.content.pack import Pack

KINDS = ("name", "attr", "number", "op")
PLACEHOLDER = "____"
DEFAULT_RATIO = 0.15  # BERT masks 15% of tokens

# Operator tokens that can be masked. Brackets, ',', ':', '.', ';', '->', '...' and '!' are
# punctuation, not operators, and never are.
OPERATORS = frozenset({
    "+", "-", "*", "/", "//", "%", "**", "@", "~", "&", "|", "^", "<<", ">>",
    "<", ">", "<=", ">=", "==", "!=",
    "=", ":=", "+=", "-=", "*=", "/=", "//=", "%=", "**=", "@=", "&=", "|=", "^=", "<<=", ">>=",
})
# after one of these, '*' and '**' unpack (f(*args), {**d}) and '@' decorates: not operators
_OPERAND_END = frozenset({")", "]", "}"})
_VALUE_KEYWORDS = frozenset({"True", "False", "None"})
_FSTRING_START = {getattr(tokenize, n) for n in ("FSTRING_START", "TSTRING_START") if hasattr(tokenize, n)}
_FSTRING_END = {getattr(tokenize, n) for n in ("FSTRING_END", "TSTRING_END") if hasattr(tokenize, n)}
_SKIP = {tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT}


class ClozeError(ValueError):
    """A snippet, a key or an answer the drill cannot use; the message names it."""


@dataclass(frozen=True)
class Position:
    """One maskable token: ``line`` 1-based, ``col``/``end_col`` 0-based character offsets."""

    key: str
    line: int
    col: int
    end_col: int
    token: str
    kind: str  # "name", "attr", "number" or "op"


# -- the snippet -----------------------------------------------------------------------------

def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    t = node.test
    sides = [t.left, *t.comparators]
    return (len(t.ops) == 1 and isinstance(t.ops[0], ast.Eq)
            and any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
            and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides))


def strip_main(source: str) -> str:
    """``source`` without its top-level ``if __name__ == "__main__":`` section (and what follows).

    Lines before it are kept as they are, so line numbers match the full file.
    """
    tree = ast.parse(source)
    for node in tree.body:
        if _is_main_guard(node):
            lines = source.splitlines()[: node.lineno - 1]
            while lines and not lines[-1].strip():
                lines.pop()
            return "\n".join(lines) + "\n"
    return source


def _exercise(exercise: Exercise | str, pack: Pack | None = None) -> Exercise:
    if isinstance(exercise, str):
        from alignlings.content.pack import load_pack

        return (pack or load_pack()).get(exercise)
    return exercise


def snippet_source(exercise: Exercise | str, lang: str = "en") -> str:
    """The reference solution of a cloze exercise, comments in ``lang``, without its __main__ section."""
    from alignlings.grading.grader import solution_for

    return strip_main(solution_for(_exercise(exercise), lang))


def cloze_exercises(pack: Pack) -> list[Exercise]:
    """The exercises of a pack that offer a cloze snippet (``cloze = true``)."""
    return [e for e in pack if e.kind_spec.graded_as_file and e.cloze]


# -- maskable positions ----------------------------------------------------------------------

def _char_col(line: str, byte_col: int) -> int:
    """ast gives UTF-8 byte offsets; tokenize on str gives characters."""
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


Span = tuple[tuple[int, int], tuple[int, int]]  # (line, col) start, (line, col) end, exclusive


def _regions(source: str) -> tuple[list[Span], list[Span]]:
    """(bodies, imports): the spans of top-level function/class bodies and of import statements."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ClozeError(f"snippet line {exc.lineno}: not valid Python: {exc.msg}") from None
    lines = source.splitlines()

    def start(node):
        return node.lineno, _char_col(lines[node.lineno - 1], node.col_offset)

    def end(node):
        return node.end_lineno, _char_col(lines[node.end_lineno - 1], node.end_col_offset)

    bodies = [(start(n.body[0]), end(n)) for n in tree.body
              if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    imports = [(start(n), end(n)) for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    return bodies, imports


def _inside(pos: tuple[int, int], spans) -> bool:
    return any(a <= pos < b for a, b in spans)


def maskable_positions(source: str) -> list[Position]:
    """Every token the drill may mask, in reading order (see the module docstring for which)."""
    bodies, imports = _regions(source)
    out: list[Position] = []
    prev = None  # the previous significant token
    depth = 0  # inside an f-string (Python 3.12+ tokenizes their insides)
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in _FSTRING_START:
            depth += 1
        elif tok.type in _FSTRING_END:
            depth -= 1
        if tok.type in _SKIP or tok.type == tokenize.ENDMARKER:
            if tok.type == tokenize.NEWLINE:
                prev = None  # a new logical line starts
            continue
        kind = None if depth else _classify(tok, prev)
        prev = tok
        if kind is None or not _inside(tok.start, bodies) or _inside(tok.start, imports):
            continue
        line, col = tok.start
        out.append(Position(key=f"{line}:{col}", line=line, col=col, end_col=tok.end[1], token=tok.string, kind=kind))
    return out


def _classify(tok: tokenize.TokenInfo, prev: tokenize.TokenInfo | None) -> str | None:
    if tok.type == tokenize.NAME:
        if keyword.iskeyword(tok.string) or keyword.issoftkeyword(tok.string):
            return None
        return "attr" if prev is not None and prev.string == "." else "name"
    if tok.type == tokenize.NUMBER:
        return "number"
    if tok.type == tokenize.OP and tok.string in OPERATORS:
        if tok.string in ("*", "**", "@"):
            # binary only after an operand; otherwise unpacking (f(*a), {**d}, *rest) or a decorator
            operand = prev is not None and (
                prev.type in (tokenize.NUMBER, tokenize.STRING) or prev.string in _OPERAND_END
                or (prev.type == tokenize.NAME
                    and (not keyword.iskeyword(prev.string) or prev.string in _VALUE_KEYWORDS))
                or prev.type in _FSTRING_END)
            if not operand:
                return None
        return "op"
    return None


# -- drawing ---------------------------------------------------------------------------------

# How much recalling a token teaches, as a sampling weight (names, calls and constants are 1).
# An assignment's ``=`` (or ``+=``) is the same in every program and ``self`` is forced by the
# syntax: masking them tests nothing, so they come up rarely. An operator that changes meaning
# (``-`` vs ``+``, ``<`` vs ``<=``, ``*`` vs ``@``) is worth almost a name.
ASSIGN_OPS = frozenset(op for op in OPERATORS if op.endswith("=") and op not in ("<=", ">=", "==", "!="))
LOW_VALUE_NAMES = frozenset({"self", "cls"})


def worth(p: Position) -> float:
    """Sampling weight of a position before its history: 1 for names, attributes, calls and
    numbers, 0.8 for operators, 0.2 for ``=``-style assignment operators and ``self``/``cls``."""
    if p.kind == "op":
        return 0.2 if p.token in ASSIGN_OPS else 0.8
    if p.kind == "name" and p.token in LOW_VALUE_NAMES:
        return 0.2
    return 1.0


def draw(positions: list[Position], *, ratio: float = DEFAULT_RATIO, seed: int | None = None,
         stats: dict | None = None) -> list[Position]:
    """Pick ``max(1, round(ratio * N))`` positions to mask, in reading order.

    Weighted sampling without replacement (Efraimidis-Spirakis): a position's weight is
    :func:`worth` (tokens worth recalling over ``=``) times its ``due`` in ``stats`` (from
    ``ProgressStore.cloze_stats``; 1 when never seen, higher after wrong answers), the latter
    ignored when the recorded token is not this position's token (the snippet changed). The same
    ``seed`` replays the same draw; ``seed=None`` draws a fresh set.
    """
    if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or not 0 < ratio <= 1:
        raise ValueError(f"ratio: expected a number in (0, 1], got {ratio!r}")
    if not positions:
        return []
    k = min(len(positions), max(1, round(ratio * len(positions))))
    rng = random.Random(seed)
    stats = stats or {}

    def weight(p: Position) -> float:
        s = stats.get(p.key)
        if not s or s.get("token", p.token) != p.token:
            return worth(p)
        w = s.get("due")
        if w is None:
            w = cloze_due(int(s.get("seen", 0)), int(s.get("wrong", 0)), int(s.get("streak", 0)))
        return worth(p) * max(float(w), 1e-6)

    # key u ** (1 / w), compared in log space: log(u) / w
    keyed = sorted(positions, key=lambda p: math.log(1.0 - rng.random()) / weight(p), reverse=True)
    return sorted(keyed[:k], key=lambda p: (p.line, p.col))


# -- showing and substituting ----------------------------------------------------------------

def _replace(source: str, texts: dict[Position, str]) -> str:
    """Replace each position's token by its text, right to left on each line (columns stay valid)."""
    lines = source.splitlines(keepends=True)
    for p in sorted(texts, key=lambda p: (p.line, p.col), reverse=True):
        line = lines[p.line - 1]
        if line[p.col:p.end_col] != p.token:
            raise ClozeError(f"position {p.key}: expected {p.token!r} there, found {line[p.col:p.end_col]!r} "
                             "(the positions come from another snippet)")
        lines[p.line - 1] = line[: p.col] + texts[p] + line[p.end_col:]
    return "".join(lines)


def render(source: str, masked: list[Position], answers: dict[str, str] | None = None,
           placeholder: str = PLACEHOLDER) -> str:
    """The masked view: each masked token shows as ``placeholder``, or as the learner's answer."""
    answers = answers or {}
    texts = {p: (answers.get(p.key) or "").strip() or placeholder for p in masked}
    # two empty masks side by side ("-F" both masked) would read as one: keep them apart
    empty_ends = {(p.line, p.end_col) for p in masked if texts[p] == placeholder}
    for p in masked:
        if texts[p] == placeholder and (p.line, p.col) in empty_ends:
            texts[p] = " " + placeholder
    return _replace(source, texts)


def substitute(source: str, answers: dict[str, str]) -> str:
    """``source`` with the tokens at the answered keys replaced by the answers."""
    by_key = {p.key: p for p in maskable_positions(source)}
    texts = {}
    for key, text in answers.items():
        if key not in by_key:
            raise ClozeError(f"answers: {key!r} is not a maskable position of this snippet")
        if "\n" in text or "\r" in text:
            raise ClozeError(f"answers[{key!r}]: an answer must fit on one line")
        texts[by_key[key]] = text
    return _replace(source, texts)


# -- checking --------------------------------------------------------------------------------

def check(exercise: Exercise | str, source: str, masked: list[Position], answers: dict[str, str],
          grader: Grader) -> list[dict]:
    """Judge each masked position: ``{"key", "token", "answer", "correct", "how"}`` in reading order.

    ``how`` is "exact" (the token itself), "equivalent" (a different answer with which the file
    behaves like the reference on the exercise's cases), "wrong", or "empty". Each non-exact answer
    is substituted alone into the full reference (with its __main__ section, every other position
    correct); all of them go to the grader in one sandboxed run. ``source`` is the snippet shown
    (any language); the results can go straight to ``ProgressStore.record_cloze``.
    """
    exercise = _exercise(exercise, grader.pack)
    from alignlings.grading.grader import solution_for

    full = solution_for(exercise)
    full_positions = {p.key: p for p in maskable_positions(full)}
    results, variants = [], {}
    for p in sorted(masked, key=lambda p: (p.line, p.col)):
        if source.splitlines()[p.line - 1][p.col:p.end_col] != p.token:
            raise ClozeError(f"position {p.key}: {p.token!r} is not at that place in the snippet")
        ref = full_positions.get(p.key)
        if ref is None or ref.token != p.token:
            raise ClozeError(f"position {p.key}: {p.token!r} is not a maskable position of {exercise.id}'s reference")
        answer = (answers.get(p.key) or "").strip()
        entry = {"key": p.key, "token": p.token, "answer": answer, "correct": False, "how": "wrong"}
        if not answer:
            entry["how"] = "empty"
        elif answer == p.token:
            entry.update(correct=True, how="exact")
        elif "\n" not in answer:
            variant = _replace(full, {ref: answer})
            try:
                ast.parse(variant)
            except SyntaxError:
                pass  # not valid Python: wrong without running it
            else:
                variants[p.key] = variant
        results.append(entry)
    if variants:
        same = grader.behaves_like_reference(exercise.key, variants)
        for entry in results:
            if same.get(str(entry["key"])):
                entry.update(correct=True, how="equivalent")
    return results


# -- text ------------------------------------------------------------------------------------

COUNTER = i18n.texts("practice.cloze.counter")  # strings: locales/{en,zh}.toml [practice.cloze]


def counter_text(n_maskable: int, n_masked: int, lang: str = "en") -> str:
    """The drill's header: "34 maskable · 6 masked" (or its Chinese equivalent)."""
    return COUNTER.get(lang, COUNTER["en"]).format(n=n_maskable, m=n_masked)
