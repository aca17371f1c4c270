"""``alignlings train toy-grpo``: the exercise-6 toy GRPO run from the command line.

A thin layer over :func:`alignlings.toy_grpo.run_toy_grpo`. torch, transformers and matplotlib are
imported inside the command so that ``alignlings --help`` stays fast.
"""

from __future__ import annotations

import contextlib
import gc
from pathlib import Path
from typing import Optional

import typer



def _check_iterations(value: int) -> int:
    if value < 1:
        raise typer.BadParameter(f"expected an int >= 1, got {value}")
    return value


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


def _save_plot(result, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_p, ax_loss) = plt.subplots(2, 1, figsize=(6.4, 5.6), sharex=True)
    ax_p.plot(range(len(result.p_target)), result.p_target, marker=".", color="tab:blue")
    ax_p.axhline(0.9, color="grey", linestyle=":", linewidth=1, label="0.9")
    ax_p.set_ylim(0, 1.02)
    ax_p.set_ylabel('P("a" | <bos>)')
    ax_p.set_title(f"Toy GRPO (seed {result.config.seed}, G = {result.config.group_size})")
    ax_p.legend(loc="lower right")
    ax_p.grid(alpha=0.3)
    ax_loss.plot(range(1, len(result.loss) + 1), result.loss, marker=".", color="tab:red")
    ax_loss.set_xlabel("iteration")
    ax_loss.set_ylabel("loss  (-surrogate + beta*KL)")
    ax_loss.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def toy_grpo(
    seed: int = typer.Option(0, "--seed", help="torch.manual_seed before the policy is built."),
    iterations: int = typer.Option(
        40, "--iterations", callback=_check_iterations, help="Sample-then-update rounds (>= 1)."
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
                      train, save_plot, *, loss_format: str = ".3f") -> None:
    """What the toy commands share: the slow import announced, a progress bar redrawn from the
    training callback ``train(callback(step, p_target, loss))``, the plot, then JSON or one line."""
    import json

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = Console(stderr=True)
    err.print("loading torch and transformers ...", style="dim")
    import transformers.models.gpt2.modeling_gpt2  # noqa: F401  (the slow import, before the bar starts)

    progress = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("P(a) = {task.fields[p]:.3f}  loss = {task.fields[loss]:" + loss_format + "}"),
        TimeElapsedColumn(),
        console=err,
        transient=json_output,
        # Redrawn from the callback, once a step: rich's default refresh thread wakes 10 times a
        # second and, on a loaded machine, its GIL hand-offs slowed training by about 20%.
        auto_refresh=False,
    )
    with progress:
        task = progress.add_task("train", total=total, p=float("nan"), loss=float("nan"))

        def on_step(step: int, p_target: float, loss: float) -> None:
            progress.update(task, completed=step, p=p_target, loss=loss, refresh=True)

        result = train(on_step)

    if plot is not None:
        save_plot(result, plot)
    if json_output:
        typer.echo(json.dumps(result.to_dict()))
        return
    typer.echo(
        f"P(a): {result.p_target_initial:.3f} -> {result.p_target_final:.3f} after {len(result.loss)} {unit} "
        f"({result.train_seconds:.2f} s of training, seed {seed})"
    )
    if plot is not None:
        typer.echo(f"plot: {plot}")
