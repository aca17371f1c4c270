"""Render a grader verdict for the terminal (rich)."""

from __future__ import annotations

from alignlings import i18n

L = i18n.table("cli.report")  # strings: locales/{en,zh}.toml [cli.report]
SHOWN_FAILURES = 4


def render_verdict(verdict: dict, lang: str, console) -> None:
    from rich.markup import escape
    from rich.panel import Panel
    from rich.table import Table

    ok = verdict["passed"]
    head = f"[bold {'green' if ok else 'red'}]{L['pass' if ok else 'fail'][lang]}[/]  {verdict['exercise']}"
    if verdict.get("level"):  # graded at level 4 or 5 (practice.levels)
        head += f"  [dim]{escape(i18n.t('practice.levels.name' + str(verdict['level']), lang))}[/]"
    console.print(head)
    if verdict.get("error"):
        err = verdict["error"]
        console.print(Panel(escape(err["message"] or ""), title=f"{L['error'][lang]}: {err['kind']}",
                            border_style="red", expand=False))
    if verdict["blanks"]:
        table = Table(show_header=False, box=None, pad_edge=False)
        for b in verdict["blanks"]:
            mark = {True: "[green]✓[/]", False: "[red]✗[/]", None: "[yellow]?[/]"}[b["passed"]]
            fill = escape(b["fill"] or "")
            table.add_row(mark, f"{L['blank'][lang]} {b['index']} ({escape(b['name'])})", f"[dim]{fill}[/]")
            if b["passed"] is not True and b["message"]:
                table.add_row("", "", escape(b["message"]))
        console.print(table)
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
        from alignlings.practice.bugdrill import render_verdict as render_bug

        render_bug(verdict, lang, console)
    if verdict.get("stdout"):
        console.print(Panel(escape(verdict["stdout"].rstrip()[-2000:]), title=L["output"][lang], expand=False))
    console.print(f"[dim]{L['isolation'][lang]}: {escape(i18n.reword('practice.isolation', verdict.get('isolation') or '', lang))}[/]")
