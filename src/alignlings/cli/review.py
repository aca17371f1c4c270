"""`alignlings review`: today's due review items one after another (spaced repetition with FSRS).

Quiz questions (and bug-or-not drills) are asked like `alignlings quiz`; code items are
cloze-style: a line's masked tokens, or one blank of an exercise (the one where a misconception was
made, or its hardest), graded in the sandbox. A bug drill shows its buggy file again, numbered; the
learner edits lines by number (or the whole file in $EDITOR) and the file is graded in the sandbox
like the drill. Each answer becomes an FSRS rating (alignlings.practice.review.rate): again when
wrong, hard after a hint, else good; after a right answer, h says it was hard and e that it was too
easy (the same review re-rated), Enter keeps it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any

import typer

from alignlings import i18n
from alignlings.cli.common import LangOption, PackOption, console, load, resolve_lang, saved, session, usage

MSG = i18n.table("cli.review")  # strings: locales/{en,zh}.toml [cli.review]
LETTERS = "ABCDEFGH"


def m(key: str, lang: str, **kw) -> str:
    return MSG[key][lang].format(**kw)


def when_text(iso: str | None, lang: str) -> str:
    if iso is None:
        return "—"
    when = datetime.fromisoformat(iso).astimezone()  # as the web page writes it, in local time
    if lang == "zh":
        return f"{when.year}年{when.month}月{when.day}日 {when:%H:%M}"
    return when.strftime("%Y-%m-%d %H:%M")


def due_line(counts: dict, lang: str) -> str:
    """The home screen's line: how many are due, and when the next comes when none is."""
    if counts["items"] == 0:
        return ""
    if counts["due"]:
        return m("due", lang, n=counts["due"], total=counts["items"]) + " `alignlings review`"
    if counts["next"] is None:
        return m("none", lang)
    return m("none_scheduled", lang, n=counts["items"], when=when_text(counts["next"], lang))


def review_line(pack, s, lang: str) -> str:
    """The home screen's review line for this learner ('' when nothing was practised yet)."""
    from alignlings.practice.session import Practice

    return due_line(Practice(s, pack).review_counts(), lang)


