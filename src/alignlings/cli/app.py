"""The root ``alignlings`` Typer application; commands register themselves from their own modules."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="alignlings",
    help="Practise DPO, GRPO and reward models by filling blanks, graded against a verified reference library.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
    # plain click help: typer's rich help imports rich.markdown and friends (~0.15 s of start-up)
    rich_markup_mode=None,
)

train_app = typer.Typer(help="Train with the reference library (toy GRPO, DPO, reward model, GRPO).",
                        no_args_is_help=True, rich_markup_mode=None)
app.add_typer(train_app, name="train")


def _register() -> None:
    # Imported for their side effect of adding commands; each keeps torch out of its top level.
    from alignlings.cli import (  # noqa: F401
        check, cloze_cmd, dev, export, hint, home, list_cmd, progress_cmd, quiz, reset, show, solution, start,
        train_toy, watch,
    )
    from alignlings.cli import serve  # noqa: F401
    from alignlings.cli import train_trainers  # noqa: F401
    from alignlings.cli import train_toy_dpo  # noqa: F401
    from alignlings.cli import review  # noqa: F401


_register()


def main() -> None:
    app()


if __name__ == "__main__":
    # `python -m alignlings.cli.app`: commands register on the imported module's app, not on this
    # __main__ copy, so run that one (`python -m alignlings` is the shorter spelling).
    from alignlings.cli.app import main as _main

    _main()
