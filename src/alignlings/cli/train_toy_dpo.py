"""``alignlings train toy-dpo``: the toy-dpo exercise's DPO run from the command line.

A thin layer over :func:`alignlings.toy_dpo.run_toy_dpo`, shaped like ``train toy-grpo``. torch,
transformers and matplotlib are imported inside the command so that ``alignlings --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from alignlings.cli.train_toy import _gc_paused, run_with_progress


def _check_steps(value: int) -> int:
    if value < 1:
        raise typer.BadParameter(f"expected an int >= 1, got {value}")
    return value


def _save_plot(result, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_p, ax_loss) = plt.subplots(2, 1, figsize=(6.4, 5.6), sharex=True)
    ax_p.plot(range(len(result.p_target)), result.p_target, marker=".", color="tab:blue")
    ax_p.axhline(0.9, color="grey", linestyle=":", linewidth=1, label="0.9")
    ax_p.set_ylim(0, 1.02)
    ax_p.set_ylabel('P("a" | <bos>)')
    ax_p.set_title(f"Toy DPO (seed {result.config.seed}, beta = {result.config.beta})")
    ax_p.legend(loc="lower right")
    ax_p.grid(alpha=0.3)
    ax_loss.plot(range(1, len(result.loss) + 1), result.loss, marker=".", color="tab:red", label="DPO loss")
    ax_loss.plot(range(1, len(result.margin) + 1), result.margin, marker=".", color="tab:green",
                 label="rewards/margins")
    ax_loss.set_xlabel("step")
    ax_loss.legend(loc="center right")
    ax_loss.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def toy_dpo(
    seed: int = typer.Option(0, "--seed", help="torch.manual_seed before the policy is built."),
    steps: int = typer.Option(40, "--steps", callback=_check_steps, help="Adam steps on the 9 pairs (>= 1)."),
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
