"""REINFORCE Leave-One-Out (RLOO) advantages.

Kool et al., "Buy 4 REINFORCE Samples, Get a Baseline for Free!" (2019); Ahmadian et al., "Back to
Basics: Revisiting REINFORCE Style Optimization for Learning from Human Feedback in LLMs" (2024).
With G completions of one prompt, completion i's baseline is the mean reward of the other G - 1:

    A_i = r_i - 1/(G-1) * sum_{j != i} r_j = G/(G-1) * (r_i - mean_j r_j).

The baseline leaves r_i out so that it does not depend on the sample it is subtracted from; then
E[grad log pi(y_i) * b_i] = 0 and the gradient stays unbiased (GRPO's group mean includes r_i,
which scales the advantage by (G-1)/G and makes it slightly biased for a finite group).
Everything follows TRL 1.16's ``RLOOTrainer._generate_and_score_completions``.
"""

from __future__ import annotations

import torch

from alignlings._validate import as_tensor, check_floating, check_ndim
from alignlings.losses.grpo import _nanstd


def rloo_advantages(rewards, *, num_generations: int, normalize: bool = False) -> torch.Tensor:
    """Leave-one-out advantages, one per completion, as TRL 1.16's RLOOTrainer.

    Args:
        rewards: [B] rewards, B = P * num_generations, the G completions of each prompt contiguous
            (TRL's order). Lists are accepted. NaN marks a completion that no reward function scored:
            it is left out of its siblings' baselines (the divisor is the scored count - 1) and gets
            advantage 0; so does the single scored completion of a group (0 / 0).
        num_generations: G, completions per prompt (TRL's name). G = 1 gives all-zero advantages
            (no sibling to compare with), as TRL.
        normalize: if True, standardise the advantages over the whole batch, (A - mean) / (std + 1e-4)
            with the unbiased std over the scored completions (TRL's ``normalize_advantages``,
            default False as TRL).

    Returns:
        [B] advantages.
    """
    rewards = as_tensor("rewards", rewards)
    check_floating("rewards", rewards)
    check_ndim("rewards", rewards, 1, "a flat [B] tensor of rewards, B = prompts * num_generations")
    if isinstance(num_generations, bool) or not isinstance(num_generations, int) or num_generations < 1:
        raise ValueError(f"num_generations: expected a positive int, got {num_generations!r}")
    B = rewards.shape[0]
    if B % num_generations != 0:
        raise ValueError(
            f"num_generations: the {B} rewards must split into groups of num_generations, got {num_generations}"
        )

    if num_generations == 1:
        advantages = torch.zeros_like(rewards)
    else:
        grouped = rewards.view(-1, num_generations)  # [P, G]
        scored = (~torch.isnan(grouped)).sum(dim=1, keepdim=True)  # [P, 1]
        group_sum = grouped.nansum(dim=1, keepdim=True)  # [P, 1]
        # the mean of the other scored siblings: leave r_i out of its own baseline
        baseline = (group_sum - grouped) / (scored - 1)  # [P, G]; NaN for unscored rows, 0/0 for a lone one
        advantages = (grouped - baseline).view(-1)  # [B]
    if normalize:
        advantages = (advantages - advantages.nanmean()) / (_nanstd(advantages).view(()) + 1e-4)
    # an unscored completion (or a lone scored one) carries no signal: advantage 0, as TRL
    return advantages.nan_to_num(nan=0.0)
