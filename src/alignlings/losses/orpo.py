"""ORPO: Monolithic Preference Optimization without Reference Model, as a pure function.

Hong, Lee and Thorne, "ORPO: Monolithic Preference Optimization without Reference Model" (2024),
Eqs. (4)-(7). No reference model: the preference term compares the *odds* of the chosen and the
rejected answer under the policy itself, and the SFT (NLL) term on the chosen answer is part of the
same loss. Equals TRL 1.16's ``trl.experimental.orpo.ORPOTrainer.odds_ratio_loss`` plus the NLL as
``get_batch_loss_metrics`` adds it.

Notation, all of shape [B]:
    logp_w, logp_l = average per-token log-probs of the chosen / rejected completion (TRL's
                     ``average_log_prob=True``): log P(y|x) in the paper is length-normalised
    odds(y|x)      = P(y|x) / (1 - P(y|x))
    log_odds       = log odds(y_w|x) - log odds(y_l|x)
                   = (logp_w - logp_l) - (log(1 - exp(logp_w)) - log(1 - exp(logp_l)))
    L_OR           = -log sigma(log_odds)
    L_ORPO         = L_SFT + lambda * L_OR        (lambda is TRL's ``beta``)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from alignlings._validate import check_floating, check_ndim, check_range, check_same_shape, reduce

#: -log 2: log1mexp switches branch here (Maechler, "Accurately computing log(1 - exp(-|a|))", 2012)
_LOG_HALF = -math.log(2.0)


def log1mexp(x: torch.Tensor) -> torch.Tensor:
    """log(1 - exp(x)) for x <= 0, accurate on both sides of -log 2 (as TRL's ``log1mexp``).

    Near 0, 1 - exp(x) cancels, so -expm1(x) is used; far below, exp(x) is tiny and log1p(-exp(x))
    keeps its digits. x = 0 gives -inf (a probability of exactly 1 has infinite odds).

    Each branch sees only inputs on its own side (TRL's does not): torch.where back-propagates
    through both branches, and log1p(-exp(x)) at x ~ -1e-30 is -inf, whose 0 * inf gradient is NaN.
    """
    far = x < _LOG_HALF
    x_far = torch.where(far, x, torch.full_like(x, 2 * _LOG_HALF))  # [..], every value < -log 2
    x_near = torch.where(far, torch.full_like(x, _LOG_HALF), x)  # [..], every value >= -log 2
    return torch.where(far, torch.log1p(-torch.exp(x_far)), torch.log(-torch.expm1(x_near)))


def orpo_log_odds(policy_chosen_logps: torch.Tensor, policy_rejected_logps: torch.Tensor) -> torch.Tensor:
    """log odds(y_w|x) - log odds(y_l|x) from average log-probs, [B] (TRL's ``log_odds``).

    Log-probs are clamped to at most -tiny (the dtype's smallest normal number) before log1mexp:
    an average log-prob of exactly 0 (every token predicted with probability 1, which float32's
    log-softmax returns once a logit leads by ~17 nats) would make the odds infinite and the
    gradient NaN; TRL's code gives NaN there, this gives a finite value and zero gradient through
    the saturated side. Below -tiny the two are the same function.
    """
    tiny = torch.finfo(policy_chosen_logps.dtype).tiny
    chosen = policy_chosen_logps.clamp(max=-tiny)
    rejected = policy_rejected_logps.clamp(max=-tiny)
    log_odds_chosen = chosen - log1mexp(chosen)  # log(p / (1 - p))
    log_odds_rejected = rejected - log1mexp(rejected)
    return log_odds_chosen - log_odds_rejected


def _check(policy_chosen_logps, policy_rejected_logps) -> None:
    for name, t in (("policy_chosen_logps", policy_chosen_logps), ("policy_rejected_logps", policy_rejected_logps)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name}: expected a torch.Tensor of shape [B], got {type(t).__name__}")
        check_floating(name, t)
    check_ndim("policy_chosen_logps", policy_chosen_logps, 1, "a [B] tensor of average completion log-probs")
    check_same_shape("policy_rejected_logps", policy_rejected_logps, "policy_chosen_logps", policy_chosen_logps)
    with torch.no_grad():
        for name, t in (("policy_chosen_logps", policy_chosen_logps),
                        ("policy_rejected_logps", policy_rejected_logps)):
            if bool((t > 0).any()):
                raise ValueError(f"{name}: expected log-probabilities <= 0, got a maximum of {t.max().item():.4g}")


def orpo_loss(
    policy_chosen_logps: torch.Tensor,
    policy_rejected_logps: torch.Tensor,
    *,
    beta: float = 0.1,
    nll_loss: torch.Tensor | float | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    """ORPO's loss  L_SFT - beta * log sigma(log_odds);  equals TRL 1.16's ORPOTrainer.

    Args:
        policy_chosen_logps: [B] *average* per-token log-prob of each chosen completion (sum over
            completion tokens divided by their count; TRL's ``get_batch_logps(average_log_prob=True)``).
            Must be <= 0.
        policy_rejected_logps: [B] the same for the rejected completion.
        beta: lambda of the paper, the weight of the odds-ratio term (default 0.1, TRL's
            ``ORPOConfig.beta`` and the paper's setting for its Mistral models).
        nll_loss: the SFT term L_SFT: a scalar (TRL: token-mean cross-entropy of the chosen
            sequences over prompt *and* completion, ``concatenated_forward``'s ``chosen_nll_loss``)
            or [B] per-pair values; added to every pair's odds-ratio term before the reduction, so
            with a scalar and ``reduction="mean"`` the result is TRL's ``nll - losses.mean()``.
            None (default) leaves the SFT term out (the odds-ratio term alone).
        reduction: "mean" (default) | "sum" | "none" ([B] per pair).

    Returns:
        The reduced loss. Where an average log-prob is exactly 0 the odds are infinite; see
        :func:`orpo_log_odds` for how that is kept finite.
    """
    _check(policy_chosen_logps, policy_rejected_logps)
    check_range("beta", float(beta), low=0.0)
    log_odds = orpo_log_odds(policy_chosen_logps, policy_rejected_logps)  # [B]
    ratio = F.logsigmoid(log_odds)  # log sigma(log_odds), TRL's "log_odds_ratio" metric before the mean
    losses = -beta * ratio  # [B]
    if nll_loss is not None:
        nll = torch.as_tensor(nll_loss, dtype=losses.dtype, device=losses.device)
        if nll.dim() not in (0, 1) or (nll.dim() == 1 and nll.shape != losses.shape):
            raise ValueError(f"nll_loss: expected a scalar or a [B] tensor with B = {losses.shape[0]}, "
                             f"got shape {tuple(nll.shape)}")
        losses = nll + losses
    return reduce(losses, reduction)


def orpo_metrics(policy_chosen_logps: torch.Tensor, policy_rejected_logps: torch.Tensor, *,
                 beta: float = 0.1) -> dict[str, float]:
    """TRL's ORPO metrics as floats: ``rewards/chosen`` (beta * logp_w), ``rewards/rejected``,
    ``rewards/margins``, ``rewards/accuracies`` (strict), ``log_odds_ratio`` (mean log sigma(log_odds))
    and ``log_odds_chosen`` (mean log_odds)."""
    _check(policy_chosen_logps, policy_rejected_logps)
    with torch.no_grad():
        log_odds = orpo_log_odds(policy_chosen_logps, policy_rejected_logps)
        chosen_rewards = beta * policy_chosen_logps
        rejected_rewards = beta * policy_rejected_logps
        return {
            "rewards/chosen": chosen_rewards.mean().item(),
            "rewards/rejected": rejected_rewards.mean().item(),
            "rewards/margins": (chosen_rewards - rejected_rewards).mean().item(),
            "rewards/accuracies": (chosen_rewards > rejected_rewards).float().mean().item(),
            "log_odds_ratio": F.logsigmoid(log_odds).mean().item(),
            "log_odds_chosen": log_odds.mean().item(),
        }
