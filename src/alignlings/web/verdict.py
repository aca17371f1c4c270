"""The engine's verdict, reworded for the web page: what the learner sees is a template with a
numbered box per blank, not a file.

- An empty box is "TODO n is still empty", and cases that only failed because of it (a NameError
  on ``_____``) say "not run yet: fill TODO n first" instead of seven NameErrors.
- A syntax error points at the line number the page displays (the page shows the TODO comment
  lines, which the graded file does not have) and names the TODO on that line.
- A blank's own load error drops the file's name and line: the box it belongs to is marked.
- Messages that carry ``$...$`` formulas get ``message_html`` (typeset as MathML, like statements).
- Each case gets ``title``: its name in the page's language (``label``), else its ``name``.

Only wording changes: ``passed`` of every blank, case and the verdict stays the engine's.
"""

from __future__ import annotations

import copy
import difflib
import html
import re

from alignlings.content import blanks as bl
from alignlings.grading.feedback import MESSAGES, case_name, msg
from alignlings.web import render

_PLACEHOLDER_NAME_ERROR = re.compile(r"NameError: name '_{3,}' is not defined")
_AT_LINE = re.compile(r"\s*\((?:[\w./<>-]+\.py|<[^>]+>), line (\d+)\)")
_FILE_LINE = re.compile(r'File "[^"]*", line (\d+)')
_FRAME = re.compile(r"\s+line \d+:")  # a traceback frame line of the grader's jobs


def displayed_source(template: str, fills: list[str]) -> str:
    """The template as the page shows it, with the fills typed into its boxes (in order)."""
    parts = template.split(bl.PLACEHOLDER)
    out = [parts[0]]
    for i, part in enumerate(parts[1:]):
        fill = fills[i] if i < len(fills) and fills[i].strip() else bl.PLACEHOLDER
        out.append(fill + part)
    return "".join(out)


def line_map(graded: str, shown: str) -> dict[int, int]:
    """1-based line of the graded file -> 1-based line of the page (aligned by content)."""
    a, b = graded.splitlines(), shown.splitlines()
    out: dict[int, int] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        for k in range(i2 - i1):
            out[i1 + k + 1] = (j1 + min(k, max(0, j2 - j1 - 1))) + 1 if tag != "delete" else j1 + 1
    return out


def blank_lines(template: str) -> dict[int, int]:
    """1-based line of the page -> the TODO number of the box on it (the first, if several)."""
    out: dict[int, int] = {}
    start, n = 0, 0
    while (start := template.find(bl.PLACEHOLDER, start)) != -1:
        n += 1
        out.setdefault(template.count("\n", 0, start) + 1, n)
        start += len(bl.PLACEHOLDER)
    return out


def _prefix(key: str, lang: str) -> str:
    table = MESSAGES[key]
    return table.get(lang, table["en"]).split("{")[0]


def _html(text: str) -> str:
    return render.inline_markdown(text) if "$" in text else html.escape(text, quote=False)


