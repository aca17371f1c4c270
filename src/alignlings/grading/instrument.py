"""Trusted side of per-blank judging: locate blanks in a learner's file, judge recorded blanks.

Nothing here runs learner code. ``locate`` parses the learner's file (never runs it) and aligns its
statements with the reference's, function by function, by their shape (an assignment by its
target, a ``return``, a compound statement by its header), so a file is found whatever its
formatting: a signature over three lines, a docstring, a test script below. Each blank gets its fill
text and a *site* (the line/column span of its expression in the learner's file), which is all the
learner's job is told (``record``). ``judge`` compares each recorded value with the reference fill
evaluated on the learner's own scope (a trusted job, ``casejob.judge_blanks``), occurrence by
occurrence, and names a misconception whose fill gives the learner's value on that scope.
"""

from __future__ import annotations

import ast
import difflib
import functools
import re
from dataclasses import dataclass
from typing import Any

from alignlings.content import blanks as bl
from alignlings.grading import values as vals

_BODY_FIELDS = ("body", "orelse", "handlers", "finalbody", "cases")


def _header(node: ast.stmt) -> tuple:
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return (type(node).__name__, *(ast.dump(t) for t in targets))
    if isinstance(node, ast.Return):
        return ("Return",)
    fields = []
    for name, value in ast.iter_fields(node):
        if name in _BODY_FIELDS or name in ("type_comment", "decorator_list", "returns", "args"):
            continue
        fields.append(ast.dump(value) if isinstance(value, ast.AST) else repr(value))
    return (type(node).__name__, *fields)


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _sequences(tree: ast.Module) -> dict[str, list[ast.stmt]]:
    """Each scope's statements in source order (compound statements' bodies included, nested
    functions and classes as scopes of their own, named by their qualified name)."""
    out: dict[str, list[ast.stmt]] = {}

    def walk(body: list[ast.stmt], scope: str) -> None:
        seq = out.setdefault(scope, [])
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                walk(node.body, f"{scope}.{node.name}" if scope else node.name)
                continue
            if _is_docstring(node):
                continue
            seq.append(node)
            for name in _BODY_FIELDS:
                sub = getattr(node, name, None)
                if isinstance(sub, list):
                    inner = [s for x in sub for s in (x.body if isinstance(x, (ast.ExceptHandler,
                                                                                 ast.match_case)) else [x])]
                    walk(inner, scope)

    walk(tree.body, "")
    return out


@dataclass(frozen=True)
class Located:
    fills: dict[int, str | None]
    sites: list[dict]  # {"index", "kind": "expr"|"stmt", "line", "col", "end_line", "end_col"}


