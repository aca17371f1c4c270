"""PPO for language models: KL-shaped per-token rewards, GAE, the clipped value loss and the
token-level clipped policy loss.

PPO: Schulman et al., "Proximal Policy Optimization Algorithms" (2017). GAE: Schulman et al.,
"High-Dimensional Continuous Control Using Generalized Advantage Estimation" (2016). RLHF with a
per-token KL penalty and the score at the end: Ziegler et al. (2019), Stiennon et al. (2020),
Ouyang et al. (2022); the implementation details follow Huang et al., "The N+ Implementation Details
of RLHF with PPO" (2024), i.e. TRL's PPOTrainer before 1.0 (defaults gamma 1, lam 0.95,
cliprange 0.2, cliprange_value 0.2, vf_coef 0.1). TRL 1.16 has no PPO trainer, so these functions are
tested against an independent per-token loop, hand-worked figures and properties.

One difference from that PPOTrainer, on purpose: it added the score at index ``sequence_length + 1``
when that was inside the tensor, which is a padding position (TRL issues #1893, #3750), and its example
padded prompts on the left while its reward lookup assumed right padding (#2778); here the score
always lands on the last real token.

Shapes: B sequences, T completion tokens; ``mask`` is 1 on real completion tokens, 0 on padding.
"""

from __future__ import annotations

import torch

from alignlings._validate import check_choice, check_floating, check_ndim, check_range, check_same_shape
from alignlings.losses.grpo import clipped_surrogate_loss
from alignlings.losses.kl import KL_ESTIMATORS


def _check_mask(mask: torch.Tensor, like_name: str, like: torch.Tensor) -> torch.Tensor:
    if not isinstance(mask, torch.Tensor):
        raise ValueError(f"mask: expected a [B, T] tensor of 0/1, got {type(mask).__name__}")
    check_same_shape("mask", mask, like_name, like)
    return mask.to(like.dtype)


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the real tokens of the whole batch (0 when there are none)."""
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def last_token_index(mask: torch.Tensor) -> torch.Tensor:
    """[B] index of the last real token of each row (left or right padding, or holes).

    Raises ValueError when a row has no real token: its score would have nowhere to go.
    """
    check_ndim("mask", mask, 2, "a [B, T] mask")
    real = mask != 0
    if not bool(real.any(dim=1).all()):
        empty = (~real.any(dim=1)).nonzero().flatten().tolist()
        raise ValueError(f"mask: every row needs at least one real token for its score, rows {empty} have none")
    T = mask.shape[1]
    positions = torch.arange(T, device=mask.device).expand_as(real)
    return torch.where(real, positions, -1).max(dim=1).values  # [B]


def kl_shaped_rewards(
    scores: torch.Tensor,
    logps: torch.Tensor,
    ref_logps: torch.Tensor,
    mask: torch.Tensor,
    *,
    kl_coef: float,
    estimator: str = "k1",
) -> torch.Tensor:
    """Per-token rewards r_t = -kl_coef * KL_t, plus the sequence's score at its last real token.

    Args:
        scores: [B] the reward model's score of each completion.
        logps: [B, T] log pi_old of the sampled tokens (the policy that generated them).
        ref_logps: [B, T] log pi_ref of the same tokens.
        mask: [B, T] 1 on real completion tokens, 0 on padding (left, right, or holes).
        kl_coef: the KL coefficient (TRL's PPO name; its default was 0.05; Ouyang et al. use 0.02).
        estimator: per-token KL estimator of log r = log pi_ref - log pi_old: "k1" (default, TRL's PPO
            and the InstructGPT reward), "k2" or "k3" (see ``alignlings.losses.kl``).

    Returns:
        [B, T] rewards, 0 on padding.
    """
    check_choice("estimator", estimator, KL_ESTIMATORS)
    check_floating("logps", logps)
    check_ndim("logps", logps, 2, "[B, T] per-token log-probs")
    check_floating("ref_logps", ref_logps)
    check_same_shape("ref_logps", ref_logps, "logps", logps)
    mask = _check_mask(mask, "logps", logps)
    if not isinstance(scores, torch.Tensor) or scores.shape != (logps.shape[0],):
        got = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
        raise ValueError(f"scores: expected a [B] tensor with B = {logps.shape[0]}, got {got}")
    kl_coef = float(kl_coef)
    check_range("kl_coef", kl_coef, low=0.0)

    per_token_kl = KL_ESTIMATORS[estimator](ref_logps - logps)  # [B, T]
    rewards = -kl_coef * per_token_kl * mask  # [B, T], nothing on padding
    last = last_token_index(mask)  # [B]
    # the score belongs to the last real token, never to a padding position after it
    score_at_end = torch.zeros_like(rewards).scatter(1, last.unsqueeze(1), scores.to(rewards.dtype).unsqueeze(1))
    return rewards + score_at_end


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    *,
    gamma: float = 1.0,
    lam: float = 0.95,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation by a reverse scan over the real tokens.

    delta_t = r_t + gamma * V_{t+1} - V_t,  A_t = delta_t + gamma * lam * A_{t+1},  returns_t = A_t + V_t,
    where t+1 is the next *real* token (padding and holes are skipped) and V = 0, A = 0 after the last
    one: the episode ends with the completion, so nothing is bootstrapped past it.

    Args:
        rewards: [B, T] per-token rewards (e.g. ``kl_shaped_rewards``).
        values: [B, T] the value head's V_t (detached: GAE is a target, not part of the graph you train).
        mask: [B, T] 1 on real tokens, 0 elsewhere. Masked positions do not enter the scan.
        gamma: discount (default 1.0, TRL's PPO and Huang et al.).
        lam: GAE's lambda (default 0.95, TRL's PPO). lam = 1 gives returns minus values (Monte Carlo),
            lam = 0 the one-step TD error.

    Returns:
        (advantages, returns), each [B, T], 0 at masked positions. Not whitened: TRL's PPO whitened the
        advantages over the batch afterwards; do that in the trainer if wanted.
    """
    check_floating("rewards", rewards)
    check_ndim("rewards", rewards, 2, "[B, T] per-token rewards")
    check_floating("values", values)
    check_same_shape("values", values, "rewards", rewards)
    mask = _check_mask(mask, "rewards", rewards)
    check_range("gamma", float(gamma), low=0.0, high=1.0)
    check_range("lam", float(lam), low=0.0, high=1.0)

    B, T = rewards.shape
    next_value = rewards.new_zeros(B)  # V of the next real token; 0 after the last one
    next_advantage = rewards.new_zeros(B)
    advantages_reversed = []
    for t in reversed(range(T)):
        real = mask[:, t]  # [B]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        advantage = delta + gamma * lam * next_advantage
        # at a masked position keep carrying the next real token's value and advantage
        next_value = torch.where(real > 0, values[:, t], next_value)
        next_advantage = torch.where(real > 0, advantage, next_advantage)
        advantages_reversed.append(advantage * real)
    advantages = torch.stack(advantages_reversed[::-1], dim=1)  # [B, T]
    returns = (advantages + values) * mask
    return advantages, returns


def ppo_value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_range_value: float = 0.2,
) -> torch.Tensor:
    """Clipped value loss: 0.5 * masked mean of max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2).

    Args:
        values: [B, T] the value head's current predictions (with gradient).
        old_values: [B, T] its predictions when the rollout was made (the GAE values).
        returns: [B, T] targets from ``gae``.
        mask: [B, T] 1 on real tokens.
        clip_range_value: c (default 0.2, TRL's PPO ``cliprange_value``); the prediction may move at most
            c from the old one before its gradient stops (unless the unclipped error is the larger).

    Returns:
        A scalar; the mean is over the real tokens of the batch, as TRL's PPO.
    """
    check_floating("values", values)
    check_ndim("values", values, 2, "[B, T] value predictions")
    check_same_shape("old_values", old_values, "values", values)
    check_same_shape("returns", returns, "values", values)
    mask = _check_mask(mask, "values", values)
    check_range("clip_range_value", float(clip_range_value), low=0.0)

    values_clipped = torch.clamp(values, old_values - clip_range_value, old_values + clip_range_value)
    loss_unclipped = (values - returns).square()
    loss_clipped = (values_clipped - returns).square()
    # the max is pessimistic, as the policy's min: a clipped prediction cannot hide a large error
    return 0.5 * _masked_mean(torch.max(loss_unclipped, loss_clipped), mask)


