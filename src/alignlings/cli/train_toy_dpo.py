"""``alignlings train toy-dpo``: the toy-dpo exercise's DPO run from the command line.

A thin layer over :func:`alignlings.toy_dpo.run_toy_dpo`, shaped like ``train toy-grpo``. torch,
transformers and matplotlib are imported inside the command so that ``alignlings --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from alignlings.cli.train_toy import _gc_paused, check_count, run_with_progress, save_curves


_check_steps = check_count


def _save_plot(result, path: Path) -> None:
    save_curves(path, result, title=f"Toy DPO (seed {result.config.seed}, beta = {result.config.beta})",
                p_label='P("a" | <bos>)', target=0.9, x_label="step",
                lower=[("DPO loss", result.loss), ("rewards/margins", result.margin)])


def toy_dpo(
    seed: int = typer.Option(0, "--seed", help="torch.manual_seed before the policy is built."),
    steps: int = typer.Option(40, "--steps", callback=check_count, help="Adam steps on the 9 pairs (>= 1)."),
    plot: Optional[Path] = typer.Option(
        None, "--plot", metavar="FILE.png", help="Save P(target), loss and reward margin against step to this PNG."
    ),
    json_output: bool = typer.Option(
        False, "--json", help="Print one JSON object (summary and curves) as the last line of stdout."
    ),
) -> None:
    """Teach a one-layer GPT-2 to answer <bos> with "a" by DPO on 9 preference pairs, in about a second on a CPU.

    "a" is chosen over each other token; the frozen reference is the initial policy; sigmoid loss,
    beta 0.1, Adam lr 3e-2, full batch. P("a") starts near 0.1 and should end above 0.9.
    With --json the last line of stdout is the result as one JSON object.
    """
    with _gc_paused():
        _run(seed, steps, plot, json_output)


def _run(seed: int, steps: int, plot: Optional[Path], json_output: bool) -> None:
    def train(callback):
        from alignlings.toy_dpo import ToyDPOConfig, run_toy_dpo

        return run_toy_dpo(ToyDPOConfig(seed=seed, steps=steps), callback=callback)

    run_with_progress("toy DPO", steps, "steps", seed, plot, json_output, train, _save_plot)
