"""The root ``alignlings`` Typer application; commands register themselves from their own modules."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="alignlings",
    help="Practise DPO, GRPO and reward models by filling blanks, graded against a verified reference library.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)

train_app = typer.Typer(help="Train with the reference library (toy GRPO, DPO, reward model, GRPO).", no_args_is_help=True)
app.add_typer(train_app, name="train")


def _register() -> None:
    # Imported for their side effect of adding commands to `app` / `train_app`.
    from alignlings.cli import train_toy  # noqa: F401
    try:
        from alignlings.cli import practice_commands  # noqa: F401
    except ImportError:  # the practice engine is optional while it is being built
        pass


_register()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
