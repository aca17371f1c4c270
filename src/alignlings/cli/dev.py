"""`alignlings dev ...`: commands for pack authors and maintainers (check, new, preview)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from alignlings import i18n
from alignlings.cli.common import (ExerciseId, LangOption, PackOption, UsageError, console, given_packs, open_exercise,
                                   resolve_lang)

MSG = i18n.lang_table("cli.dev")  # strings: locales/{en,zh}.toml [cli.dev]

dev_app = typer.Typer(help="Commands for pack authors and maintainers.", no_args_is_help=True, rich_markup_mode=None)


def _targets(course, pack) -> list:
    """The packs to prove: those named with --pack (or $ALIGNLINGS_PACK), not what they include."""
    from alignlings.content.pack import default_pack_paths, load_pack

    named = [str(p) for p in given_packs(pack)] or default_pack_paths()
    if not named:
        return course.packs
    roots = {load_pack(n).path for n in named}
    return [part for part in course.packs if part.path in roots]


@dev_app.command("check")
def dev_check(pack: PackOption = None) -> None:
    """Prove the pack: its structure (entry, ids, order, blanks, comments, seeded cases), templates fail,
    references pass, misconceptions are rejected with their feedback, texts exist in en and zh.

    One line per problem, naming the file (and line where there is one); exit 1 if any.
    """
    from rich.markup import escape

    from alignlings.content import packlint
    from alignlings.grading.devcheck import check_exercise, locate
    from alignlings.grading.grader import Grader
    from alignlings.content.pack import PackError, default_pack_paths, load_pack

    out, say = console(), MSG[resolve_lang(None)]  # no --lang of its own: ALIGNLINGS_LANG speaks for it

    def done(lang_key: str) -> str:  # a line dev check proved, as the checks name it, in the language
        return i18n.reword("cli.dev_checked", lang_key, resolve_lang(None))

    def pack_error(text: object) -> str:  # a problem (or a pack's load error) in the language
        lang = resolve_lang(None)
        return i18n.reword("practice.pack_errors", i18n.reword("practice.devcheck", str(text), lang), lang)

    try:
        course = load_pack(given_packs(pack) or default_pack_paths())
    except PackError as exc:
        out.print(f"[red]-[/] {escape(pack_error(exc))}", soft_wrap=True)
        out.print(f"[red]{escape(say['check_failed'].format(what=say['not_loaded']))}[/]")
        raise typer.Exit(1) from None
    failed: list[str] = []
    ok, fail = f"[green]{escape(say['ok'])}[/]", f"[red]{escape(say['fail'])}[/]"
    shown_before: set[str] = set()  # each problem once: a loader error is both structure's and its exercise's
    for part in _targets(course, pack):
        structure = packlint.lint_pack(part, course=course)
        shown_before |= {str(p) for p in structure}
        out.print(f"{fail if structure else ok} {escape(part.id)}: {escape(say['structure'])}")
        for problem in structure:
            out.print(f"    [red]-[/] {escape(pack_error(problem))}", soft_wrap=True)
        if structure:
            failed.append(f"{part.id} {say['structure']} ({len(structure)})")
        # graded against this pack alone: an id it shares with an included pack stays unambiguous
        with Grader(part, warm=True) as grader:
            for ex in part:
                problems, checked = [], []
                try:
                    report = check_exercise(ex, grader)  # every problem as FILE:LINE: message
                    problems += [p if p.startswith(f"{ex.path}/") else f"{ex.path}: {p}" for p in report.problems]
                    checked = report.checked
                    if ex.kind_spec.graded_as_file:  # a case named unreproducible already is not named again
                        named = {m.group(1) for p in problems for m in [re.search(r": case '(.*?)' is unreproducible", p)] if m}
                        problems += [str(p) for p in packlint.check_determinism(ex, grader)
                                     if not any(f"case {n!r} " in p.message for n in named)]
                        if not named:
                            checked.append("cases seeded")
                except Exception as exc:  # noqa: BLE001 - one line per problem, never a traceback
                    text = str(exc)
                    problems.append(locate(ex, text if text.startswith(str(ex.path)) else f"{type(exc).__name__}: {text}"))
                shown = ", ".join(done(c) for c in checked)
                out.print(f"{fail if problems else ok} {escape(ex.key)}: {escape(shown)}")
                new = [p for p in dict.fromkeys(problems) if p not in shown_before]
                shown_before |= set(new)
                for problem in new:
                    out.print(f"    [red]-[/] {escape(pack_error(problem))}", soft_wrap=True)
                if new:
                    failed.append(f"{ex.key} ({len(new)})")
    if failed:
        out.print(f"[red]{escape(say['check_failed'].format(what=', '.join(failed)))}[/]")
        raise typer.Exit(1)
    out.print(f"[green]{escape(say['check_passed'])}[/]")


@dev_app.command("new")
def dev_new(
    exercise_id: Annotated[str, typer.Argument(metavar="ID", help="The new exercise's id, e.g. ipo-loss.")],
    pack: PackOption = None,
    kind: Annotated[str, typer.Option(
        "--kind", help="fill (code with blanks), quiz, bug (spot the bug: buggy.py and its fix), bug-or-not "
                       "(bugornot.toml) or predict (predict.toml and the variant.py it runs).")] = "fill",
) -> None:
    """Write a working skeleton of an exercise of KIND into the pack folder (--pack DIR, created if new).

    Replace every TODO(author) with your text and code; `alignlings dev check --pack DIR` then proves it.
    """
    from rich.markup import escape

    from alignlings.content import kinds, skeleton

    if kind not in skeleton.names():
        raise UsageError("kind", "--kind", kinds=", ".join(skeleton.names()), got=kind)
    folders = given_packs(pack)
    if len(folders) != 1:
        raise UsageError("one_pack", "--pack", got=len(folders))
    try:
        written = skeleton.write(Path(folders[0]), exercise_id, kind)
    except ValueError as exc:
        raise typer.BadParameter(str(exc).removeprefix("ID: "), param_hint="ID") from None
    out, say = console(), MSG[resolve_lang(None)]
    for path in written:
        out.print(escape(say["wrote"].format(path=path)))
    spec = kinds.by_author_name(kind)
    preview = say["next_preview"].format(id=exercise_id, pack=folders[0]) if spec and spec.has_blanks else ""
    out.print(escape(say["next"].format(placeholder=skeleton.PLACEHOLDER, pack=folders[0], preview=preview, kind=kind)))


@dev_app.command("preview")
def dev_preview(
    exercise_id: ExerciseId,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Show the generated template and, per misconception, its splice and the verdict it gets."""
    from rich.markup import escape

    from alignlings.cli.solution import print_code
    from alignlings.content import blanks as bl
    from alignlings.grading.grader import Grader, template_for

    lang, p, ex = open_exercise(exercise_id, lang, pack)
    out = console()
    say = MSG[lang]
    if ex.kind_spec.name == "predict" or ex.kind_spec.answered_by_choice:
        _preview_questions(out, say, ex, lang)
        return
    if not ex.kind_spec.has_blanks:
        _preview_bug(out, say, p, ex, lang)
        return
    out.rule(say["template"].format(lang=lang))
    print_code(out, template_for(ex, lang))  # whole lines when piped (no 80-column cut)
    source = ex.solution_source
    blanks = bl.find_blanks(source)
    if not ex.misconceptions:
        out.print(say["none"])
        return
    out.rule(say["misconceptions"])
    with Grader(p, warm=len(ex.misconceptions) > 1) as grader:
        for m in ex.misconceptions:
            b = next((b for b in blanks if b.index == m.blank), None)
            if b is None:
                out.print(f"[red]✗[/] {escape(m.id)}: " + escape(say["no_blank"].format(n=m.blank, total=len(blanks))))
                continue
            spliced = bl.splice(source, blanks, m.blank, m.fill).splitlines()[b.line - 1].strip()
            fills = [m.fill if x.index == m.blank else x.answer for x in blanks]
            v = grader.check(ex.key, fills=fills, lang=lang, run_main=False)
            entry = next((x for x in v["blanks"] if x["index"] == m.blank), None) or {}
            if v["passed"]:
                verdict = f"[red]{escape(say['accepted'])}[/] {escape(say['accepted_why'])}"
            elif entry.get("misconception") == m.id:
                verdict = f"[green]{escape(say['rejected'])}[/]"
            else:
                verdict = (f"[yellow]{escape(say['rejected_other'])}[/]: "
                           f"{escape(str(entry.get('misconception') or entry.get('message')))}")
            where = say["where"].format(n=m.blank, name=b.name)
            out.print(f"[bold]{escape(m.id)}[/] {escape(where)}: [dim]{escape(spliced)}[/]")
            out.print(f"    {verdict}")
            if entry.get("message"):
                out.print(f"    {escape(entry['message'])}")


