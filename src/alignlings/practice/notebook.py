"""Grading from Jupyter: ``alignlings.check("dpo-loss", dpo_loss)``, and the notebook export.

The objects' source (functions or classes, via ``inspect``) replaces the same-named top-level
definitions of the exercise's template, so the rest of the file (imports, given helpers, globals)
is the exercise's own; the result is graded exactly like ``alignlings check``.
"""

from __future__ import annotations

import ast
import html
import inspect
import textwrap
from typing import Any


def _msg(key: str, lang: str, **kw) -> str:
    from alignlings import i18n

    return i18n.t(f"practice.notebook.{key}", lang, **kw)  # strings: locales [practice.notebook]


class Verdict(dict):
    """The verdict dict, shown as a compact report in Jupyter (in ``lang``, the check's language)."""

    lang = "en"

    def _repr_html_(self) -> str:
        ok, lang = self["passed"], self.lang
        rows = []
        for b in self["blanks"]:
            mark = {True: "✓", False: "✗", None: "?"}[b["passed"]]
            colour = {True: "#1a7f37", False: "#cf222e", None: "#9a6700"}[b["passed"]]
            msg = "" if b["passed"] else html.escape(b["message"] or "")
            rows.append(f"<tr><td style='color:{colour}'>{mark}</td><td>{_msg('blank', lang, n=b['index'])} "
                        f"(<code>{html.escape(b['name'])}</code>)</td><td>{msg}</td></tr>")
        cases = "".join(f"<li>{'✓' if c['passed'] else '✗'} [{c['kind']}] {html.escape(c['name'])}"
                        f"{'' if c['passed'] else ': ' + html.escape(c['message'])}</li>" for c in self["cases"])
        err = self.get("error")
        err_html = f"<pre style='color:#cf222e'>{html.escape(err['kind'] + ': ' + err['message'])}</pre>" if err else ""
        if self.get("misconception"):  # a level-4/5 file whose outputs match a known mistake
            err_html += f"<p style='color:#9a6700'>{html.escape(self['misconception']['message'])}</p>"
        head = f"<b style='color:{'#1a7f37' if ok else '#cf222e'}'>{_msg('passed' if ok else 'not_yet', lang)}</b> {self['exercise']}"
        return f"<div>{head}{err_html}<table>{''.join(rows)}</table><ul>{cases}</ul></div>"

    def __repr__(self) -> str:
        lang = self.lang
        bad = [f"{_msg('blank', lang, n=b['index'])}: {b['message']}" for b in self["blanks"] if b["passed"] is not True]
        return f"<Verdict {self['exercise']}: {_msg('repr_passed' if self['passed'] else 'repr_not_yet', lang)}" + (
            "; " + "; ".join(bad) if bad else "") + ">"


def _source_of(obj: Any) -> tuple[str, str]:
    if isinstance(obj, str):
        raise TypeError("pass functions or classes; for a whole file use Grader().check(id, code)")
    try:
        src = textwrap.dedent(inspect.getsource(obj))
    except (OSError, TypeError) as exc:
        raise ValueError(f"objs: cannot read the source of {obj!r} ({exc}); define it in a notebook cell or a file") from None
    return obj.__name__, src


def build_code(template_source: str, objs: tuple) -> str:
    """The template with each top-level def/class named like one of ``objs`` replaced by its source."""
    replacements = dict(_source_of(o) for o in objs)
    tree = ast.parse(template_source)
    lines = template_source.splitlines()
    spans = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in replacements:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            spans.append((start, node.end_lineno, replacements.pop(node.name)))
    if replacements:
        names = ", ".join(replacements)
        raise ValueError(f"objs: {names} is not defined at the top level of this exercise's template")
    for start, end, src in sorted(spans, reverse=True):
        lines[start - 1:end] = src.rstrip("\n").splitlines()
    return "\n".join(lines) + "\n"


