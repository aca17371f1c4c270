"""``alignlings train toy-grpo``: the exercise-6 toy GRPO run from the command line.

A thin layer over :func:`alignlings.toy_grpo.run_toy_grpo`. torch, transformers and matplotlib are
imported inside the command so that ``alignlings --help`` stays fast. What the toy commands
(``train toy-grpo``, ``toy-dpo``, ``toy-ppo``) share lives here once: the count check, the paused
garbage collector, the two-panel plot and the progress bar with its summary line.
"""

from __future__ import annotations

import contextlib
import gc
from pathlib import Path
from typing import Optional

import typer


def check_count(param: typer.CallbackParam, value: int) -> int:
    """typer callback: a count of iterations or steps, an int >= 1 (the error names the option)."""
    from alignlings.cli.common import UsageError

    if value < 1:
        raise UsageError("count", (param.opts or [str(param.name)])[0], got=value)
    return value


def say(key: str, **kw) -> str:
    """A line of the train commands (locales [cli.train]) in the language of ALIGNLINGS_LANG (or --lang
    given before ``train``): they have no --lang of their own."""
    from alignlings import i18n
    from alignlings.cli.common import resolve_lang

    return i18n.t(f"cli.train.{key}", resolve_lang(None), **kw)


_check_iterations = check_count


@contextlib.contextmanager
def _gc_paused():
    """Pause the cyclic garbage collector for the command's few seconds, restoring it afterwards.

    Importing torch + transformers allocates hundreds of thousands of long-lived objects and every
    automatic collection re-scans them; pausing the collector saves about 10% of the import CPU time
    (measured 5.4 -> 4.9 s CPU on a 2-core machine), more than typer, pydantic and rich cost this
    command (see benchmarks/bench_toy_grpo.py). The training loop itself makes little cyclic garbage.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def save_curves(path: Path, result, *, title: str, p_label: str, target: float, x_label: str,
                lower: list[tuple[str, list[float]]], lower_label: str | None = None) -> None:
    """A two-panel PNG: ``result.p_target`` (from 0) with the dashed ``target``, then the ``lower``
    curves (label, one value per step from 1) against the step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_p, ax_loss) = plt.subplots(2, 1, figsize=(6.4, 5.6), sharex=True)
    ax_p.plot(range(len(result.p_target)), result.p_target, marker=".", color="tab:blue")
    ax_p.axhline(target, color="grey", linestyle=":", linewidth=1, label=f"{target:g}")
    ax_p.set_ylim(0, 1.02)
    ax_p.set_ylabel(p_label)
    ax_p.set_title(title)
    ax_p.legend(loc="lower right")
    ax_p.grid(alpha=0.3)
    for (label, values), color in zip(lower, ("tab:red", "tab:green", "tab:purple", "tab:orange")):
        ax_loss.plot(range(1, len(values) + 1), values, marker=".", color=color, label=label)
    ax_loss.set_xlabel(x_label)
    if lower_label:
        ax_loss.set_ylabel(lower_label)
    if len(lower) > 1:
        ax_loss.legend(loc="center right")
    ax_loss.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _save_plot(result, path: Path) -> None:
    save_curves(path, result, title=f"Toy GRPO (seed {result.config.seed}, G = {result.config.group_size})",
                p_label='P("a" | <bos>)', target=0.9, x_label="iteration",
                lower=[("loss", result.loss)], lower_label="loss  (-surrogate + beta*KL)")


def toy_grpo(
    seed: int = typer.Option(0, "--seed", help="torch.manual_seed before the policy is built."),
    iterations: int = typer.Option(
        40, "--iterations", callback=check_count, help="Sample-then-update rounds (>= 1)."
    ),
    plot: Optional[Path] = typer.Option(
        None, "--plot", metavar="FILE.png", help="Save P(target) and loss against iteration to this PNG."
    ),
    json_output: bool = typer.Option(
        False, "--json", help="Print one JSON object (summary and curves) as the last line of stdout."
    ),
) -> None:
    """Teach a one-layer GPT-2 to answer <bos> with "a" by GRPO (exercise 6), in about a second on a CPU.

    Groups of 32 samples, 2 Adam steps per group (lr 3e-3), clip 0.2, k3 KL penalty 0.04.
    P("a") starts near 0.1 and should end above 0.9.
    With --json the last line of stdout is the result as one JSON object.
    """
    with _gc_paused():
        _run(seed, iterations, plot, json_output)


def _run(seed: int, iterations: int, plot: Optional[Path], json_output: bool) -> None:
    def train(callback):
        from alignlings.toy_grpo import ToyGRPOConfig, run_toy_grpo

        return run_toy_grpo(ToyGRPOConfig(seed=seed, iterations=iterations), callback=callback)

    run_with_progress("toy GRPO", iterations, "iterations", seed, plot, json_output, train, _save_plot,
                      loss_format="+.3f")


def run_with_progress(label: str, total: int, unit: str, seed: int, plot: Optional[Path], json_output: bool,
                      train, save_plot, *, loss_format: str = ".3f", columns: Optional[str] = None,
                      summary=None) -> None:
    """What the toy commands share: the slow import announced, a progress bar redrawn from the
    training callback ``train(callback(step, p_target, loss, **more))``, the plot, then JSON or one line.

    ``columns`` formats the bar's numbers from ``p``, ``loss`` and the ``more`` fields (default:
    P(a) and the loss in ``loss_format``); ``summary(result)`` is the closing line (default: P(a)
    before and after)."""
    import json
    import string

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if columns is None:
        columns = "P(a) = {p:.3f}  loss = {loss:" + loss_format + "}"
    names = [name for _, name, _, _ in string.Formatter().parse(columns) if name]
    err = Console(stderr=True)
    err.print(say("loading"), style="dim")
    import transformers.models.gpt2.modeling_gpt2  # noqa: F401  (the slow import, before the bar starts)

    progress = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(_fields_template(columns)),
        TimeElapsedColumn(),
        console=err,
        transient=json_output,
        # Redrawn from the callback, once a step: rich's default refresh thread wakes 10 times a
        # second and, on a loaded machine, its GIL hand-offs slowed training by about 20%.
        auto_refresh=False,
    )
    with progress:
        task = progress.add_task("train", total=total, **{name: float("nan") for name in names})

        def on_step(step: int, p_target: float, loss: float, **more: float) -> None:
            progress.update(task, completed=step, p=p_target, loss=loss, **more, refresh=True)

        result = train(on_step)

    if plot is not None:
        save_plot(result, plot)
    if json_output:
        typer.echo(json.dumps(result.to_dict()))
        return
    if summary is None:
        typer.echo(say("summary", before=f"{result.p_target_initial:.3f}", after=f"{result.p_target_final:.3f}",
                       n=len(result.loss), unit=say(unit), seconds=f"{result.train_seconds:.2f}", seed=seed))
    else:
        typer.echo(summary(result))
    if plot is not None:
        typer.echo(say("plot", path=plot))


def _fields_template(columns: str) -> str:
    """``"P = {p:.3f}"`` -> ``"P = {task.fields[p]:.3f}"``: rich formats a column from the task's fields."""
    import re

    return re.sub(r"\{(\w+)", lambda m: "{task.fields[" + m.group(1) + "]", columns)