LETTERS = "ABCDEFGH"


def _preview_questions(out, say: dict, ex, lang: str) -> None:
    """A quiz, bug-or-not drill or predict item: each question, its options (the right one marked)
    with their why, and for a predict item the result of its run and the explanation."""
    from rich.markup import escape

    kind = ex.kind_spec.label.get(lang) or ex.kind_spec.name
    out.rule(say["questions"].format(kind=kind))
    statement = ex.texts(lang).statement.strip()
    if statement:
        out.print(escape(statement), soft_wrap=True)
    questions = ex.predict if ex.kind_spec.name == "predict" else ex.quiz
    for n, q in enumerate(questions, start=1):
        out.print(f"\n[bold]{n}. {escape(q.question.get(lang, ''))}[/] [dim]({escape(q.id)})[/]", soft_wrap=True)
        for i, o in enumerate(q.options):
            mark = f" [green]← {escape(say['right'])}[/]" if i == q.answer else ""
            out.print(f"  {LETTERS[i]}. {escape(o.text.get(lang, ''))}{mark}", soft_wrap=True)
            if o.why.get(lang):
                out.print(f"     [dim]{escape(o.why[lang])}[/]", soft_wrap=True)
        if ex.kind_spec.name == "predict":
            from alignlings.content import predictions as pr

            try:
                run = pr.run_variant(ex, q)
                out.print(f"  {escape(say['result'])}: {escape(pr.result_text(q, run.values, lang))}", soft_wrap=True)
            except pr.VariantError as exc:
                out.print(f"  [red]{escape(say['run_failed'].format(message=exc.message))}[/]", soft_wrap=True)
            out.print(f"  {escape(q.explanation.get(lang, ''))}", soft_wrap=True)