def check(exercise_id: str, *objs: Any, lang: str = "en", pack=None, level: int | None = None) -> Verdict:
    """Grade functions or classes defined in a notebook against exercise ``exercise_id``.

    Example: ``alignlings.check("dpo-loss", dpo_loss)``; for several names, pass them all:
    ``alignlings.check("toy-grpo", sample_group, grpo_advantage, grpo_step, train)``.
    ``pack``: a pack folder, a list of them (a course), or a loaded ``Pack``; by default
    ``$ALIGNLINGS_PACK``, else the built-in pack (exported notebooks name their packs).
    ``level``: 4 or 5 grades them as the exercise's level-4/5 file (``practice.levels``), recorded at
    that level.
    """
    from alignlings.grading import levels
    from alignlings.grading.grader import Grader, template_for
    from alignlings.content.pack import default_pack_paths, load_pack

    if not objs:
        raise ValueError("objs: pass at least one function or class to grade, e.g. check('dpo-loss', dpo_loss)")
    p = load_pack(pack if pack is not None else default_pack_paths())
    ex = p.get(exercise_id)
    if level is not None:
        level = levels.parse_level(level, ex)
    code = build_code(template_for(ex, "en") if level is None else levels.level_file(ex, level, "en"), objs)
    from alignlings.practice.store import ProgressStore
    from alignlings.practice.service import STORE_ERRORS
    from alignlings.practice.session import Practice

    with Grader(p) as grader:
        try:
            store = ProgressStore()
        except STORE_ERRORS:  # grading must not fail because progress cannot be opened: graded, not recorded
            verdict = grader.check(ex.key, code, lang=lang, run_main=False) if level is None else \
                levels.check_level(grader, ex.key, code, level, lang=lang, run_main=False)
        else:
            verdict = Practice(store, p, grader, source="notebook").check(ex, code=code, lang=lang, run_main=False,
                                                                            level=level).verdict
    result = Verdict(verdict)
    result.lang = lang
    return result


def exercise_notebook(ex, lang: str = "en", pack: list[str] | None = None, level: int | None = None):
    """A Jupyter notebook for one exercise: statement, the template cell, a check cell.

    ``pack``: the packs the check cell loads (absolute folders or built-in names); None for the
    built-in pack, so that ``alignlings.check`` finds the exercise wherever the notebook runs.
    ``level``: 4 or 5, the fill-in exercise's level-4/5 notebook (``practice.levels``): its file in the
    code cell, its statement, and a check cell that grades at that level.
    """
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    from alignlings import i18n
    from alignlings.grading import levels
    from alignlings.grading.grader import template_for

    texts = ex.texts(lang)
    if level is not None:
        level = levels.parse_level(level, ex)
        name = i18n.t(f"practice.levels.name{level}", lang)
        cells = [new_markdown_cell(f"# {ex.title[lang]} · {name}\n\n{levels.level_statement(ex, level, lang)}")]
    else:
        cells = [new_markdown_cell(f"# {ex.title[lang]}\n\n{texts.statement.strip()}")]
    if ex.kind_spec.graded_as_file:
        template = template_for(ex, lang) if level is None else levels.level_file(ex, level, lang)
        body, _, main = template.partition('\nif __name__ == "__main__":')
        if level == 5:  # the statement is the notebook's first cell: the file's copy of it is left out
            head, _, rest = body.partition("\n")
            body = head + "\n" + "\n".join(line for line in rest.splitlines() if not line.startswith("#"))
        cells.append(new_code_cell(body.rstrip() + "\n"))
        names = [n for n in ex.entry] or _top_level_names(body)
        packs = f", pack={list(pack)!r}" if pack else ""
        at = f", level={level}" if level is not None else ""
        cells.append(new_code_cell("import alignlings\n"
                                   f"alignlings.check({ex.key!r}, {', '.join(names)}, lang={lang!r}{packs}{at})"))
        if main:
            cells.append(new_markdown_cell(_msg("run_main", lang)))
            cells.append(new_code_cell(textwrap.dedent(main.strip("\n")).strip() + "\n"))
    else:
        for i, q in enumerate(ex.predict or ex.quiz, start=1):  # a predict item's questions, or the quiz's
            opts = "\n".join(f"- {chr(65 + j)}) {o.text[lang]}" for j, o in enumerate(q.options))
            cells.append(new_markdown_cell(f"**{i}. {q.question[lang]}**\n\n{opts}"))
        command = f"alignlings {ex.kind_spec.cli_answer} {ex.key}" + "".join(f" --pack {p}" for p in pack or ())
        cells.append(new_markdown_cell(_msg("answer", lang, command=command)))
    nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                            "language": "python"}})
    nbformat.validate(nb)
    return nb


def _top_level_names(source: str) -> list[str]:
    tree = ast.parse(source)
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
