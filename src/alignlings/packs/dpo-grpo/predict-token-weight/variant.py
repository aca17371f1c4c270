"""Predict: how much one token weighs in the gradient under loss_type "grpo" and "dapo" (exercise
grpo-aggregation).

A batch of two completions with the same advantage A = +1, one of 2 tokens and one of 20, on-policy
(ratio 1), no KL. ``alignlings.losses.grpo.grpo_loss`` (TRL 1.16's GRPOTrainer aggregation) gives the
loss; autograd gives d loss / d log pi of every token, which is -A times the weight the aggregation
gives that token.
"""

from __future__ import annotations

import torch

from alignlings.losses.grpo import grpo_loss

SHORT, LONG = 2, 20  # completion lengths in tokens


def _weights(loss_type: str, short: int = SHORT, long: int = LONG) -> tuple[float, float]:
    """(weight of one token of the short completion, weight of one token of the long one)."""
    logps = torch.zeros(2, long, requires_grad=True)  # [B, T] log pi of the sampled tokens
    mask = torch.zeros(2, long)
    mask[0, :short] = 1.0
    mask[1, :] = 1.0
    advantages = torch.tensor([1.0, 1.0])  # [B], the same for both
    loss = grpo_loss(logps, None, None, advantages, mask, loss_type=loss_type)
    (grad,) = torch.autograd.grad(loss, logps)  # [B, T]; -A * weight on real tokens, 0 on padding
    return -grad[0, 0].item(), -grad[1, 0].item()


def run_token_weight() -> dict:
    """Two gradients (no randomness), one thread; milliseconds."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        grpo_short, grpo_long = _weights("grpo")
        dapo_short, dapo_long = _weights("dapo")
    finally:
        torch.set_num_threads(threads)
    return {
        "values": {
            "grpo_short": grpo_short,
            "grpo_long": grpo_long,
            "grpo_ratio": grpo_short / grpo_long,
            "dapo_short": dapo_short,
            "dapo_long": dapo_long,
            "dapo_ratio": dapo_short / dapo_long,
            # the share of the whole gradient that goes to the long completion's tokens
            "grpo_long_share": LONG * grpo_long / (LONG * grpo_long + SHORT * grpo_short),
            "dapo_long_share": LONG * dapo_long / (LONG * dapo_long + SHORT * dapo_short),
        },
    }


def supports_token_weight(result: dict) -> int:
    """The option whose pair of ratios (short-token weight / long-token weight under grpo, under
    dapo) the measured ratios match within 10%: 0 (1, 1), 1 (10, 10), 2 (1, 10), 3 (10, 1); -1 if none."""
    v = result["values"]
    ratio = LONG / SHORT
    options = {0: (1.0, 1.0), 1: (ratio, ratio), 2: (1.0, ratio), 3: (ratio, 1.0)}
    for index, (grpo, dapo) in options.items():
        if abs(v["grpo_ratio"] / grpo - 1) < 0.1 and abs(v["dapo_ratio"] / dapo - 1) < 0.1:
            return index
    return -1
