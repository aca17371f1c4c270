"""`alignlings interview`: a mock interview under a clock: concept questions, an exercise to write at
level 4 or 5, a bug and a prediction, then a report (``practice.interview``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from alignlings import i18n
from alignlings.cli.common import LangOption, PackOption, console, load, resolve_lang, session, usage, workspace

MSG = i18n.table("cli.interview")  # strings: locales/{en,zh}.toml [cli.interview]
LETTERS = "ABCDEFGH"


def _m(key: str, lang: str, **kw) -> str:
    return MSG[key][lang].format(**kw)


def interview(
    minutes: Annotated[int, typer.Option("--minutes", help="Time for the whole interview, in minutes.")] = 45,
    track: Annotated[str | None, typer.Option("--track", help="Draw from this track first (id or pack/id).")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Draw the same items again (default: a new draw).")] = None,
    items: Annotated[int | None, typer.Option("--items", help="How many items (default 6: three concept questions, "
                                                               "an exercise to write, a bug, a prediction).")] = None,
    level: Annotated[int | None, typer.Option("--level", help="Write the exercise at level 4 (body) or 5 "
                                                               "(from the statement); default: drawn.")] = None,
    assignment: Annotated[str | None, typer.Option("--assignment", help="A class interview's id (its seed, "
                                                                        "minutes and track are the teacher's).")] = None,
    stop: Annotated[bool, typer.Option("--stop", help="End the running interview now and show its report.")] = False,
    report: Annotated[bool, typer.Option("--report", help="Show the last interview's report.")] = False,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """A mock interview: a few items under a clock, no hints or solutions until the end, then a report
    (each item's verdict, feedback, time and what to review next). Run it again to resume."""
    lang = resolve_lang(lang)
    course = load(pack)
    out = console()
    with session(course, graded=True) as practice, usage():
        if report:
            _print_report(out, practice.interview_report(lang=lang), lang)
            return
        if stop:
            _print_report(out, practice.interview_finish(lang), lang)
            return
        view = practice.interview_start(seed=seed, minutes=minutes, track=track, items=items, level=level,
                                        assignment=assignment, lang=lang)
        out.print(_m("header", lang, n=len(view["items"]), left=_clock(view["seconds_left"]), seed=view["seed"]))
        folder = workspace() / "interview" / view["id"]
        for item in view["items"]:
            if item["answered"] and item["kind"] == "choice":
                continue
            if not _ask(out, practice, item, folder, lang):
                out.print(_m("paused", lang))
                return
            if practice.interview_current() is None:
                out.print(_m("time_up", lang))
                break
        _print_report(out, practice.interview_finish(lang), lang)


def _clock(seconds: int) -> str:
    from alignlings.practice.interview import clock

    return clock(seconds)


def _left(practice) -> str:
    state = practice.interview_current()
    return _clock(practice.interview_view()["seconds_left"]) if state else "00:00"


def _ask(out, practice, item: dict, folder: Path, lang: str) -> bool:
    """Ask one item; False when the learner pauses (the interview keeps running)."""
    from rich.markup import escape

    from alignlings.cli.show import markdown

    n = item["index"] + 1
    out.print(f"\n[bold]{n}. {escape(_m('slot_' + item['slot'], lang))}[/]  [dim]({_left(practice)})[/]")
    if item["kind"] == "choice":
        if item["statement"]:
            out.print(markdown(item["statement"]))
        out.print(markdown(item["prompt"]))
        for i, option in enumerate(item["options"]):
            out.print(f"  {LETTERS[i]}) {escape(option)}")
        last = LETTERS[len(item["options"]) - 1]
        while True:
            answer = typer.prompt(_m("choose", lang, last=last), default="", show_default=False).strip().upper()
            if answer == "Q":
                return False
            if len(answer) == 1 and answer in LETTERS[: len(item["options"])]:
                break
            out.print(_m("bad_choice", lang, last=last))
        practice.interview_answer(item["index"], choice=LETTERS.index(answer), lang=lang)
        out.print(_m("recorded", lang))
        return True
    path = folder / f"{n}-{item['exercise'].replace('/', '-')}.py"
    if not path.exists():  # never overwrite what the learner wrote (a resumed interview keeps it)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(item["start"], encoding="utf-8")
    out.print(markdown(item["statement"]))
    out.print(_m("file", lang, path=path, level=item["level"]) if item["level"] else _m("file_bug", lang, path=path))
    while True:
        answer = typer.prompt(_m("submit", lang), default="", show_default=False).strip().lower()
        if answer == "q":
            return False
        if answer in ("n", "s"):
            return True
        if practice.interview_current() is None:
            return True
        result = practice.interview_answer(item["index"], code=path.read_text(encoding="utf-8"), lang=lang)
        out.print(("[green]" if result["passed"] else "[red]") + escape(result["summary"]) + "[/]")
        if result["passed"]:
            return True


def _print_report(out, rep: dict, lang: str) -> None:
    from rich.markup import escape
    from rich.table import Table

    from alignlings.cli.show import markdown

    out.print(f"\n[bold]{_m('report', lang, right=rep['right'], total=rep['total'])}[/]")
    table = Table(show_edge=False, pad_edge=False, box=None)
    for col in ("#", _m("col_item", lang), _m("col_result", lang), _m("col_time", lang)):
        table.add_column(col, overflow="fold")
    for r in rep["items"]:
        mark = ("[green]✓[/]" if r["correct"] else "[red]✗[/]") if r["answered"] else "[dim]–[/]"
        seconds = "" if r["seconds"] is None else _clock(r["seconds"])
        title = f"{_m('slot_' + r['slot'], lang)}: {r['title']}"
        table.add_row(str(r["index"] + 1), escape(title), mark, seconds)
    out.print(table)
    for r in rep["items"]:
        if r["answered"] and not r["correct"]:
            out.print(f"\n[bold]{r['index'] + 1}.[/] " + escape(r["title"]))
            if r["file"]:  # the grader's lines, as they are
                for line in r["feedback"].splitlines():
                    out.print("  " + escape(line))
            else:
                out.print(markdown(r["feedback"]))
            if r["misconceptions"] and r["file"]:
                out.print(_m("misconceptions", lang, names=", ".join(r["misconceptions"])))
    if rep["review_next"]:
        out.print("\n" + _m("review_next", lang, items=", ".join(rep["review_next"])))
    if rep["practise_next"]:
        out.print(_m("practise_next", lang))
        for command in rep["practise_next"]:
            out.print(f"  {command}")
