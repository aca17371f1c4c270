"""Blanks: find them in a reference solution, generate the learner's template, splice fills.

A blank is marked in solution.py by a trailing ``# BLANK`` comment (the assigned or returned value
becomes ``_____``) or ``# BLANK: stmt`` (the whole statement does). See docs/pack-format.md.
The template is always generated from the solution, so the two cannot drift.
"""

from __future__ import annotations

import ast
import difflib
import functools
import io
import re
import tokenize
from dataclasses import dataclass

PLACEHOLDER = "_____"
_MARKER = re.compile(r"#\s*BLANK(?::\s*(stmt))?\s*$")


class BlankError(ValueError):
    """solution.py marks a blank the engine cannot cut out; the message names the line."""


@dataclass(frozen=True)
class Blank:
    index: int  # 1-based, reading order
    line: int  # 1-based line number in solution.py
    start: int  # column where the blank starts
    end: int  # column where it ends (exclusive), on the same line
    answer: str  # the reference text of the blank
    target: str  # what the blank assigns ("margin", "return", "statement")
    comment_start: int  # column of the marker comment (to strip it)
    label: str = ""  # set when two blanks share a target: "return in f", or "return (line 12)"

    @property
    def name(self) -> str:
        return self.label or self.target


def _comments(source: str) -> list[tuple[int, int, str]]:
    """(line, column, text) of every comment, via the tokenizer (never matches inside strings)."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.start[1], tok.string))
    return out


def find_blanks(source: str) -> list[Blank]:
    return list(_find_blanks(source))


@functools.lru_cache(maxsize=64)
def _find_blanks(source: str) -> tuple[Blank, ...]:
    lines = source.splitlines()
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise BlankError(f"solution.py line {exc.lineno}: not valid Python: {exc.msg}") from None
    statements: dict[int, ast.stmt] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            statements.setdefault(node.lineno, node)
    blanks: list[Blank] = []
    for lineno, col, text in _comments(source):
        m = _MARKER.fullmatch(text.strip()) or _MARKER.search(text)
        if not m or not text.lstrip("#").strip().startswith("BLANK"):
            continue
        stmt = statements.get(lineno)
        if stmt is None:
            raise BlankError(f"solution.py line {lineno}: '# BLANK' must follow a statement on the same line")
        whole = m.group(1) == "stmt"
        if whole:
            node, target = stmt, "statement"
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and stmt.value is not None:
            node = stmt.value
            tgt = stmt.targets[-1] if isinstance(stmt, ast.Assign) else stmt.target
            target = ast.unparse(tgt)
        elif isinstance(stmt, ast.Return) and stmt.value is not None:
            node, target = stmt.value, "return"
        else:
            raise BlankError(
                f"solution.py line {lineno}: '# BLANK' needs an assignment or a return; "
                "use '# BLANK: stmt' to blank the whole statement"
            )
        if node.lineno != lineno or node.end_lineno != lineno:
            raise BlankError(f"solution.py line {lineno}: a blank must fit on one line")
        line = lines[lineno - 1]
        blanks.append(Blank(
            index=len(blanks) + 1, line=lineno, start=node.col_offset, end=node.end_col_offset or len(line),
            answer=line[node.col_offset:node.end_col_offset], target=target, comment_start=col,
        ))
    return _distinct_labels(tree, blanks)


def _distinct_labels(tree: ast.Module, blanks: list[Blank]) -> tuple[Blank, ...]:
    """Two blanks with one target (two ``return`` blanks) get labels naming their function, or line."""
    import collections
    import dataclasses

    counts = collections.Counter(b.target for b in blanks)
    if all(n == 1 for n in counts.values()):
        return tuple(blanks)
    funcs = [(n.lineno, n.end_lineno or n.lineno, n.name) for n in ast.walk(tree)
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]

    def enclosing(line: int) -> str:
        inside = [f for f in funcs if f[0] <= line <= f[1]]
        return max(inside)[2] if inside else ""  # the innermost: the latest start

    labels = {b.index: (f"{b.target} in {enclosing(b.line)}" if enclosing(b.line) else b.target)
              for b in blanks if counts[b.target] > 1}
    again = collections.Counter(labels.values())
    labels = {i: (f"{b.target} (line {b.line})" if again[labels[i]] > 1 else labels[i])
              for i, b in ((b.index, b) for b in blanks if b.index in labels)}
    return tuple(dataclasses.replace(b, label=labels[b.index]) if b.index in labels else b for b in blanks)


def _strip_marker(line: str, blank: Blank) -> str:
    return line[: blank.comment_start].rstrip()


def translate_comments(source: str, comments: dict[str, str]) -> str:
    """Replace comment texts that have a translation (exact text after '# ')."""
    if not comments:
        return source
    lines = source.splitlines(keepends=True)
    for lineno, col, text in reversed(_comments(source)):
        body = text[1:].strip()
        if body in comments:
            line = lines[lineno - 1]
            lines[lineno - 1] = line[:col] + "# " + comments[body] + line[col + len(text):]
    return "".join(lines)


def render(source: str, blanks: list[Blank], fills: dict[int, str] | None = None, *,
           todos: list[str] | None = None, comments: dict[str, str] | None = None) -> str:
    """Rebuild solution.py with each blank replaced by ``fills[i]`` (default ``_____``).

    With ``todos`` a ``# TODO n: ...`` line goes above each blank; markers are always removed.
    """
    fills = fills or {}
    source = translate_comments(source, comments or {})
    lines = source.splitlines()
    by_line = {b.line: b for b in blanks}
    out = []
    for lineno, line in enumerate(lines, start=1):
        b = by_line.get(lineno)
        if b is None:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        if todos is not None:
            desc = todos[b.index - 1] if b.index - 1 < len(todos) else ""
            out.append(f"{indent}# TODO {b.index}: {desc}".rstrip())
        fill = fills.get(b.index, PLACEHOLDER)
        code = _strip_marker(line, b)
        out.append(code[: b.start] + fill + code[b.end:])
    return "\n".join(out) + "\n"


def template(source: str, blanks: list[Blank], todos: list[str], comments: dict[str, str] | None = None) -> str:
    """The learner's template: every blank is ``_____`` under its TODO comment."""
    return render(source, blanks, todos=todos, comments=comments)


