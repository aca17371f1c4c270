"""Group Relative Policy Optimization: group advantages and the clipped token-level loss.

GRPO: Shao et al., "DeepSeekMath" (2024); GSPO (sequence-level ratios): Zheng et al. (2025);
DAPO (token-level normalisation, asymmetric clipping): Yu et al. (2025); Dr. GRPO: Liu et al. (2025).
Everything follows TRL 1.16's ``GRPOTrainer`` (``_generate_and_score_completions`` for the
advantages, ``_compute_loss`` for the loss) so values and gradients equal TRL's.

Shapes: P prompts, G generations per prompt, B = P*G sequences, T completion tokens, K reward functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from alignlings._validate import as_tensor, check_choice, check_floating, check_ndim, check_range, check_same_shape
from alignlings.losses.kl import kl_k3

SCALE_REWARDS = ("group", "batch", "none")


def grpo_advantages(
    rewards,
    *,
    eps: float = 1e-4,
    scale_rewards: str = "group",
    reward_weights: Sequence[float] | torch.Tensor | None = None,
) -> torch.Tensor:
    """Group-relative advantages A = (r - mean_group(r)) / (std + eps).

    Args:
        rewards: [G] (one group), [P, G] (P prompts, G generations each), or [P, G, K] with K reward
            functions, which are combined first as sum_k w_k * r_k. Lists are accepted. NaN means "not
            scored" (a reward function returned None), as in TRL: a NaN among the K rewards counts as 0
            (nansum); a completion that no function scored is left out of its group's mean and std and
            gets advantage 0 (so does a group with fewer than 2 scored completions when its std is used).
        eps: added to the std (default 1e-4, TRL's; verl uses 1e-6, OpenRLHF 1e-9).
        scale_rewards: "group" (default, TRL's): divide by each group's std; "batch": subtract the
            group mean but divide by the std of all rewards; "none": only centre (Dr. GRPO).
            The std is unbiased (Bessel), as ``torch.std`` and TRL; numpy's default is not.
        reward_weights: [K] weights for a [P, G, K] input (default: all 1).

    Returns:
        Advantages with the shape of the combined rewards ([G] or [P, G]); a flat group gets all zeros.
    """
    check_choice("scale_rewards", scale_rewards, SCALE_REWARDS)
    check_range("eps", float(eps), low=0.0)
    rewards = as_tensor("rewards", rewards)
    check_floating("rewards", rewards)
    check_ndim("rewards", rewards, (1, 2, 3), "[G], [P, G] or [P, G, K] rewards")
    if rewards.dim() == 3:
        K = rewards.shape[-1]
        w = torch.ones(K, dtype=rewards.dtype) if reward_weights is None else as_tensor("reward_weights", reward_weights)
        if w.shape != (K,):
            raise ValueError(f"reward_weights: expected shape ({K},) for {K} reward functions, got {tuple(w.shape)}")
        unscored = torch.isnan(rewards).all(dim=-1)  # [P, G], no reward function scored it
        rewards = (rewards * w.to(rewards)).nansum(dim=-1)  # [P, G]
        rewards = rewards.masked_fill(unscored, float("nan"))
    elif reward_weights is not None:
        raise ValueError(
            f"reward_weights: only meaningful for a [P, G, K] rewards tensor, got rewards of shape {tuple(rewards.shape)}"
        )
    G = rewards.shape[-1]
    if scale_rewards == "group" and G < 2:
        raise ValueError(
            f"rewards: scale_rewards='group' needs at least 2 generations per group for a std, got group size {G}"
        )
    if scale_rewards == "batch" and rewards.numel() < 2:
        raise ValueError("rewards: scale_rewards='batch' needs at least 2 rewards for a std, got 1")

    # NaN-aware statistics (TRL's nanmean / nanstd), so unscored completions do not move the baseline.
    group_mean = rewards.nanmean(dim=-1, keepdim=True)  # [..., 1]
    advantages = rewards - group_mean  # [..., G]
    if scale_rewards == "group":
        advantages = advantages / (_nanstd(rewards, dim=-1) + eps)
    elif scale_rewards == "batch":
        advantages = advantages / (_nanstd(rewards) + eps)
    # An unscored completion (or a group with no usable std) carries no signal: advantage 0, as TRL.
    return advantages.nan_to_num(nan=0.0)


def _nanstd(x: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Unbiased (Bessel) std ignoring NaNs, keepdim; NaN where fewer than 2 values remain (TRL's nanstd)."""
    dims = tuple(range(x.dim())) if dim is None else (dim,)
    mean = x.nanmean(dim=dims, keepdim=True)
    count = (~torch.isnan(x)).sum(dim=dims, keepdim=True)
    sum_sq = ((x - mean) ** 2).nansum(dim=dims, keepdim=True)
    var = sum_sq / (count - 1).clamp(min=1)
    return torch.where(count > 1, var.sqrt(), torch.full_like(var, float("nan")))


def clipped_surrogate_loss(
    ratio: torch.Tensor,
    advantages: torch.Tensor,
    epsilon_low: float,
    epsilon_high: float,
    *,
    delta: float | None = None,
) -> torch.Tensor:
    """PPO's clipped surrogate, negated: -min(rho * A, clip(rho, 1 - eps_low, 1 + eps_high) * A), elementwise.

    Shared by ``grpo_loss`` and ``ppo_policy_loss``. ``ratio`` and ``advantages`` broadcast ([B, T] with
    [B, 1] or [B, T]); with ``delta`` the unclipped ratio is also capped at delta (TRL's two-sided clip),
    after the clipped one has been taken from the uncapped ratio, as TRL.
    """
    ratio_clipped = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high)
    if delta is not None:
        ratio = torch.clamp(ratio, max=delta)
    surrogate = ratio * advantages
    surrogate_clipped = ratio_clipped * advantages
    return -torch.min(surrogate, surrogate_clipped)  # [B, T] (or [B, 1] for sequence level)


# ---------------------------------------------------------------------------------------------
# Loss aggregation: how per-token losses [B, T] become one number. Each is a small function.
# ---------------------------------------------------------------------------------------------


def _agg_grpo(per_token_loss, mask, *, max_completion_length, num_items_in_batch):
    """DeepSeekMath's GRPO: mean over each sequence's tokens, then over sequences (length-biased)."""
    return ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()


def _agg_bnpo(per_token_loss, mask, *, max_completion_length, num_items_in_batch):
    """BNPO: sum over all tokens of the local batch, divided by their count."""
    return (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0)


def _agg_dr_grpo(per_token_loss, mask, *, max_completion_length, num_items_in_batch):
    """Dr. GRPO: divide by B * max_completion_length, a constant, so no length bias."""
    if max_completion_length is None:
        raise ValueError("max_completion_length: loss_type 'dr_grpo' needs a positive int, got None")
    return (per_token_loss * mask).sum() / (per_token_loss.size(0) * max_completion_length)


def _agg_dapo(per_token_loss, mask, *, max_completion_length, num_items_in_batch):
    """DAPO: divide by the number of completion tokens in the global batch (num_items_in_batch)."""
    normaliser = mask.sum() if num_items_in_batch is None else torch.as_tensor(num_items_in_batch, dtype=mask.dtype)
    return (per_token_loss * mask).sum() / normaliser.clamp(min=1.0)


GRPO_AGGREGATIONS: dict[str, Callable[..., torch.Tensor]] = {
    "grpo": _agg_grpo,
    "bnpo": _agg_bnpo,
    "dr_grpo": _agg_dr_grpo,
    "dapo": _agg_dapo,
}


def _check_grpo_inputs(logps, old_logps, ref_logps, advantages, mask, *, loss_type, beta, epsilon, epsilon_high,
                       delta, importance_sampling_level, max_completion_length):
    """``grpo_loss``'s argument checks (each error names the argument and what was expected).
    Returns the mask (ones by default, in logps' dtype), beta, epsilon_low and epsilon_high as floats."""
    check_choice("loss_type", loss_type, GRPO_AGGREGATIONS)
    check_choice("importance_sampling_level", importance_sampling_level, ("token", "sequence"))
    check_floating("logps", logps)
    check_ndim("logps", logps, 2, "[B, T] per-token log-probs")
    B, T = logps.shape
    if old_logps is not None:
        check_floating("old_logps", old_logps)
        check_same_shape("old_logps", old_logps, "logps", logps)
    if mask is None:
        mask = torch.ones_like(logps)
    else:
        check_same_shape("mask", mask, "logps", logps)
        mask = mask.to(logps.dtype)
    if not isinstance(advantages, torch.Tensor):
        raise ValueError(f"advantages: expected a torch.Tensor of shape ({B},), got {type(advantages).__name__}")
    if advantages.shape not in ((B,), (B, T)):
        raise ValueError(f"advantages: expected shape ({B},) or ({B}, {T}) for logps {(B, T)}, got {tuple(advantages.shape)}")
    beta = float(beta)
    check_range("beta", beta, low=0.0)
    if beta != 0.0:
        if ref_logps is None:
            raise ValueError(f"ref_logps: beta={beta} adds a KL penalty, so a [B, T] tensor is expected, got None")
        check_same_shape("ref_logps", ref_logps, "logps", logps)
    check_range("epsilon", float(epsilon), low=0.0)
    epsilon_low = float(epsilon)
    epsilon_high = epsilon_low if epsilon_high is None else float(epsilon_high)
    check_range("epsilon_high", epsilon_high, low=0.0)
    if delta is not None:
        check_range("delta", float(delta), low=1.0, low_open=True)
    if loss_type == "dr_grpo" and (max_completion_length is None or max_completion_length <= 0):
        raise ValueError(f"max_completion_length: loss_type 'dr_grpo' needs a positive int, got {max_completion_length!r}")

    return mask, beta, epsilon_low, epsilon_high


def grpo_loss(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    ref_logps: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    loss_type: str = "dapo",
    beta: float = 0.0,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    delta: float | None = None,
    importance_sampling_level: str = "token",
    use_bias_correction_kl: bool = True,
    max_completion_length: int | None = None,
    num_items_in_batch: int | torch.Tensor | None = None,
) -> torch.Tensor:
    """Clipped surrogate loss with an optional k3 KL penalty, aggregated as TRL 1.16's GRPOTrainer.

    Per token: ratio rho = pi_theta / pi_old (from log-probs), loss_t = -min(rho*A, clip(rho, 1-eps_low,
    1+eps_high)*A) + beta * KL_t, then aggregated over the completion mask by ``loss_type``.

    Args:
        logps: [B, T] log pi_theta of the sampled completion tokens (with gradient).
        old_logps: [B, T] log pi_old of the same tokens, recorded at sampling time; None means on-policy
            (old = logps.detach(): ratio 1 but the gradient of rho*A is kept, as TRL).
        ref_logps: [B, T] log pi_ref, needed when beta > 0; may be None when beta == 0.
        advantages: [B] one advantage per sequence (or [B, T] per token).
        mask: [B, T] 1 for completion tokens, 0 for padding (default: all ones).
        loss_type: "dapo" (default, TRL's), "grpo" (per-sequence mean, the DeepSeekMath paper's),
            "bnpo", "dr_grpo" (needs max_completion_length). See ``GRPO_AGGREGATIONS``.
        beta: KL coefficient (default 0.0, TRL's; the DeepSeekMath paper uses 0.04).
        epsilon: lower clip range eps_low (default 0.2, as TRL and the paper).
        epsilon_high: upper clip range (default None = epsilon; DAPO's clip-higher uses 0.28).
        delta: if set, the unclipped ratio is also capped at delta (two-sided clipping, TRL's ``delta``;
            default None, off).
        importance_sampling_level: "token" (default) or "sequence" (GSPO: one ratio per sequence,
            exp of the masked mean log-ratio, shape [B, 1]).
        use_bias_correction_kl: multiply the per-token k3 KL by the importance ratio (default True as
            TRL 1.16; the paper's plain k3 is False).
        max_completion_length: the generation budget T_max, used by dr_grpo only.
        num_items_in_batch: completion tokens in the global batch, the dapo divisor (default None = this
            batch's mask sum). TRL also divides every loss by the gradient-accumulation steps; that is the
            trainer's job here, so this function returns the loss of one micro-batch.

    Returns:
        A scalar loss.
    """
    mask, beta, epsilon_low, epsilon_high = _check_grpo_inputs(
        logps, old_logps, ref_logps, advantages, mask, loss_type=loss_type, beta=beta, epsilon=epsilon,
        epsilon_high=epsilon_high, delta=delta, importance_sampling_level=importance_sampling_level,
        max_completion_length=max_completion_length)
    B, T = logps.shape

    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)  # [B, 1]
    if old_logps is None:
        old_logps = logps.detach()

    # Importance ratio, from the log difference (exp(a)/exp(b) would underflow to 0/0).
    log_ratio = logps - old_logps  # [B, T]
    if importance_sampling_level == "token":
        log_importance_weights = log_ratio  # [B, T]
    else:  # GSPO: the length-normalised sequence log-ratio
        log_importance_weights = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)  # [B, 1]
    ratio = torch.exp(log_importance_weights)

    if beta != 0.0:
        per_token_kl = kl_k3(ref_logps - logps)  # [B, T], k3 of log r = log pi_ref - log pi_theta
        if use_bias_correction_kl:
            per_token_kl = per_token_kl * ratio

    per_token_loss = clipped_surrogate_loss(ratio, advantages, epsilon_low, epsilon_high, delta=delta)
    if beta != 0.0:
        per_token_loss = per_token_loss + beta * per_token_kl
    per_token_loss = per_token_loss.expand(B, T)

    aggregate = GRPO_AGGREGATIONS[loss_type]
    return aggregate(
        per_token_loss, mask, max_completion_length=max_completion_length, num_items_in_batch=num_items_in_batch
    )