def review(
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Review at most N items now.")] = None,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Review what is due today: quiz questions, cloze lines, misconceptions you made, solved exercises, bug drills.

    Spaced repetition (FSRS): right answers come back at growing intervals, a wrong one tomorrow.
    """
    from rich.markup import escape

    lang = resolve_lang(lang)
    p, out = load(pack), console()
    with session(p, graded=True) as practice:
        counts = practice.review_counts()
        if counts["items"] == 0:
            out.print(m("empty", lang))
            return
        with usage():
            queue = practice.review_queue(limit=limit, lang=lang).items
        if not queue:  # how many are scheduled and when the next comes, and something to do meanwhile
            from alignlings.cli.common import next_text
            from alignlings.cli.layout import paragraph

            paragraph(out, due_line(counts, lang))
            paragraph(out, next_text(practice.next_exercise(), lang, pack))
            return
        out.print(f"[bold]{m('due', lang, n=counts['due'], total=counts['items'])}[/]")
        if len(queue) < counts["due"]:
            out.print(m("showing", lang, n=len(queue)))
        right = 0
        for i, prompt in enumerate(queue, start=1):
            shown = prompt.shown
            out.print(f"\n[bold]{escape(m('header', lang, i=i, n=len(queue), kind=m('kind_' + shown.kind, lang), title=shown.title))}[/]")
            started = time.monotonic()
            answer = ask(out, shown, lang, _hints(practice, shown, lang))
            seconds = time.monotonic() - started
            with usage():
                done = practice.review_answer(shown.pack, shown.item, answer, seconds=seconds, lang=lang)
            right += done.result["correct"]
            _feedback(out, shown, done.result, lang)
            if done.schedule is None:
                saved(out, done, lang)
                continue
            schedule, rating = done.schedule, done.rating
            if done.result["correct"]:
                schedule, rating = _rerate(out, practice, shown, schedule, rating, lang)
            days = schedule["interval_days"]
            out.print(m("rated", lang, rating=m("rating_" + rating, lang),
                        days=m("one_day", lang) if round(days) == 1 else m("days", lang, n=f"{days:g}"),
                        date=when_text(schedule["due"], lang)))
        after = practice.review_counts()
    out.print(f"\n[bold]{m('done', lang, n=len(queue), right=right)}[/]")
    out.print(m("due", lang, n=after["due"], total=after["items"]) + " " +
              m("next", lang, when=when_text(after["next"], lang)))


def _rerate(out, practice, shown, schedule: dict, rating: str, lang: str) -> tuple[dict, str]:
    """After a right answer: h (it was hard) or e (too easy) re-rates that review, Enter keeps it."""
    while True:
        key = typer.prompt(m("how", lang, rating=m("rating_" + rating, lang)), default="",
                           show_default=False).strip().lower()
        if key in ("", "h", "e"):
            break
        out.print(m("how_bad", lang))
    if not key:
        return schedule, rating
    with usage():
        rated = practice.review_rate(shown.pack, shown.item, "hard" if key == "h" else "easy")
    if rated.schedule is None:
        saved(out, rated, lang)
        return schedule, rating
    return rated.schedule, rated.rating


def _hints(practice, shown, lang: str) -> Callable[[], list[str]]:
    """The item's hint, asked of the session (which records it: a right answer is then Hard)."""
    def hints() -> list[str]:
        with usage():
            return practice.review_hint(shown.pack, shown.item, lang=lang).hints
    return hints


def ask(out, shown, lang: str, hints: Callable[[], list[str]]) -> Any:
    """Ask one review item as its prompt's type says and return the answer; ``?`` shows the hint
    that ``hints`` serves (the session records it)."""
    from alignlings.practice import review as rv

    if isinstance(shown, rv.QuizPrompt):
        return _ask_quiz(out, shown, lang)
    if isinstance(shown, rv.ClozePrompt):
        return _ask_cloze(out, shown, lang, hints)
    if isinstance(shown, rv.BugPrompt):
        return _ask_bug(out, shown, lang, hints)
    return _ask_blank(out, shown, lang, hints)


def _ask_quiz(out, shown, lang: str) -> int:
    from rich.markup import escape

    from alignlings.cli.show import latex_to_text

    out.print(escape(latex_to_text(shown.question)))
    for i, option in enumerate(shown.options):
        out.print(f"  {LETTERS[i]}) {escape(latex_to_text(option))}")
    last = LETTERS[len(shown.options) - 1]
    while True:
        answer = typer.prompt(m("letter", lang, last=last)).strip().upper()
        if len(answer) == 1 and answer in LETTERS[: len(shown.options)]:
            return LETTERS.index(answer)
        out.print(m("bad_letter", lang, last=last))


def _ask_cloze(out, shown, lang: str, hints: Callable[[], list[str]]) -> dict:
    from rich.syntax import Syntax

    from alignlings.practice import cloze as cz

    masked = [p for p in cz.maskable_positions(shown.source) if p.key in {x["key"] for x in shown.masked}]
    numbered = {p.key: f"[{i}]" for i, p in enumerate(masked, start=1)}
    out.print(Syntax(cz.render(shown.source, masked, numbered), "python", word_wrap=True,
                     highlight_lines={shown.line}))
    answers: dict[str, str] = {}
    for i, p in enumerate(masked, start=1):
        while True:
            text = typer.prompt(m("token", lang, n=i), default="", show_default=False).strip()
            if text != "?":
                break
            first = hints()  # one per masked token, in order
            out.print(m("hint", lang, text=m("starts_with", lang, c=first[i - 1] if i <= len(first) else "?")))
        answers[p.key] = text
    return answers


def _ask_blank(out, shown, lang: str, hints: Callable[[], list[str]]) -> str:
    from rich.markup import escape
    from rich.syntax import Syntax

    out.print(Syntax(shown.source, "python", word_wrap=True, highlight_lines={shown.line}))
    if shown.todo:
        out.print(escape(m("todo", lang, n=shown.blank, text=shown.todo)))
    if shown.variant == "fix":  # the misconceived fill is in the blank: correct it
        out.print(escape(m("fix_variant", lang, n=shown.blank, fill=shown.prefill)))
    while True:
        text = typer.prompt(m("fill", lang, n=shown.blank), default=shown.prefill or "",
                            show_default=False).strip()
        if text != "?":
            return text
        out.print(escape(m("hint", lang, text=hints()[0])) if shown.hint else m("no_hint", lang))


def _indent_like(text: str, line: str) -> str:
    """A line typed without indentation takes ``line``'s (typing leading spaces at a prompt is awkward)."""
    if text[:1].isspace() or not text:
        return text
    return line[: len(line) - len(line.lstrip())] + text


def edit_lines(lines: list[str], command: str, text: str | None) -> list[str]:
    """One line edit of the bug drill's file: ``N`` replaces line N with ``text``, ``+N`` inserts
    ``text`` after line N (``+0``: before the first), ``-N`` deletes line N (``text`` unused)."""
    op, number = (command[0], command[1:]) if command[:1] in ("+", "-") else ("=", command)
    if not number.isdigit():
        raise ValueError(f"command: expected N, +N or -N (a line number), got {command!r}")
    n = int(number)
    low = 0 if op == "+" else 1
    if not low <= n <= len(lines):
        raise ValueError(f"command: line {n} is not in 1..{len(lines)}")
    out = list(lines)
    if op == "-":
        del out[n - 1]
    elif op == "+":
        out.insert(n, _indent_like(text or "", lines[n - 1] if n else ""))
    else:
        out[n - 1] = _indent_like(text or "", lines[n - 1])
    return out


def _ask_bug(out, shown, lang: str, hints: Callable[[], list[str]]) -> str:
    from rich.markdown import Markdown
    from rich.markup import escape
    from rich.syntax import Syntax

    if shown.statement:
        out.print(Markdown(shown.statement))
    lines = shown.source.splitlines()
    changed = True
    while True:
        if changed:
            out.print(Syntax("\n".join(lines), "python", line_numbers=True, word_wrap=True))
            changed = False
        command = typer.prompt(m("bug_edit", lang, n=len(lines)), default="", show_default=False).strip()
        if not command:
            return "\n".join(lines) + "\n"
        if command == "?":
            out.print(escape(m("hint", lang, text=hints()[0])) if shown.hint else m("no_hint", lang))
            continue
        if command.lower() == "e":
            edited = typer.edit("\n".join(lines) + "\n", extension=".py", require_save=False)
            if edited is not None:
                lines, changed = edited.splitlines(), True
            continue
        try:
            edit_lines(lines, command, "")  # a bad command is refused before any text is asked for
        except ValueError:
            out.print(m("bug_bad", lang, n=len(lines)))
            continue
        text = None
        if not command.startswith("-"):
            current = lines[int(command) - 1].strip() if command.isdigit() else ""
            text = typer.prompt(m("bug_line", lang, n=command.lstrip("+")), default=current, show_default=False)
        lines, changed = edit_lines(lines, command, text), True


def _feedback(out, shown, result: dict, lang: str) -> None:
    from rich.markup import escape

    from alignlings.practice import review as rv

    if result["correct"]:
        out.print(f"[green]{m('right', lang)}[/]")
    else:
        expected = result["expected"]
        if isinstance(shown, rv.QuizPrompt):
            expected = LETTERS[expected]
        if isinstance(shown, rv.BugPrompt):  # the fix, a diff, is printed below
            out.print(f"[red]{escape(m('bug_wrong', lang))}[/]")
        elif expected is None:  # withheld: it would solve an exercise not solved (nor its solution seen)
            out.print(f"[red]{escape(m('wrong_withheld', lang))}[/]")
        else:
            out.print(f"[red]{escape(m('wrong', lang, expected=str(expected)))}[/]")
        if result.get("repeated"):
            out.print(f"[red]{m('repeated', lang)}[/]")
    if isinstance(shown, rv.QuizPrompt):
        for i, option in enumerate(result["options"]):
            mark = "[green]✓[/]" if option["correct"] else "[red]✗[/]"
            out.print(f"  {mark} {LETTERS[i]}) {escape(option['why'])}")
        if isinstance(shown, rv.PredictPrompt):  # the (cached) run's result, then why
            from alignlings.cli.predict import chart_table
            from alignlings.cli.show import latex_to_text, markdown

            out.print(escape(latex_to_text(result["result_text"] or result.get("run_error") or "")))
            if result.get("chart"):
                out.print(chart_table(result["chart"], lang))
            out.print(markdown(result["explanation"].strip()))
    elif isinstance(shown, rv.ClozePrompt):
        for i, r in enumerate(result["results"], start=1):
            mark = "[green]✓[/]" if r["correct"] else "[red]✗[/]"
            out.print(f"  {mark} [{i}] {escape(r['answer'] or '')} → {escape(r['token'])}")
    elif isinstance(shown, rv.BugPrompt):
        from rich.markdown import Markdown
        from rich.panel import Panel
        from rich.syntax import Syntax

        if result["feedback"]:
            out.print(escape(result["feedback"]))
        if not result["correct"] and result["expected"] is None:
            out.print(escape(m("bug_withheld", lang)))
        elif not result["correct"]:
            out.print(m("bug_fix", lang))
            out.print(Syntax(result["expected"].rstrip(), "diff"))
        elif result.get("story"):
            out.print(Panel(Markdown(result["story"]), title=m("bug_story", lang), expand=False))
    elif result["feedback"] and not result["correct"]:
        out.print(escape(result["feedback"]))
