"""`alignlings dev ...`: commands for pack authors and maintainers."""

from __future__ import annotations

import typer

from alignlings.cli.app import app
from alignlings.cli.common import PackOption, console, load

dev_app = typer.Typer(help="Commands for pack authors and maintainers.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(dev_app, name="dev")


@dev_app.command("check")
def dev_check(pack: PackOption = None) -> None:
    """Prove the pack: templates fail, references pass, misconceptions are rejected, texts exist in en and zh."""
    from alignlings.practice.devcheck import check_pack
    from alignlings.practice.grader import Grader

    p = load(pack)
    out = console()
    with Grader(p, warm=True) as grader:
        reports = check_pack(p, grader)
    for r in reports:
        mark = "[green]ok[/]" if r.ok else "[red]FAIL[/]"
        out.print(f"{mark} {r.exercise}: {', '.join(r.checked)}")
        for problem in r.problems:
            out.print(f"    [red]-[/] {problem}")
    raise typer.Exit(0 if all(r.ok for r in reports) else 1)
