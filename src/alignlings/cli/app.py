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

train_app = typer.Typer(help="Train with the reference library (toy GRPO, DPO, PPO, reward model, GRPO).",
                        no_args_is_help=True, rich_markup_mode=None)
app.add_typer(train_app, name="train")


COMMANDS: list[tuple[typer.Typer, str | None, str]] = [
    # (group, name (None: the function's), "module:function" in alignlings.cli); in `--help` order
    (app, None, "check:check"),
    (app, None, "cloze:cloze"),
    (app, None, "export:export"),
    (app, None, "hint:hint"),
    (app, None, "interview:interview"),
    (app, "list", "list:list_exercises"),
    (app, None, "predict:predict"),
    (app, None, "progress:progress"),
    (app, None, "quiz:quiz"),
    (app, None, "reset:reset"),
    (app, None, "review:review"),
    (app, None, "serve:serve"),
    (app, None, "show:show"),
    (app, None, "solution:solution"),
    (app, None, "start:start"),
    (train_app, "toy-grpo", "train_toy:toy_grpo"),
    (train_app, "toy-dpo", "train_toy_dpo:toy_dpo"),
    (train_app, "toy-ppo", "train_toy_ppo:toy_ppo"),
    (train_app, "demo", "train_trainers:demo_command"),
    (app, None, "watch:watch"),
]
"""Every command, in one list. Command modules define plain functions and never import this module
(no import circle); each keeps torch out of its top level, so `--help` stays fast."""


def _register() -> None:
    import importlib

    for group, name, target in COMMANDS:
        module, _, fn = target.partition(":")
        command = getattr(importlib.import_module(f"alignlings.cli.{module}"), fn)
        # a command whose help depends on the loaded pack (cloze: the snippets) brings its own class
        group.command(name, **({"cls": command.command_cls} if hasattr(command, "command_cls") else {}))(command)
    from alignlings.cli import dev, home, train_trainers

    app.callback(invoke_without_command=True)(home.home)
    app.add_typer(dev.dev_app, name="dev")
    for kind, command in train_trainers.trainer_commands.items():
        train_app.command(kind)(command)


_register()


def main() -> None:
    _private_home()
    app()


def _private_home() -> None:
    """Before anything is created: umask 077, and a home an older version left readable by other
    users made private, with a notice (practice.private)."""
    from alignlings.practice.private import private_umask, tighten

    private_umask()
    changed = tighten()
    if changed:
        from alignlings import i18n
        from alignlings.cli.common import _error_lang

        typer.echo(i18n.t("cli.private.tightened", _error_lang(), n=len(changed), first=changed[0]), err=True)


if __name__ == "__main__":
    # `python -m alignlings.cli.app`: commands register on the imported module's app, not on this
    # __main__ copy, so run that one (`python -m alignlings` is the shorter spelling).
    from alignlings.cli.app import main as _main

    _main()
