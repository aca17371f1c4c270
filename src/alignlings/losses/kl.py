"""Per-token estimators of KL(pi_theta || pi_ref) from log-probs of tokens sampled from pi_theta.

Schulman, "Approximating KL Divergence" (2020). With log r = log pi_ref - log pi_theta:
k1 = -log r (unbiased, high variance, can be negative), k2 = (log r)^2 / 2 (biased, low variance),
k3 = exp(log r) - log r - 1 (unbiased, never negative, low variance). verl calls them
"kl", "mse" and "low_var_kl". Everything is computed from the log difference: exp(a) / exp(b)
underflows to 0/0 for log-probs near -100 and loses precision well before that.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from alignlings._validate import check_choice, check_floating, check_same_shape


def kl_k1(log_ratio: torch.Tensor) -> torch.Tensor:
    """k1 = -log r = log pi_theta - log pi_ref."""
    return -log_ratio


def kl_k2(log_ratio: torch.Tensor) -> torch.Tensor:
    """k2 = (log r)^2 / 2."""
    return 0.5 * log_ratio.square()


def kl_k3(log_ratio: torch.Tensor) -> torch.Tensor:
    """k3 = r - log r - 1, with r = exp(log r); TRL's GRPO KL term.

    Written as expm1(log r) - log r: the same value and gradient (exp(log r) - 1), but exp(x) - x - 1
    cancels catastrophically near x = 0 and comes out negative (down to -6e-8 in float32), while
    expm1(x) rounds to a value >= x, so k3 is never negative.
    """
    return torch.expm1(log_ratio) - log_ratio


KL_ESTIMATORS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "k1": kl_k1,
    "k2": kl_k2,
    "k3": kl_k3,
    # verl's names (verl/trainer/ppo/core_algos.py::kl_penalty)
    "kl": kl_k1,
    "mse": kl_k2,
    "low_var_kl": kl_k3,
}


def kl_penalty(logps: torch.Tensor, ref_logps: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    """Per-token KL(pi_theta || pi_ref) estimate, same shape as ``logps``.

    Args:
        logps: log pi_theta of the sampled tokens, any shape (e.g. [B, T]).
        ref_logps: log pi_ref of the same tokens, same shape.
        estimator: "k1" | "k2" | "k3" (default, as TRL's GRPO), or verl's aliases
            "kl" (= k1), "mse" (= k2), "low_var_kl" (= k3). Unlike verl, no clamping is applied.
    """
    check_choice("estimator", estimator, KL_ESTIMATORS)
    check_floating("logps", logps)
    check_floating("ref_logps", ref_logps)
    check_same_shape("ref_logps", ref_logps, "logps", logps)
    log_ratio = ref_logps - logps  # log r = log pi_ref - log pi_theta
    return KL_ESTIMATORS[estimator](log_ratio)