def ppo_policy_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_range: float = 0.2,
) -> torch.Tensor:
    """Token-level clipped surrogate, -min(rho * A, clip(rho, 1 - c, 1 + c) * A), masked mean over tokens.

    Args:
        logps: [B, T] log pi_theta of the sampled tokens (with gradient).
        old_logps: [B, T] log pi_old recorded at sampling time.
        advantages: [B, T] per-token advantages (PPO, from ``gae``) or [B] one per sequence (GRPO/RLOO).
        mask: [B, T] 1 on real tokens.
        clip_range: c (default 0.2, TRL's PPO ``cliprange`` and the PPO paper's epsilon).

    Returns:
        A scalar: the mean over all real tokens of the batch (TRL's PPO ``masked_mean``; GRPO's "bnpo").
        The same clipped-surrogate code as ``grpo_loss``.
    """
    check_floating("logps", logps)
    check_ndim("logps", logps, 2, "[B, T] per-token log-probs")
    check_floating("old_logps", old_logps)
    check_same_shape("old_logps", old_logps, "logps", logps)
    mask = _check_mask(mask, "logps", logps)
    B, T = logps.shape
    if not isinstance(advantages, torch.Tensor) or advantages.shape not in ((B,), (B, T)):
        got = tuple(advantages.shape) if isinstance(advantages, torch.Tensor) else type(advantages).__name__
        raise ValueError(f"advantages: expected shape ({B},) or ({B}, {T}), got {got}")
    check_range("clip_range", float(clip_range), low=0.0)
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)  # [B, 1]: every token of sequence i gets A_i

    log_ratio = logps - old_logps  # [B, T]
    ratio = torch.exp(log_ratio)
    per_token_loss = clipped_surrogate_loss(ratio, advantages, clip_range, clip_range)  # [B, T]
    return _masked_mean(per_token_loss, mask)


@torch.no_grad()
def ppo_policy_metrics(
    logps: torch.Tensor, old_logps: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, *,
    clip_range: float = 0.2,
) -> dict[str, float]:
    """TRL PPO's diagnostics over the real tokens: ``policy/clipfrac_avg`` (fraction of tokens where the
    clipped term is the one used, i.e. its loss is larger) and ``policy/approxkl_avg`` (0.5 * mean of
    log-ratio^2, the k2 estimate of KL(pi_old || pi_theta))."""
    mask = mask.to(logps.dtype)
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
    log_ratio = logps - old_logps
    ratio = torch.exp(log_ratio)
    loss_unclipped = -adv * ratio
    loss_clipped = -adv * torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
    clipped = (loss_clipped > loss_unclipped).to(logps.dtype)
    return {
        "policy/clipfrac_avg": _masked_mean(clipped, mask).item(),
        "policy/approxkl_avg": _masked_mean(0.5 * log_ratio.square(), mask).item(),
    }
