"""GRPO advantages for a batch generated round by round.

The generator returns the completions of a batch of P prompts in rounds: first one completion for
every prompt, then a second for every prompt, and so on, G rounds in all (num_generations = G). Row
g * P + p of `rewards` is therefore the g-th completion of prompt p:

    P1_G1, P2_G1, P1_G2, P2_G2, P1_G3, P2_G3, P1_G4, P2_G4      (P = 2 prompts, G = 4)

Each completion is compared with the other completions of its own prompt: subtract the group's mean
reward and divide by the group's unbiased std (+ eps = 1e-4, as TRL). The advantages come back in the
same order as `rewards`.
"""

import torch


def grpo_advantages(rewards: torch.Tensor, num_generations: int, eps: float = 1e-4) -> torch.Tensor:
    if rewards.dim() != 1 or num_generations < 2 or rewards.numel() % num_generations:
        raise ValueError(f"rewards: expected a 1-D tensor whose length is a multiple of num_generations >= 2, "
                         f"got shape {tuple(rewards.shape)} and num_generations={num_generations}")
    # one group per prompt: its num_generations completions
    grouped = rewards.view(num_generations, -1)  # [G, P]: row g holds round g, column p prompt p
    mean = grouped.mean(dim=0).repeat(num_generations)
    std = grouped.std(dim=0).repeat(num_generations)
    return (rewards - mean) / (std + eps)


if __name__ == "__main__":
    # prompt 1: every answer right; prompt 2: every answer wrong (round-by-round order)
    r = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    print(grpo_advantages(r, 4))