def for_web(verdict: dict, *, template: str, fills: list[str], graded_code: str | None, lang: str) -> dict:
    """A copy of ``verdict`` in the page's terms (see the module docstring).

    Args:
        verdict: the engine's verdict for a ``fills`` submission.
        template: the template the page displays (``template_for(exercise, lang)``).
        fills: the learner's fills in blank order, as typed ("" for an empty box).
        graded_code: the file the engine graded (to map its line numbers to the page's); None
            leaves line numbers out.
        lang: "en" or "zh".
    """
    if not isinstance(verdict, dict) or "blanks" not in verdict:
        raise ValueError(f"verdict: expected the engine's verdict dict, got {type(verdict).__name__}")
    v = copy.deepcopy(verdict)
    empty = [i + 1 for i, f in enumerate(fills) if not f.strip()]
    todos = ", ".join(f"TODO {n}" for n in empty) if lang != "zh" else "、".join(f"TODO {n}" for n in empty)
    shown_lines = blank_lines(template)
    mapping = line_map(graded_code, displayed_source(template, fills)) if graded_code else {}

    def where(line: int) -> tuple[int, str]:
        shown = mapping.get(line, line)
        n = shown_lines.get(shown)
        return shown, msg("syntax_todo", lang, n=n) if n else ""

    def relocate(text: str) -> str:
        """"... (exercise.py, line 9)" -> "... (line 13, TODO 2)" in the page's numbering."""
        m = _AT_LINE.search(text)
        if m:
            line, todo = where(int(m.group(1)))
            return msg("syntax_at_line", lang, error=text[:m.start()] + text[m.end():], line=line, todo=todo)
        return _FILE_LINE.sub(lambda m: f"line {where(int(m.group(1)))[0]}", text)

    load_prefix = _prefix("load_error", lang)
    for b in v["blanks"]:
        n = b["index"]
        if n in empty:
            b["message"] = msg("empty_todo", lang, n=n)
            b["fill"] = ""  # what the box holds, not the file's placeholder
        elif b.get("message", "").startswith(load_prefix) and b.get("passed") is not True:
            error = _AT_LINE.sub("", b["message"][len(load_prefix):]).strip()
            key = "todo_does_not_parse" if error.startswith(("SyntaxError", "IndentationError")) else "todo_does_not_run"
            b["message"] = msg(key, lang, n=n, error=error)
        b["message_html"] = _html(b.get("message") or "")
    for c in v["cases"]:
        c["title"] = case_name(c, lang)
        if empty and _PLACEHOLDER_NAME_ERROR.search(c.get("message", "")):
            c["message"] = msg("not_run_empty", lang, todos=todos)
            c["not_run"] = True
        c["message_html"] = _html(c.get("message") or "")
    error = v.get("error")
    if error and error.get("message"):
        if empty and _PLACEHOLDER_NAME_ERROR.search(error["message"]):
            error["message"] = msg("not_run_empty", lang, todos=todos)
        else:
            error["message"] = relocate(error["message"])
    if empty and v.get("stdout"):
        kept, dropping = [], False
        for line in v["stdout"].splitlines():  # the NameError and the "  line N: ..." frames under it
            dropping = bool(_PLACEHOLDER_NAME_ERROR.search(line)) or (dropping and _FRAME.match(line) is not None)
            if not dropping:
                kept.append(line)
        v["stdout"] = "\n".join(kept).strip("\n") + ("\n" if kept else "")
    v["empty"] = empty
    return v


def file_for_web(verdict: dict, *, lang: str) -> dict:
    """A copy of a whole-file verdict (a bug drill's) in the page's terms.

    - The bug entry's sentences (``changes``, ``message``, ``hint``) get ``*_html``: they are
      Markdown (``of `name` `` would otherwise show raw backticks).
    - ``message_html`` is empty when ``message`` repeats ``changes`` word for word ("you have not
      changed the file yet" is both what changed and what is wrong: the page says it once).
    - Each case gets ``title`` (its name in the page's language), ``kind_label`` (visible, hidden,
      edge case in that language) and ``message_html``.

    Only keys are added: every value the engine set stays as it was.
    """
    from alignlings import i18n

    if not isinstance(verdict, dict) or "cases" not in verdict:
        raise ValueError(f"verdict: expected the engine's verdict dict, got {type(verdict).__name__}")
    v = copy.deepcopy(verdict)
    kinds = i18n.lang_table("web.ui")[lang if lang in i18n.LANGS else "en"]
    for c in v["cases"]:
        c["title"] = case_name(c, lang)
        c["kind_label"] = kinds.get(f"kind_{c.get('kind')}", c.get("kind") or "")
        c["message_html"] = render.inline_markdown(c.get("message") or "")
    bug = v.get("bug")
    if isinstance(bug, dict):
        for key in ("changes", "message", "hint"):
            bug[f"{key}_html"] = render.inline_markdown(bug[key]) if bug.get(key) else ""
        if bug.get("message") and bug["message"] == bug.get("changes"):
            bug["message_html"] = ""  # the page shows it once, as what changed
    return v
