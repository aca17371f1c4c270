"""Leave-one-out (RLOO) baseline with advantage normalisation, as in NeMo-RL's GRPO.

rewards: [P, G], the G rewards of each prompt's completions. Completion i is compared with the mean
of the other G - 1 completions of its prompt (RLOO, arXiv 2402.14740: an unbiased baseline); with
normalize=True the difference is divided by the standard deviation of those same G - 1 rewards
(+ eps = 1e-6). Both statistics come from running sums, so one pass over the group serves every
completion: mean = (sum - r_i) / (G - 1), E[r^2] likewise, var = E[r^2] - mean^2.
A completion whose G - 1 neighbours all scored the same has nothing to be scaled against: its
advantage stays reward - baseline.
"""

import torch


def loo_baseline_and_std(rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n_others = rewards.shape[-1] - 1
    total = rewards.sum(dim=-1, keepdim=True)
    total_sq = rewards.square().sum(dim=-1, keepdim=True)
    baseline = (total - rewards) / n_others
    sq_baseline = (total_sq - rewards.square()) / n_others
    std = (sq_baseline - baseline.square()).clamp(min=0).sqrt()
    return baseline, std


def rloo_advantages(rewards: torch.Tensor, normalize: bool = True, eps: float = 1e-6) -> torch.Tensor:
    if rewards.dim() != 2 or rewards.shape[-1] < 3:
        raise ValueError(f"rewards: expected a [P, G] tensor with G >= 3 completions per prompt, "
                         f"got shape {tuple(rewards.shape)}")
    baseline, std = loo_baseline_and_std(rewards)
    advantages = rewards - baseline
    if normalize:
        advantages = advantages / (std + eps)
    return advantages


if __name__ == "__main__":
    # one success among four attempts (binary reward)
    print(rloo_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0]])))
