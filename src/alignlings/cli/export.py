"""`alignlings export --format ipynb`: one Jupyter notebook per exercise."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from alignlings.cli.common import LangOption, PackOption, UsageError, console, load, resolve_lang


def export(
    fmt: Annotated[str, typer.Option("--format", help="Export format (ipynb).")] = "ipynb",
    out: Annotated[Path, typer.Option("--out", help="Folder for the notebooks.")] = Path("alignlings-notebooks"),
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing notebooks.")] = False,
    lang: LangOption = None,
    pack: PackOption = None,
) -> None:
    """Write a notebook per exercise: statement, template cell, and a cell calling alignlings.check;
    a fill-in exercise also gets its level-4 and level-5 notebooks (ID_level4.ipynb, ID_level5.ipynb)."""
    import nbformat
    from rich.markup import escape

    from alignlings.cli.common import given_packs
    from alignlings.grading.levels import LEVELS, has_levels
    from alignlings.practice.notebook import exercise_notebook
    from alignlings.content.pack import default_pack_paths

    lang = resolve_lang(lang)
    if fmt != "ipynb":
        raise UsageError("format", "--format", lang=lang, got=fmt)
    p = load(pack)
    # the check cells name the packs as absolute folders (built-in ones by name): a notebook runs
    # from its own folder, often without $ALIGNLINGS_PACK
    named = [str(x) for x in given_packs(pack)] or default_pack_paths() or []
    packs = [part.id if part.builtin else str(part.path) for part in load(named).packs] if named else None
    if packs == ["dpo-grpo"]:
        packs = None
    out.mkdir(parents=True, exist_ok=True)
    c = console()
    for ex in p:
        path = out / f"{ex.key}.ipynb"  # ipo/dpo-loss.ipynb where two packs share an id
        if path.exists() and not force:
            c.print(escape(f"skip {path} (exists; --force to overwrite)"))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(exercise_notebook(ex, lang, pack=packs), str(path))
        c.print(escape(f"wrote {path}"))
        for level in (LEVELS if has_levels(ex) else ()):  # a fill-in exercise: its level-4 and level-5 notebooks
            at = out / f"{ex.key}_level{level}.ipynb"
            if at.exists() and not force:
                c.print(escape(f"skip {at} (exists; --force to overwrite)"))
                continue
            nbformat.write(exercise_notebook(ex, lang, pack=packs, level=level), str(at))
            c.print(escape(f"wrote {at}"))