def locate(code: str, source: str, blanks: list[bl.Blank]) -> Located | None:
    """Each blank's fill and site in ``code``, found by statement shape; None if ``code`` does not parse."""
    try:
        ltree = ast.parse(code)
        rseqs = _reference_sequences(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    by_line = {b.line: b for b in blanks}
    lseqs = _sequences(ltree)
    segment = _Segments(code)
    fills: dict[int, str | None] = {b.index: None for b in blanks}
    sites: list[dict] = []
    for scope, rseq in rseqs.items():
        blank_here = {k: by_line[s.lineno] for k, s in enumerate(rseq) if s.lineno in by_line}
        if not blank_here:
            continue
        lseq = lseqs.get(scope, [])
        rkeys = [("?",) if k in blank_here and blank_here[k].target == "statement" else _header(s)
                 for k, s in enumerate(rseq)]
        lkeys = [_header(s) for s in lseq]
        matcher = difflib.SequenceMatcher(None, rkeys, lkeys, autojunk=False)
        pairs: dict[int, int] = {}
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op == "equal" or (op == "replace" and i2 - i1 == j2 - j1):
                pairs.update({i1 + k: j1 + k for k in range(i2 - i1)})
        for k, b in blank_here.items():
            if k not in pairs:
                continue
            node = lseq[pairs[k]]
            if b.target == "statement":
                text = segment(node)
                if text is not None:
                    fills[b.index] = text.strip()
                    sites.append({"index": b.index, "kind": "stmt", **_span(node)})
                continue
            value = getattr(node, "value", None)
            if type(node) is not type(rseq[k]) or not isinstance(value, ast.expr):
                continue
            text = segment(value)
            if text is None:
                continue
            fills[b.index] = bl.PLACEHOLDER if text.strip() == bl.PLACEHOLDER else text.strip()
            sites.append({"index": b.index, "kind": "expr", **_span(value)})
    return Located(fills, sites)


@functools.lru_cache(maxsize=64)
def _reference_sequences(source: str) -> dict[str, list[ast.stmt]]:
    """``_sequences`` of a reference solution, parsed once (its nodes are only read)."""
    return _sequences(ast.parse(source))


class _Segments:
    """``ast.get_source_segment`` for many nodes of one source, its lines split once."""

    def __init__(self, code: str):
        # split as get_source_segment splits (on \r\n, \r and \n only), line ends kept
        self.lines, start = [], 0
        for m in re.finditer(r"\r\n|\r|\n", code):
            self.lines.append(code[start:m.end()])
            start = m.end()
        if start < len(code):
            self.lines.append(code[start:])

    def __call__(self, node: ast.AST) -> str | None:
        try:
            line, end_line = node.lineno, node.end_lineno  # type: ignore[attr-defined]
            col, end_col = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
        except AttributeError:
            return None
        if end_line is None or end_col is None:
            return None
        line, end = line - 1, end_line - 1
        if not 0 <= line <= end < len(self.lines):
            return None
        encoded = [text.encode() for text in self.lines[line:end + 1]]
        if line == end:
            return encoded[0][col:end_col].decode()
        parts = [encoded[0][col:].decode(), *(b.decode() for b in encoded[1:-1]), encoded[-1][:end_col].decode()]
        return "".join(parts)


def _span(node: ast.AST) -> dict:
    return {"line": node.lineno, "col": node.col_offset, "end_line": node.end_lineno,  # type: ignore[attr-defined]
            "end_col": node.end_col_offset}  # type: ignore[attr-defined]


# -- judging -------------------------------------------------------------------------------------
def _entry(entry: Any) -> tuple[str, Any]:
    """("value", (decoded, carries a gradient, {name: gradient or None})), ("error", text),
    ("opaque", type name), or ("bad", why)."""
    if not isinstance(entry, dict):
        return "bad", "not a dict"
    if "error" in entry and isinstance(entry["error"], str):
        return "error", entry["error"][:2000]
    if "opaque" in entry:
        return "opaque", str(entry["opaque"])[:60]
    if isinstance(entry.get("after"), dict):  # a statement blank: the names it touches, after it ran
        try:
            return "value", ({str(k): _canon(v) for k, v in list(entry["after"].items())[:64]}, False, {})
        except (vals.DecodeError, TypeError, ValueError) as exc:
            return "bad", str(exc)
    if isinstance(entry.get("nn"), dict):
        try:
            return "value", (_model(entry["nn"]), False, {})
        except (vals.DecodeError, TypeError, ValueError, RecursionError) as exc:
            return "bad", str(exc)
    if "v" in entry:
        try:
            vjp = {}
            raw = entry.get("vjp")
            if isinstance(raw, dict):
                vjp = {str(k): (None if v is None else vals.decode(v)) for k, v in list(raw.items())[:64]}
            return "value", (vals.decode(entry["v"]), bool(entry.get("grad")), vjp)
        except vals.DecodeError as exc:
            return "bad", str(exc)
    return "bad", "unknown form"


def _canon(entry: Any) -> Any:
    """One name after a statement blank, as a comparable value: a tensor with whether it carries a
    gradient, a model as data, anything else (a module, an opaque object) as its description."""
    if not isinstance(entry, dict):
        raise TypeError("entry: not a dict")
    if isinstance(entry.get("nn"), dict):
        return _model(entry["nn"])
    if "v" in entry:
        value = vals.decode(entry["v"])
        return {"value": value, "requires_grad": bool(entry.get("grad"))} if isinstance(value, vals.TensorValue) \
            else value
    return f"<{entry.get('module') or entry.get('opaque') or 'unknown'}>"


def _model(spec: dict, depth: int = 0) -> dict:
    """A model sent as data (``record._module_spec``) as a comparable value: its class, settings,
    mode, which parameters train, its tensors and its children."""
    if depth > 6 or not isinstance(spec, dict):
        raise ValueError("model: malformed")
    return {"class": f"{spec.get('kind')}:{spec.get('cls')}", "args": _plain(spec.get("args") or {}),
            "training": bool(spec.get("training")), "requires_grad": sorted(map(str, spec.get("grad") or [])),
            "state": {str(k): vals.decode(v) for k, v in (spec.get("state") or {}).items()},
            "attrs": {str(k): vals.decode(v) for k, v in (spec.get("attrs") or {}).items()},
            "children": {str(k): _model(v, depth + 1) for k, v in (spec.get("children") or {}).items()}}


def _plain(args: Any) -> dict:
    """A model's constructor settings (plain JSON: numbers, strings, flags, lists of numbers)."""
    if not isinstance(args, dict):
        raise ValueError("model: malformed settings")
    ok = (bool, int, float, str, type(None))
    return {str(k): (list(v) if isinstance(v, list) else v) for k, v in list(args.items())[:32]
            if isinstance(v, ok) or isinstance(v, list) and all(isinstance(x, ok) for x in v)}


def _learner(rec: dict, keys: Any = None) -> tuple[str, Any]:
    """The learner's value at a record; for a statement blank, the names ``keys`` (those the
    reference statement touches) as they were after it ran."""
    if isinstance(rec.get("after"), dict):
        after = rec["after"]
        return _entry({"after": {k: after.get(k, {"opaque": "missing: not in scope"}) for k in (keys or after)}})
    if "value" in rec:
        entry = rec["value"]
        if isinstance(entry, dict) and "vjp" in rec:
            entry = dict(entry, vjp=rec["vjp"])
        return _entry(entry)
    return "error", str(rec.get("error") or "")[:2000]


def _zeros_like(x: Any) -> Any:
    import numpy as np

    return vals.TensorValue(x.dtype, np.zeros_like(x.array)) if isinstance(x, vals.TensorValue) else x


def _differ(expected: tuple, got: tuple, rtol: float, atol: float, *, gradient: bool = True) -> dict | None:
    diff = vals.compare(expected[0], got[0], rtol=rtol, atol=atol, equal_nan=True)
    if diff is None and expected[1] != got[1]:
        return {"path": "value", "reason": "type",
                "expected": "a tensor that carries the gradient" if expected[1] else "a tensor without gradient",
                "got": "a tensor that carries the gradient" if got[1] else "a tensor without gradient (detached)"}
    if diff is None and gradient:  # same value: the same gradient with respect to each input in scope
        first, lost, gained = None, False, False
        for name in sorted(got[2]):
            e, g = expected[2].get(name), got[2].get(name)
            if _zero(e) and _zero(g):
                continue
            lost, gained = lost or _zero(g), gained or _zero(e)
            e = _zeros_like(g) if e is None else e
            g = _zeros_like(e) if g is None else g
            d = vals.compare(e, g, rtol=max(rtol, 1e-4), atol=max(atol, 1e-6), equal_nan=True,
                             path=f"gradient w.r.t. {name}")
            first = first or d
        # the gradient moved from one name to another (the fill reads new_lp_full[samples] where the
        # reference reads new_lp): the same value through an earlier name, not a detached branch
        return None if lost and gained else first
    return diff


def _zero(x: Any) -> bool:
    import numpy as np

    return x is None or (isinstance(x, vals.TensorValue) and not bool(np.any(x.array)))


@dataclass
class Judged:
    """One blank, judged from its recorded occurrences: ``passed`` None when it cannot be judged
    this way (never reached, or a scope the trusted side cannot rebuild)."""

    passed: bool | None
    failed: dict | None = None  # {"case", "error", "diff"} of the first wrong occurrence
    misconception: str | None = None
    occurrences: int = 0


def judge(index: int, records: list[dict], results: list[dict], *, rtol: float, atol: float,
          visible: frozenset[str] = frozenset()) -> Judged:
    """Blank ``index`` from the records (learner job) and the trusted evaluations (same order). The
    failure shown is the first under a ``visible`` case if there is one (its numbers may be shown).
    A misconception is named when its fill gives the learner's value on every occurrence."""
    mine = [(r, res) for r, res in zip(records, results) if isinstance(r, dict) and r.get("blank") == index]
    if not mine:
        return Judged(None)
    wrong: list[tuple[dict, dict | None, str | None]] = []
    gradient_only = True  # every difference is in the gradient alone
    for rec, res in mine:
        if not isinstance(res, dict) or "unjudged" in res:
            return Judged(None, occurrences=len(mine))
        kind_e, expected = _entry(res.get("expected"))
        if kind_e != "value":
            return Judged(None, occurrences=len(mine))
        kind_g, got = _learner(rec, _keys(res.get("expected")))
        if kind_g == "value":
            diff = _differ(expected, got, rtol, atol)
            if diff is not None:
                wrong.append((rec, diff, None))
                gradient_only = gradient_only and _differ(expected, got, rtol, atol, gradient=False) is None
        elif kind_g == "error":
            gradient_only = False
            wrong.append((rec, None, got))
        else:
            gradient_only = False
            wrong.append((rec, {"path": "value", "reason": "type", "expected": "a value", "got": str(got)}, None))
    if not wrong:
        return Judged(True, occurrences=len(mine))
    visible_first = sorted(wrong, key=lambda w: 0 if w[0].get("case") in visible else 1)
    rec, diff, error = visible_first[0]
    misconception = None
    for mid in (mine[0][1].get("miscs") or {}):
        if all(_matches((res.get("miscs") or {}).get(mid), r2) for r2, res in mine):
            misconception = mid
            break
    if gradient_only and misconception is None:
        # the same values, another gradient with respect to some name in scope: a fill may read an
        # earlier name than the reference does (the same total gradient), so the cases decide
        return Judged(None, occurrences=len(mine))
    return Judged(False, failed={"case": rec.get("case"), "error": error, "diff": diff},
                  misconception=misconception, occurrences=len(mine))


def _keys(entry: Any) -> list[str] | None:
    return sorted(entry["after"]) if isinstance(entry, dict) and isinstance(entry.get("after"), dict) else None


def _matches(entry: Any, rec: dict) -> bool:
    kind_m, m = _entry(entry)
    kind_g, got = _learner(rec, _keys(entry))
    if kind_m == "value" and kind_g == "value":
        return _differ(m, got, 1e-4, 1e-5) is None
    if kind_m == "error" and kind_g == "error":
        return m.split(":")[0].strip() == got.split(":")[0].strip()
    return False