@torch.no_grad()
def grpo_metrics(
    logps: torch.Tensor,
    old_logps: torch.Tensor | None,
    ref_logps: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    importance_sampling_level: str = "token",
) -> dict[str, float]:
    """TRL's GRPO diagnostics: ``kl`` (plain k3 over the masked tokens, when ref_logps is given),
    ``clip_ratio/low_mean`` (ratio < 1-eps_low with A < 0), ``clip_ratio/high_mean`` (ratio > 1+eps_high
    with A > 0) and ``clip_ratio/region_mean`` (either). At token level the clip fractions are over the
    masked tokens; at sequence level (one ratio per sequence) they are over the sequences, as TRL's."""
    epsilon_high = epsilon if epsilon_high is None else epsilon_high
    mask = torch.ones_like(logps) if mask is None else mask.to(logps.dtype)

    def masked_mean(x: torch.Tensor) -> float:  # over the completion tokens
        return ((x * mask).sum() / mask.sum().clamp(min=1.0)).item()

    out = {"clip_ratio/low_mean": 0.0, "clip_ratio/high_mean": 0.0, "clip_ratio/region_mean": 0.0}
    if ref_logps is not None:
        out["kl"] = masked_mean(kl_k3(ref_logps - logps))
    if old_logps is None and epsilon >= 0 and epsilon_high >= 0:
        # on-policy (one iteration per batch): the ratio is exp(0) = 1 exactly, never outside
        # [1 - eps, 1 + eps_high], so every clip fraction is exactly 0 (NaN log-probs compare False too)
        return out
    old_logps = logps if old_logps is None else old_logps
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
    log_ratio = logps - old_logps  # [B, T]
    if importance_sampling_level == "sequence":
        log_ratio = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)  # [B, 1]
    ratio = torch.exp(log_ratio)

    def fraction(x: torch.Tensor) -> float:
        if importance_sampling_level == "sequence" and x.shape[1] == 1:  # one ratio per sequence
            return x.mean().item()  # a fraction of sequences, not of tokens
        return masked_mean(x)

    low = ((ratio < 1 - epsilon) & (adv < 0)).to(mask.dtype)  # [B, T] or [B, 1]
    high = ((ratio > 1 + epsilon_high) & (adv > 0)).to(mask.dtype)
    out["clip_ratio/low_mean"] = fraction(low)
    out["clip_ratio/high_mean"] = fraction(high)
    out["clip_ratio/region_mean"] = fraction(torch.maximum(low, high))
    return out