def reference(source: str, blanks: list[Blank], comments: dict[str, str] | None = None) -> str:
    """The reference solution without markers (what ``solution ID`` reveals)."""
    return render(source, blanks, {b.index: b.answer for b in blanks}, comments=comments)


def splice(source: str, blanks: list[Blank], index: int, fill: str) -> str:
    """The reference with blank ``index`` alone replaced by ``fill`` (every other blank correct)."""
    fills = {b.index: b.answer for b in blanks}
    fills[index] = fill
    return render(source, blanks, fills)


def extract_fills(learner: str, source: str, blanks: list[Blank]) -> dict[int, str | None]:
    """Recover each blank's fill from a learner's file derived from the template.

    The template's code lines (comments, docstrings and the text of multi-line strings ignored, so a
    docstring that repeats a blank's line is never taken for it) are aligned with the learner's with
    difflib. Where only blank lines changed, a blank's line is the learner line that replaced it
    (line for line), or the one learner line that keeps the code around the blank; the fill is the
    text in between (``_____`` if left empty). None where the blank cannot be found with certainty:
    the code around it changed too (the learner rewrote it), or several lines could be it.
    """
    tmpl_lines = render(source, blanks).splitlines()
    blank_at = {b.line - 1: b for b in blanks}  # template line index -> blank (render keeps line numbers)
    src_lines = source.splitlines()

    sig_t, sig_l = _significant("\n".join(tmpl_lines)), _significant_lines(learner)
    matcher = difflib.SequenceMatcher(None, [c for _, c in sig_t], [c for _, c in sig_l], autojunk=False)
    fills: dict[int, str | None] = {b.index: None for b in blanks}
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        block = [blank_at.get(sig_t[k][0]) for k in range(i1, i2)]
        if op == "equal":
            for b in block:
                if b is not None:
                    fills[b.index] = PLACEHOLDER
            continue
        if op != "replace" or None in block:
            continue  # code around the blank changed too: the learner rewrote it, the whole file decides
        candidates = [sig_l[j][1] for j in range(j1, j2)]
        same_size = i2 - i1 == j2 - j1
        for offset, b in enumerate(block):
            assert b is not None
            if b.target == "statement":
                if same_size:
                    fills[b.index] = candidates[offset]
                continue
            code = _strip_marker(src_lines[b.line - 1], b).strip()
            before = code[: code.index(b.answer)].strip() if b.answer in code else ""
            after = code[code.index(b.answer) + len(b.answer):].strip() if b.answer in code else ""

            def fits(text: str, before=before, after=after) -> bool:
                return text.startswith(before) and text.endswith(after) and len(text) > len(before) + len(after)

            # line for line where the block kept its size, else the one line that fits the blank's code
            found = [candidates[offset]] if same_size else [t for t in candidates if fits(t)]
            if len(found) == 1 and fits(found[0]):
                fills[b.index] = found[0][len(before): len(found[0]) - len(after)].strip()
    return fills


