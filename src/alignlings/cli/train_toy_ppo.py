"""``alignlings train toy-ppo``: the toy PPO capstone's run from the command line.

A thin layer over :func:`alignlings.toy_ppo.run_toy_ppo`, shaped like ``train toy-grpo`` (the shared
parts are in :mod:`alignlings.cli.train_toy`). torch, transformers and matplotlib are imported inside
the command so that ``alignlings --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from alignlings.cli.train_toy import _gc_paused, check_count, run_with_progress, save_curves, say

#: the capstone's stated result: P("aaaa") above 0.75 and a mean score of the last five batches above 0.9
P_TARGET = 0.75
SCORE_TARGET = 0.9


def _save_plot(result, path: Path) -> None:
    save_curves(path, result, title=f"Toy PPO (seed {result.config.seed}, batch {result.config.batch_size})",
                p_label='P("aaaa" | <bos>)', target=P_TARGET, x_label="iteration",
                lower=[("mean score", result.score), ("policy loss", result.policy_loss),
                       ("value loss", result.value_loss)])


def _summary(result) -> str:
    reached = result.p_target_final > P_TARGET and result.score_final > SCORE_TARGET
    return say("summary_ppo", before=f"{result.p_target_initial:.4f}", after=f"{result.p_target_final:.3f}",
               score=f"{result.score_final:.3f}", n=result.iterations, seconds=f"{result.train_seconds:.2f}",
               seed=result.config.seed, p_target=P_TARGET, score_target=SCORE_TARGET,
               reached=say("reached" if reached else "not_reached"))


def toy_ppo(
    seed: int = typer.Option(0, "--seed", help="torch.manual_seed before the models are built."),
    iterations: int = typer.Option(40, "--iterations", callback=check_count,
                                   help="Sample-then-update rounds (>= 1)."),
    plot: Optional[Path] = typer.Option(
        None, "--plot", metavar="FILE.png",
        help='Save P("aaaa"), the mean score and the two losses against iteration to this PNG.'),
    json_output: bool = typer.Option(
        False, "--json", help="Print one JSON object (summary and curves) as the last line of stdout."
    ),
) -> None:
    """Teach a one-layer GPT-2 to answer <bos> with "aaaa" by PPO with a critic (the toy-ppo capstone).

    64 responses per iteration, KL-shaped rewards (k1, 0.05), GAE (gamma 1, lambda 0.95), 4 Adam steps
    (lr 1e-2) on the clipped policy loss + 0.5 x the clipped value loss. P("aaaa") starts near 0.0002
    and should end above 0.75, with a mean score of the last five batches above 0.9.
    With --json the last line of stdout is the result as one JSON object.
    """
    with _gc_paused():
        _run(seed, iterations, plot, json_output)


def _run(seed: int, iterations: int, plot: Optional[Path], json_output: bool) -> None:
    def train(callback):
        from alignlings.toy_ppo import ToyPPOConfig, run_toy_ppo

        def on_iteration(iteration: int, metrics: dict) -> None:
            callback(iteration, metrics["p_target"], metrics["policy_loss"], score=metrics["score"],
                     value_loss=metrics["value_loss"])

        return run_toy_ppo(ToyPPOConfig(seed=seed, iterations=iterations), callback=on_iteration)

    run_with_progress("toy PPO", iterations, "iterations", seed, plot, json_output, train, _save_plot,
                      columns='P("aaaa") = {p:.3f}  score = {score:.2f}  policy loss = {loss:+.3f}  '
                              "value loss = {value_loss:.3f}",
                      summary=_summary)
