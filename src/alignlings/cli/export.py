"""`alignlings export --format ipynb`: one Jupyter notebook per exercise."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from alignlings.cli.app import app
from alignlings.cli.common import LangOption, PackOption, console, load, resolve_lang


@app.command()
def export(
    fmt: Annotated[str, typer.Option("--format", help="Export format (ipynb).")] = "ipynb",
    out: Annotated[Path, typer.Option("--out", help="Folder for the notebooks.")] = Path("alignlings-notebooks"),
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing notebooks.")] = False,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Write a notebook per exercise: statement, template cell, and a cell calling alignlings.check."""
    import nbformat

    from alignlings.practice.notebook import exercise_notebook

    if fmt != "ipynb":
        raise typer.BadParameter(f"expected 'ipynb', got {fmt!r}", param_hint="--format")
    lang = resolve_lang(lang)
    p = load(pack)
    out.mkdir(parents=True, exist_ok=True)
    c = console()
    for ex in p:
        path = out / f"{ex.id}.ipynb"
        if path.exists() and not force:
            c.print(f"skip {path} (exists; --force to overwrite)")
            continue
        nbformat.write(exercise_notebook(ex, lang), str(path))
        c.print(f"wrote {path}")