@functools.lru_cache(maxsize=128)
def _significant(template: str) -> tuple[tuple[int, str], ...]:
    """``_significant_lines`` of a template, computed once."""
    return tuple(_significant_lines(template))


def _significant_lines(text: str) -> list[tuple[int, str]]:
    """The text's non-empty code lines (``_code_lines``), stripped, with their line index."""
    return [(i, code.strip()) for i, code in enumerate(_code_lines(text)) if code.strip()]


def _code_lines(text: str) -> list[str]:
    """The text's lines as code only: comments removed, and strings that are not part of an
    expression (docstrings, string statements) and the inner lines of multi-line strings blanked, so
    a docstring or comment that repeats a blank's line is never taken for the fill. One tokenizer
    pass; per line (comments only) if the file does not tokenize."""
    lines = text.splitlines()
    try:
        out = list(lines)
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return [_strip_comment(line) for line in lines]
    starts_line = True  # the next token begins a logical line
    edits = []  # (kind, start, end), applied last first so earlier columns stay valid
    for k, tok in enumerate(tokens):
        if tok.type == tokenize.COMMENT:
            edits.append(("comment", tok.start, tok.end))
        elif tok.type in _STRING_TYPES:
            following = next((t for t in tokens[k + 1:] if t.type not in (tokenize.COMMENT, tokenize.NL)), None)
            standalone = starts_line and following is not None and following.type in (
                tokenize.NEWLINE, tokenize.ENDMARKER, tokenize.DEDENT)
            end = _string_end(tokens, k)
            if standalone or end[0] > tok.start[0]:
                edits.append(("docstring" if standalone else "string", tok.start, end))
        if tok.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            starts_line = True
        elif tok.type not in (tokenize.NL, tokenize.COMMENT):
            starts_line = False
    for kind, (r1, c1), (r2, c2) in reversed(edits):
        if kind == "comment":
            out[r1 - 1] = out[r1 - 1][:c1].rstrip()
            continue
        # a docstring or bare string statement leaves no code; a string inside code stays as ""
        keep = "" if kind == "docstring" else '""'
        if r1 == r2:
            out[r1 - 1] = (out[r1 - 1][:c1] + keep + out[r1 - 1][c2:]).rstrip()
            continue
        out[r1 - 1] = (out[r1 - 1][:c1] + keep).rstrip()
        for r in range(r1 + 1, r2):
            out[r - 1] = ""
        out[r2 - 1] = out[r2 - 1][c2:]
    return out


_STRING_TYPES = {tokenize.STRING} | ({tokenize.FSTRING_START} if hasattr(tokenize, "FSTRING_START") else set())


def _string_end(tokens: list, k: int) -> tuple[int, int]:
    """Where the string starting at ``tokens[k]`` ends (an f-string spans tokens on Python 3.12+)."""
    if tokens[k].type == tokenize.STRING:
        return tokens[k].end
    depth = 0
    for tok in tokens[k:]:
        if tok.type == getattr(tokenize, "FSTRING_START", -1):
            depth += 1
        elif tok.type == getattr(tokenize, "FSTRING_END", -1):
            depth -= 1
            if depth == 0:
                return tok.end
    return tokens[k].end


def _strip_comment(line: str) -> str:
    """Drop a trailing comment (tokenizer-aware, so '#' inside strings stays)."""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line).readline):
            if tok.type == tokenize.COMMENT:
                return line[: tok.start[1]].rstrip()
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return line
