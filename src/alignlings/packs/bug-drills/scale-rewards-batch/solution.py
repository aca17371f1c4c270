"""GRPO advantages with TRL's three reward-scaling options.

rewards: [B] rewards of B = num_prompts * num_generations completions, the completions of one prompt
consecutive (TRL's layout). Every option subtracts the group's mean reward; they differ in what the
centred reward is divided by:
  "group" - the standard deviation of the prompt's own group (the GRPO paper),
  "batch" - one standard deviation over the whole batch (PPO-Lite, TRL PR #3935),
  "none"  - nothing (Dr. GRPO).
Standard deviations are unbiased (Bessel's correction), as TRL's nanstd; eps = 1e-4 as in TRL.
"""

import torch


def grpo_advantages(rewards: torch.Tensor, num_generations: int, scale_rewards: str = "group",
                    eps: float = 1e-4) -> torch.Tensor:
    if rewards.dim() != 1 or num_generations < 2 or rewards.numel() % num_generations:
        raise ValueError(f"rewards: expected a 1-D tensor whose length is a multiple of num_generations >= 2, "
                         f"got shape {tuple(rewards.shape)} and num_generations={num_generations}")
    grouped = rewards.view(-1, num_generations)  # [num_prompts, num_generations]
    mean = grouped.mean(dim=1).repeat_interleave(num_generations)
    if scale_rewards in ("group", "none"):
        # for "none" the std is only logged (TRL: frac_reward_zero_std)
        std = grouped.std(dim=1).repeat_interleave(num_generations)
    elif scale_rewards == "batch":
        # one std for the whole batch: every completion is scaled alike
        std = rewards.std().expand_as(rewards)
    else:
        raise ValueError(f"scale_rewards: expected 'group', 'batch' or 'none', got {scale_rewards!r}")
    advantages = rewards - mean
    if scale_rewards != "none":
        advantages = advantages / (std + eps)
    return advantages


if __name__ == "__main__":
    r = torch.tensor([0.0, 1.0, 0.0, 1.0, 0.50, 0.51, 0.50, 0.51])
    for mode in ("group", "batch", "none"):
        print(mode, grpo_advantages(r, 4, mode))