def _preview_bug(out, say: dict, course, ex, lang: str) -> None:
    """A bug drill: buggy.py as the learner starts, then each wrong fix (what it changes) and what
    the grader says of it: recognised as itself, as another, or accepted."""
    from rich.markup import escape

    from alignlings.cli.solution import print_code
    from alignlings.content.bugdrill import apply_wrong_fix
    from alignlings.grading.grader import Grader

    out.rule(say["start_file"])
    print_code(out, ex.buggy_source)
    if not ex.wrong_fixes:
        out.print(say["no_wrong_fixes"])
        return
    out.rule(say["wrong_fixes"])
    with Grader(course, warm=len(ex.wrong_fixes) > 1) as grader:
        for fix in ex.wrong_fixes:
            out.print(f"[bold]{escape(fix.id)}[/]")
            if fix.file:
                out.print(f"    [dim]file = {escape(fix.file)}[/]")
            else:
                for line in fix.find.splitlines():
                    out.print(f"    [red]- {escape(line)}[/]", soft_wrap=True)
                for line in fix.replace.splitlines():
                    out.print(f"    [green]+ {escape(line)}[/]", soft_wrap=True)
            v = grader.check(ex.key, apply_wrong_fix(ex, fix), lang=lang, run_main=False)
            got = (v.get("bug") or {}).get("wrong_fix")
            if v["passed"]:
                verdict = f"[red]{escape(say['accepted'])}[/] {escape(say['accepted_why'])}"
            elif got == fix.id:
                verdict = f"[green]{escape(say['matched'])}[/]"
            else:
                verdict = f"[yellow]{escape(say['matched_other'].format(other=got or '-'))}[/]"
            out.print(f"    {verdict}")
            out.print(f"    [dim]{escape(fix.feedback.get(lang, ''))}[/]", soft_wrap=True)
