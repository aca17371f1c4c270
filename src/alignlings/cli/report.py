"""Render a grader verdict for the terminal (rich)."""

from __future__ import annotations

from alignlings import i18n

L = i18n.table("cli.report")  # strings: locales/{en,zh}.toml [cli.report]
SHOWN_FAILURES = 4


def render_verdict(verdict: dict, lang: str, console, verbose: bool = False) -> None:
    from rich.markup import escape
    from rich.panel import Panel

    ok = verdict["passed"]
    head = f"[bold {'green' if ok else 'red'}]{L['pass' if ok else 'fail'][lang]}[/]  {verdict['exercise']}"
    if verdict.get("level"):  # graded at level 4 or 5 (practice.levels)
        head += f"  [dim]{escape(i18n.t('practice.levels.name' + str(verdict['level']), lang))}[/]"
    console.print(head)
    if verdict.get("error"):
        err = verdict["error"]
        console.print(Panel(escape(err["message"] or ""), title=f"{L['error'][lang]}: {err['kind']}",
                            border_style="red", expand=False))
    if verdict["blanks"]:  # one row per blank, its message under the fill; no line ends in spaces
        from alignlings.cli.layout import Column, grid

        rows = []
        for b in verdict["blanks"]:
            mark = {True: ("✓", "green"), False: ("✗", "red"), None: ("?", "yellow")}[b["passed"]]
            rows.append([mark, (f"{L['blank'][lang]} {b['index']} ({b['name']})", ""), (b["fill"] or "", "dim")])
            if b["passed"] is not True and b["message"]:
                rows.append([("", ""), ("", ""), (b["message"], "")])
        for line in grid([Column(""), Column(""), Column("")], rows, console.width, min_last=20, header=False):
            console.print(line)
    failed = [c for c in verdict["cases"] if not c["passed"]]
    n = len(verdict["cases"])
    console.print(f"{L['cases'][lang]}: {n - len(failed)}/{n}")
    for c in failed[:SHOWN_FAILURES]:
        console.print(f"  [red]✗[/] {escape('[' + c['kind'] + ']')} {escape(c['message'])}")
    if len(failed) > SHOWN_FAILURES:
        console.print(f"  [dim]{L['more'][lang].format(n=len(failed) - SHOWN_FAILURES)}[/]")
    if verdict.get("misconception"):  # a level-4/5 file whose outputs match a known mistake
        console.print(Panel(escape(verdict["misconception"]["message"]), border_style="yellow", expand=False))
    if verdict.get("bug"):  # a spot-the-bug drill: changed lines, wrong fix, region hint, the story
        from alignlings.content.bugdrill import render_verdict as render_bug

        render_bug(verdict, lang, console)
    if verdict.get("stdout"):
        console.print(Panel(escape(verdict["stdout"].rstrip()[-2000:]), title=L["output"][lang], expand=False))
    line = isolation_line(verdict.get("isolation") or "", lang, verbose)
    if line:
        console.print(f"[dim]{escape(line)}[/]")


def isolation_line(isolation: str, lang: str, verbose: bool = False) -> str:
    """How the check ran: one short line ("sandbox: isolated ..."), the whole description with
    ``verbose``; '' when no code ran (a quiz)."""
    if not isolation or isolation.startswith("none"):
        return ""
    if verbose:
        return f"{L['isolation'][lang]}: {i18n.reword('practice.isolation', isolation, lang)}"
    from alignlings.grading.sandbox import is_isolated

    return L["isolated_short" if is_isolated(isolation) else "unisolated_short"][lang]
