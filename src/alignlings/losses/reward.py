"""Bradley-Terry pairwise loss for reward models, as TRL 1.16's RewardTrainer.

Bradley & Terry (1952): P(y_w > y_l) = sigma(r(y_w) - r(y_l)); the loss is its negative log-likelihood.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from alignlings._validate import check_floating, check_ndim, check_same_shape, reduce


def bradley_terry_loss(
    chosen_rewards: torch.Tensor,
    rejected_rewards: torch.Tensor,
    *,
    margin: torch.Tensor | float | None = None,
    center_rewards_coefficient: float | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    """-log sigma(r_c - r_r - margin), plus TRL's centring penalty coef * mean((r_c + r_r)^2).

    Args:
        chosen_rewards: [B] scalar rewards of the preferred responses.
        rejected_rewards: [B] rewards of the rejected responses.
        margin: optional [B] (or scalar) required gap (Llama 2's margin loss); default None = 0.
        center_rewards_coefficient: optional weight of the centring term (Eisenstein et al., 2023),
            which keeps rewards near zero; default None = off, as TRL.
        reduction: "mean" (default, as TRL) | "sum" | "none". With "none" the centring term is added
            per pair as coef * (r_c + r_r)^2.
    """
    check_ndim("chosen_rewards", chosen_rewards, 1, "a [B] tensor of rewards")
    check_floating("chosen_rewards", chosen_rewards)
    check_same_shape("rejected_rewards", rejected_rewards, "chosen_rewards", chosen_rewards)
    logits = chosen_rewards - rejected_rewards  # [B]
    if margin is not None:
        margin = torch.as_tensor(margin, dtype=logits.dtype, device=logits.device)
        if margin.dim() != 0 and margin.shape != logits.shape:
            raise ValueError(
                f"margin: expected a scalar or shape {tuple(logits.shape)}, got shape {tuple(margin.shape)}"
            )
        logits = logits - margin
    per_pair = -F.logsigmoid(logits)  # [B]
    if center_rewards_coefficient:
        per_pair = per_pair + center_rewards_coefficient * (chosen_rewards + rejected_rewards) ** 2
    return reduce(per_pair, reduction)
